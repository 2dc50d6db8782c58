// The Automatic evaluators page loads this only while a run is in progress: its runs
// tables (#evaluator-progress) are kept up to date in place by live_region.js, until no run
// is running (the fresh page has no #evaluators-active).
"use strict";
if (document.getElementById("evaluators-active")) {
  window.keepRegionLive("evaluator-progress", function () {
    return Boolean(document.getElementById("evaluators-active"));
  });
}
