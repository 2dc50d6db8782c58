// Copy buttons (templates/recruit/recruitment_admin.html): a button with data-copy="<id>"
// copies that field's value. The buttons stay hidden without script or a clipboard; the
// field itself is selectable either way. Text is only ever set with textContent.
(function () {
  "use strict";
  if (!navigator.clipboard) return;
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    const field = document.getElementById(button.getAttribute("data-copy"));
    const status = button.parentElement.querySelector(".copy-status");
    if (!field) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(field.value).then(
        function () { if (status) status.textContent = "Copied."; },
        function () {
          field.select();
          if (status) status.textContent = "Could not copy: the address is selected, copy it with Ctrl+C.";
        }
      );
    });
  });
})();
