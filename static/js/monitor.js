// The live quality monitor (templates/annotate/studies/monitor.html). Every 5 seconds it
// fetches the page again and swaps in its figures (#monitor-figures), as evaluators.js does
// for runs: the action form below the table is never replaced, so a reason being typed,
// keyboard focus and the scroll position stay where the admin left them. A file rather
// than an inline script, so the Content-Security-Policy needs no 'unsafe-inline'; the new
// table comes from our own template, which escaped it.
"use strict";
(function () {
  var region = document.getElementById("monitor-figures");
  if (!region) { return; }
  var delay = 5000;

  function poll() {
    fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("monitor-figures");
        if (!fresh) { throw new Error("no figures on the page"); }
        region.replaceChildren.apply(region, Array.prototype.slice.call(fresh.childNodes));
        delay = 5000;
        window.setTimeout(poll, delay);
      })
      .catch(function () {
        delay = Math.min(delay * 2, 60000);  // the server is busy or gone: back off
        window.setTimeout(poll, delay);
      });
  }
  window.setTimeout(poll, delay);
})();
