// The study report page loads this only while something is still coming:
// - while the report is computed, it polls the progress endpoint (every 0.25 s at first, then up to every second; data-progress-url on the
//   <progress> element), moves the bar, and reloads the page once the report is done or
//   has failed;
// - once the numbers are shown but the worker is still drawing the plots (#report-plots
//   has data-pending), it fetches the page every 0.5 s at first, then up to every 2 seconds and swaps in the plots region,
//   so the figures appear without a reload (focus and scroll stay where the reader left them).
// A file rather than an inline script, so the Content-Security-Policy needs no
// 'unsafe-inline'; text set with textContent, and swapped markup comes from our own
// template, which escaped it.
"use strict";
(function () {
  // Poll soon at first, then less often: a report that is nearly done (a cached one whose
  // plots are being drawn, a small study) shows without waiting a whole period.
  function follow(fetchOnce, first, most) {
    var next = first;
    var wait = first;
    function step() {
      fetchOnce().then(function (again) {
        next = Math.min(next * 1.5, most);
        wait = next;
        if (again) { window.setTimeout(step, wait); }
      }).catch(function () {
        wait = Math.min(wait * 2, 15000);  // the server is busy or gone: back off
        window.setTimeout(step, wait);
      });
    }
    window.setTimeout(step, wait);
  }

  function ok(response) {
    if (!response.ok) { throw new Error("HTTP " + response.status); }
    return response;
  }

  var bar = document.getElementById("report-progress");
  if (bar) {
    var url = bar.getAttribute("data-progress-url");
    var label = document.getElementById("report-progress-text");
    follow(function () {
      return fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(ok)
        .then(function (response) { return response.json(); })
        .then(function (data) {
          if (data.status === "done" || data.status === "failed") {
            window.location.reload();
            return false;
          }
          bar.value = data.progress;
          bar.textContent = data.progress + "%";
          if (label) { label.textContent = data.progress + "%"; }
          return true;
        });
    }, 250, 1000);
    return;
  }

  var plots = document.getElementById("report-plots");
  if (plots && plots.hasAttribute("data-pending")) {
    follow(function () {
      return fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
        .then(ok)
        .then(function (response) { return response.text(); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("report-plots");
          if (!fresh) { throw new Error("no plots on the page"); }
          plots.replaceChildren.apply(plots, Array.prototype.slice.call(fresh.childNodes));
          if (fresh.hasAttribute("data-pending")) { return true; }
          plots.removeAttribute("data-pending");
          return false;
        });
    }, 500, 2000);
  }
})();
