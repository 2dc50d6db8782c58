// The study report page loads this only while the report is being computed. It polls the
// progress endpoint (data-progress-url on the <progress> element), moves the bar, and
// reloads the page once the report is done or has failed. A file rather than an inline
// script, so the Content-Security-Policy needs no 'unsafe-inline'; text set with textContent.
"use strict";
(function () {
  var bar = document.getElementById("report-progress");
  if (!bar) { return; }
  var url = bar.getAttribute("data-progress-url");
  var label = document.getElementById("report-progress-text");
  var delay = 1000;

  function poll() {
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) {
        if (data.status === "done" || data.status === "failed") {
          window.location.reload();
          return;
        }
        bar.value = data.progress;
        bar.textContent = data.progress + "%";
        if (label) { label.textContent = data.progress + "%"; }
        delay = 1000;
        window.setTimeout(poll, delay);
      })
      .catch(function () {
        delay = Math.min(delay * 2, 15000);  // the server is busy or gone: back off
        window.setTimeout(poll, delay);
      });
  }
  window.setTimeout(poll, delay);
})();
