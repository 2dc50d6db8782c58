// The live quality monitor (templates/annotate/studies/monitor.html): its figures
// (#monitor-figures) are kept up to date in place by live_region.js; the action form below
// the table is never replaced, so a reason being typed stays as the admin left it.
"use strict";
window.keepRegionLive("monitor-figures");
