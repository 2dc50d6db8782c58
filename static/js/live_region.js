// One region of a page kept up to date in place (the live quality monitor, the evaluators
// page): every 5 seconds the page is fetched again and the region's children are swapped for
// the fresh copy's, so keyboard focus, text being typed outside the region and the scroll
// position stay where the user left them. On an error it backs off (doubling, at most a
// minute). `keepGoing`, when given, is asked after each swap whether to poll again. A file
// rather than an inline script, so the Content-Security-Policy needs no 'unsafe-inline'; the
// fresh region comes from our own template, which escaped it.
"use strict";
window.keepRegionLive = function (id, keepGoing) {
  var region = document.getElementById(id);
  if (!region) { return; }
  var delay = 5000;

  function poll() {
    fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(id);
        if (!fresh) { throw new Error("no #" + id + " on the page"); }
        region.replaceChildren.apply(region, Array.prototype.slice.call(fresh.childNodes));
        delay = 5000;
        if (!keepGoing || keepGoing()) { window.setTimeout(poll, delay); }
      })
      .catch(function () {
        delay = Math.min(delay * 2, 60000);  // the server is busy or gone: back off
        window.setTimeout(poll, delay);
      });
  }
  window.setTimeout(poll, delay);
};
