// Announce the page's messages ("Rating submitted.", "Batch created ...") to screen readers.
// A message rendered with the page is not announced: a live region only speaks up when its
// content changes after it is in the accessibility tree. So the region (#announce, in
// base.html) is empty when the page loads, and the messages' text is put into it a moment
// later. Text only ever set with textContent.
(function () {
  "use strict";
  const region = document.getElementById("announce");
  const shown = document.querySelectorAll(".messages li");
  if (!region || !shown.length) return;
  const text = Array.prototype.map.call(shown, function (li) { return li.textContent.trim(); }).join(" ");
  // After the first paint, so the empty region has been exposed to assistive technology.
  window.requestAnimationFrame(function () {
    window.setTimeout(function () { region.textContent = text; }, 150);
  });
})();
