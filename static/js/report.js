// The study report page loads this only while the report is being computed: it reloads
// the page every 3 seconds until the report is done or has failed. A file rather than
// an inline script, so the Content-Security-Policy needs no 'unsafe-inline'.
"use strict";
window.setTimeout(function () { window.location.reload(); }, 3000);
