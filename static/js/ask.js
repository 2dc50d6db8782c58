// An asked question's page loads this while its answer job runs. It polls the status API
// (data-status-url on #ask-progress) every second; when more steps are done
// (steps_done grows) or the job finished, it fetches the page again and swaps in
// #ask-progress, so the queries, relevance decisions, article summaries and the answer
// appear as they are written, keyboard focus and scroll staying put. It stops once the
// job finished. Model text is never put in the page by this script: the swapped region
// comes from our own template, which escaped it. A file rather than an inline script, so
// the Content-Security-Policy needs no 'unsafe-inline'.
"use strict";
(function () {
  var region = document.getElementById("ask-progress");
  if (!region || !region.hasAttribute("data-running")) { return; }
  var url = region.getAttribute("data-status-url");
  var shown = region.getAttribute("data-steps-done");
  var delay = 1000;

  function ok(response) {
    if (!response.ok) { throw new Error("HTTP " + response.status); }
    return response;
  }

  function swap() {
    return fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(ok)
      .then(function (response) { return response.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("ask-progress");
        if (!fresh) { throw new Error("no progress on the page"); }
        region.replaceChildren.apply(region, Array.prototype.slice.call(fresh.childNodes));
        shown = fresh.getAttribute("data-steps-done");
        region.setAttribute("data-steps-done", shown);
        return !fresh.hasAttribute("data-running");
      });
  }

  function poll() {
    fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(ok)
      .then(function (response) { return response.json(); })
      .then(function (data) {
        if (String(data.steps_done) === shown && !data.finished) { return false; }
        return swap();
      })
      .then(function (finished) {
        delay = 1000;
        if (finished) { region.removeAttribute("data-running"); return; }
        window.setTimeout(poll, delay);
      })
      .catch(function () {
        delay = Math.min(delay * 2, 15000);  // the server is busy or gone: back off
        window.setTimeout(poll, delay);
      });
  }
  window.setTimeout(poll, delay);
})();
