// The batch form shows only the options the chosen design uses (progressive
// enhancement: without this script every field is shown and the server ignores the
// ones a design does not read). Fields are hidden with the `hidden` attribute, never
// with inline styles (the site's CSP forbids them).
(function () {
  "use strict";
  var design = document.getElementById("id_design");
  if (!design) return;
  // What each design reads (annotate/batches.py plan_batch).
  var uses = {
    k_raters: ["k"],
    balanced: ["k"],
    partial_overlap: ["share"],
    pairwise_overlap: ["m"],
    comparisons: ["k", "per_source"],
  };
  var optional = ["k", "share", "m", "per_source"];
  function field(name) {
    return document.querySelector('[data-field="' + name + '"]');
  }
  function update() {
    var wanted = uses[design.value] || optional;
    optional.forEach(function (name) {
      var box = field(name);
      if (box) box.hidden = wanted.indexOf(name) === -1;
    });
    // Stratifying only applies to a sample.
    var n = document.getElementById("id_n");
    var strat = field("stratify_by");
    if (n && strat) strat.hidden = n.value.trim() === "";
  }
  design.addEventListener("change", update);
  var n = document.getElementById("id_n");
  if (n) n.addEventListener("input", update);
  update();
  var preview = document.getElementById("preview");
  if (preview) preview.focus();
})();
