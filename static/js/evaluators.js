// The Automatic evaluators page loads this only while a run is in progress. Every 5 seconds
// it fetches the page again and swaps in its runs tables (#evaluator-progress), so the
// numbers move without reloading the page: keyboard focus and the scroll position stay
// where the admin left them. It stops once no run is running. A file rather than an
// inline script, so the Content-Security-Policy needs no 'unsafe-inline'; the new tables
// come from our own template, which escaped them.
"use strict";
(function () {
  var region = document.getElementById("evaluator-progress");
  if (!region || !document.getElementById("evaluators-active")) { return; }
  var delay = 5000;

  function poll() {
    fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("evaluator-progress");
        if (!fresh) { throw new Error("no progress on the page"); }
        region.replaceChildren.apply(region, Array.prototype.slice.call(fresh.childNodes));
        delay = 5000;
        if (document.getElementById("evaluators-active")) { window.setTimeout(poll, delay); }
      })
      .catch(function () {
        delay = Math.min(delay * 2, 60000);  // the server is busy or gone: back off
        window.setTimeout(poll, delay);
      });
  }
  window.setTimeout(poll, delay);
})();
