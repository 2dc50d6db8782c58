// Rating page: highlights (spans) on the summary and source, citation linking,
// draft autosave through the API, active-time tracking and keyboard shortcuts.
// The page works without this script for the plain questions (form posts).
//
// Safety: stored text (summaries are LLM output) is only ever inserted with
// textContent / text nodes, never as HTML. Offsets sent to the server count code
// points (as Python does), not UTF-16 units, so non-ASCII text round-trips exactly.
(function () {
  "use strict";
  const form = document.getElementById("rating-form");
  if (!form) return;
  const dataEl = document.getElementById("rating-data");
  const data = dataEl ? JSON.parse(dataEl.textContent) : { span_questions: {}, spans: {}, findings: [], sentences: [] };
  const editable = form.dataset.editable === "true";
  const apiUrl = form.dataset.apiUrl;
  const digitQuestion = form.dataset.digitQuestion;
  const versionInput = document.getElementById("id_version");
  const activeInput = document.getElementById("id_active_seconds");
  const statusEl = document.getElementById("save-status");
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;

  // ---------------------------------------------------------------- text offsets
  const texts = { summary: Array.from(data.summary_text || ""), source: Array.from(data.source_text || "") };
  function slice(target, start, end) { return texts[target].slice(start, end).join(""); }
  function cpLength(s) { return Array.from(s).length; }

  // ---------------------------------------------------------------- rendering
  const summaryEl = document.getElementById("summary-text");
  const sentenceEls = Array.from(document.querySelectorAll(".sent-text"));
  const nodeStart = new WeakMap();   // text node -> code point offset of its first char
  const spans = {};                  // question key -> list of span answers
  Object.keys(data.span_questions).forEach(function (key) { spans[key] = (data.spans[key] || []).slice(); });
  let focusedFinding = null;

  const el = window.ItemPage.el;

  // Renders text[base, end) into container with marks: [{start, end, cls, title, cite}].
  // Overlapping marks nest (in the order of `marks`); a citation mark becomes a focusable
  // control. One sweep over the cut points, keeping the marks that cover the current piece:
  // linear in the text and its marks (a line of 30,000 citations must not take minutes).
  function renderRange(container, target, base, end, marks) {
    container.textContent = "";
    const inside = [];
    marks.forEach(function (m, order) {
      const start = Math.max(m.start, base), stop = Math.min(m.end, end);
      if (stop > start) inside.push({ mark: m, order: order, start: start, end: stop });
    });
    const cuts = new Set([base, end]);
    inside.forEach(function (x) { cuts.add(x.start); cuts.add(x.end); });
    const points = Array.from(cuts).sort(function (a, b) { return a - b; });
    inside.sort(function (a, b) { return a.start - b.start || a.order - b.order; });
    let next = 0;
    let active = [];
    let citeEl = null;
    let citeMark = null;
    const pieces = document.createDocumentFragment();
    for (let i = 0; i + 1 < points.length; i++) {
      const s = points[i], e = points[i + 1];
      active = active.filter(function (x) { return x.end > s; });
      let added = false;
      while (next < inside.length && inside[next].start <= s) { active.push(inside[next]); next++; added = true; }
      if (added) active.sort(function (a, b) { return a.order - b.order; });
      // Every active mark covers [s, e): it started at or before s and ends at a cut after s.
      const covering = active.map(function (x) { return x.mark; });
      const cite = covering.find(function (m) { return m.cite; });
      let node = document.createTextNode(slice(target, s, e));
      nodeStart.set(node, s);
      covering.filter(function (m) { return !m.cite; }).forEach(function (m) {
        const mark = el("mark", m.cls);
        if (m.title) mark.title = m.title;
        mark.appendChild(node);
        node = mark;
      });
      if (cite) {
        if (cite !== citeMark) { citeEl = makeCite(cite); citeMark = cite; pieces.appendChild(citeEl); }
        citeEl.appendChild(node);
      } else {
        citeMark = null;
        pieces.appendChild(node);
      }
    }
    container.appendChild(pieces);
  }

  // ---------------------------------------------------------------- citations
  const refsInSource = new Set(data.sentences.map(function (s) { return s.ref; }).filter(Boolean));
  function citationMarks() {
    const marks = [];
    const text = texts.summary.join("");
    const re = /\[([^\[\]\n]{1,80})\]/g;
    let m;
    // Code point offsets, counted on from the previous match (not from 0 each time).
    let counted = 0, countedTo = 0;
    while ((m = re.exec(text)) !== null) {
      const refs = m[1].split(/[,;]\s*|\s+/).filter(Boolean);
      counted += cpLength(text.slice(countedTo, m.index));
      countedTo = m.index;
      marks.push({ start: counted, end: counted + cpLength(m[0]), cite: true, refs: refs, index: marks.length });
    }
    marks.forEach(function (mark) { mark.total = marks.length; });
    return marks;
  }
  // The summary's citations are one Tab stop (a roving tabindex: the one last focused, else
  // the first), so a summary citing seven times does not put seven stops before the first
  // question; the arrow keys, Home and End move between them. Each is a toggle button:
  // focus or hover shows its sentences in the context, Enter, Space or a click keeps them
  // shown (aria-pressed) until pressed again or another citation is pressed.
  let citeStop = 0;
  let pinnedCite = null; // {index, refs} of the pressed citation
  function citeElements() {
    return Array.prototype.slice.call(document.querySelectorAll("#summary-text .cite"));
  }
  function moveToCite(index) {
    const all = citeElements();
    if (!all.length) return;
    const target = all[Math.max(0, Math.min(all.length - 1, index))];
    all.forEach(function (c) { c.tabIndex = c === target ? 0 : -1; });
    target.focus();
  }
  function pressCite(mark) {
    const pressed = pinnedCite && pinnedCite.index === mark.index;
    pinnedCite = pressed ? null : { index: mark.index, refs: mark.refs };
    citeElements().forEach(function (c) {
      c.setAttribute("aria-pressed", pinnedCite && Number(c.dataset.citeIndex) === pinnedCite.index ? "true" : "false");
    });
    linkRefs(pinnedCite ? pinnedCite.refs : mark.refs, true);
  }
  function makeCite(mark) {
    const missing = mark.refs.filter(function (r) { return !refsInSource.has(r); });
    const c = el("span", "cite" + (missing.length ? " cite-missing" : ""));
    c.tabIndex = mark.index === Math.min(citeStop, mark.total - 1) ? 0 : -1;
    c.dataset.refs = mark.refs.join(" ");
    c.dataset.citeIndex = String(mark.index);
    c.setAttribute("role", "button");
    c.setAttribute("aria-pressed", pinnedCite && pinnedCite.index === mark.index ? "true" : "false");
    const where = "citation " + (mark.index + 1) + " of " + mark.total + ", reference " + mark.refs.join(", ");
    c.setAttribute("aria-label", missing.length
      ? where + ": not found in the context"
      : where + ": show its sentences in the context");
    if (missing.length) c.title = "Not found in the context: " + missing.join(", ");
    const on = function () { linkRefs(mark.refs, true); };
    // Leaving a citation shows the pressed one's sentences again (or none).
    const off = function () { linkRefs(pinnedCite ? pinnedCite.refs : mark.refs, !!pinnedCite); };
    c.addEventListener("mouseenter", on);
    c.addEventListener("focus", function () { citeStop = mark.index; on(); });
    c.addEventListener("mouseleave", off);
    c.addEventListener("blur", off);
    c.addEventListener("click", function () { pressCite(mark); });
    c.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      const moves = { ArrowRight: mark.index + 1, ArrowDown: mark.index + 1, ArrowLeft: mark.index - 1,
                      ArrowUp: mark.index - 1, Home: 0, End: mark.total - 1 };
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault(); // Space would scroll the page
        pressCite(mark);
      } else if (Object.prototype.hasOwnProperty.call(moves, event.key)) {
        event.preventDefault();
        moveToCite(moves[event.key]);
      }
    });
    return c;
  }
  function linkRefs(refs, on) {
    let first = null;
    document.querySelectorAll(".sentences li[data-ref]").forEach(function (li) {
      const hit = refs.indexOf(li.dataset.ref) !== -1;
      li.classList.toggle("ref-linked", on && hit);
      if (on && hit && !first) first = li;
    });
    if (first && first.scrollIntoView) first.scrollIntoView({ block: "nearest" });
  }

  // ---------------------------------------------------------------- marks
  function spanMarks(target) {
    const marks = [];
    Object.keys(spans).forEach(function (key) {
      spans[key].forEach(function (sp, i) {
        const label = data.span_questions[key].prompt + " #" + (i + 1);
        const notFactual = sp.answers && sp.answers.factual === "no";
        if (sp.target === target) {
          marks.push({ start: sp.start, end: sp.end, cls: "hl hl-" + key + (notFactual ? " hl-no" : ""), title: label });
        }
        if (sp.link && target === "source") {
          marks.push({ start: sp.link.start, end: sp.link.end, cls: "hl hl-" + key, title: label });
        }
      });
    });
    return marks;
  }
  function answeredFindings() {
    const answered = new Set();
    form.querySelectorAll(".finding").forEach(function (div) {
      if (div.querySelector("input[type=radio]:checked")) answered.add(div.dataset.finding);
    });
    return answered;
  }
  function findingMarks() {
    const answered = answeredFindings();
    return data.findings.filter(function (f) { return answered.has(f.id) || f.id === focusedFinding; }).map(function (f) {
      return { start: f.start, end: f.end, cls: "finding-hl" + (f.id === focusedFinding ? " finding-focus" : ""),
               title: "Result span" };
    });
  }
  function render() {
    if (summaryEl && data.summary_text !== undefined) {
      renderRange(summaryEl, "summary", 0, texts.summary.length, citationMarks().concat(spanMarks("summary")));
    }
    const sourceMarks = spanMarks("source").concat(findingMarks());
    sentenceEls.forEach(function (s) {
      renderRange(s, "source", Number(s.dataset.start), Number(s.dataset.end), sourceMarks);
    });
  }

  // ---------------------------------------------------------------- selections
  const lastSelection = { summary: null, source: null };
  function pointOffset(container, node, offset) {
    // A DOM (node, offset) inside container -> code point offset in its target text.
    if (node.nodeType !== Node.TEXT_NODE) {
      const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
      const child = node.childNodes[offset];
      let t;
      while ((t = walker.nextNode())) {
        if (!child || child === t || (child.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING) ||
            child.contains(t)) {
          return nodeStart.get(t);
        }
      }
      return null;
    }
    if (!nodeStart.has(node)) return null;
    return nodeStart.get(node) + cpLength(node.data.slice(0, offset));
  }
  function containerOf(node, target) {
    if (target === "summary") return summaryEl && summaryEl.contains(node) ? summaryEl : null;
    return sentenceEls.find(function (s) { return s.contains(node) || s === node; }) || null;
  }
  function endOf(container) { return container === summaryEl ? texts.summary.length : Number(container.dataset.end); }
  document.addEventListener("selectionchange", function () {
    const sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    const r = sel.getRangeAt(0);
    ["summary", "source"].forEach(function (target) {
      const a = containerOf(r.startContainer, target), b = containerOf(r.endContainer, target);
      if (!a || !b) return;
      let start = pointOffset(a, r.startContainer, r.startOffset);
      let end = pointOffset(b, r.endContainer, r.endOffset);
      if (end === null) end = endOf(b);
      if (start === null || end === null || end <= start) return;
      lastSelection[target] = { start: start, end: end };
    });
  });
  document.querySelectorAll(".kbd-text").forEach(function (ta) {
    const target = ta.id === "kbd-summary" ? "summary" : "source";
    const update = function () {
      const start = cpLength(ta.value.slice(0, ta.selectionStart));
      const end = cpLength(ta.value.slice(0, ta.selectionEnd));
      if (end > start) lastSelection[target] = { start: start, end: end };
    };
    // Not `readonly`: Chromium then ignores caret keys. Edits are refused instead.
    const original = ta.value;
    ta.addEventListener("beforeinput", function (event) { event.preventDefault(); });
    ta.addEventListener("input", function () { ta.value = original; });
    // Keyboard selection does not always fire "select"; read it after every key too.
    ["select", "keyup", "mouseup"].forEach(function (type) { ta.addEventListener(type, update); });
  });
  document.querySelectorAll(".kbd-select").forEach(function (button) {
    button.addEventListener("click", function () {
      const ta = document.getElementById("kbd-" + button.dataset.target);
      ta.hidden = !ta.hidden;
      if (!ta.hidden) ta.focus();
    });
  });
  // "Mark selection" uses the live selection only: text still selected on the page, or
  // in the visible keyboard-selection box, never one the rater has since let go of.
  function selectionIsLive(target) {
    const ta = document.getElementById("kbd-" + target);
    if (ta && !ta.hidden && ta.selectionEnd > ta.selectionStart) return true;
    const sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return false;
    const r = sel.getRangeAt(0);
    return !!(containerOf(r.startContainer, target) && containerOf(r.endContainer, target));
  }
  function takeSelection(target) {
    if (!selectionIsLive(target)) return null;
    const s = lastSelection[target];
    if (!s) return null;
    // Trim surrounding whitespace so a sloppy mouse selection quotes cleanly.
    let start = s.start, end = s.end;
    while (start < end && /\s/.test(texts[target][start])) start++;
    while (end > start && /\s/.test(texts[target][end - 1])) end--;
    if (end <= start) return null;
    return { target: target, start: start, end: end, text: slice(target, start, end) };
  }

  // ---------------------------------------------------------------- span panel
  function panelFor(key, index, draft) {
    const q = data.span_questions[key];
    const panel = document.getElementById("q-" + key + "-panel");
    panel.textContent = "";
    panel.hidden = false;
    const title = el("p", "panel-title", (index === null ? "New highlight" : "Edit highlight #" + (index + 1)));
    panel.appendChild(title);
    function quote(label, part) {
      const p = el("p", "panel-quote");
      p.appendChild(el("strong", "", label + ": "));
      p.appendChild(el("span", "", part ? "“" + part.text + "”" : "(none yet)"));
      panel.appendChild(p);
    }
    if (q.target === "linked") {
      quote("Summary part", draft.start !== undefined ? draft : null);
      quote("Source part", draft.link || null);
    } else {
      quote("Selected text", draft);
    }
    const inputs = {};
    q.sub.forEach(function (sq) {
      const fs = el("fieldset", "sub-question");
      fs.appendChild(el("legend", "", sq.prompt));
      if (sq.kind === "choice") {
        sq.options.forEach(function (o) {
          const id = "span-" + key + "-" + sq.key + "-" + o.value;
          const input = el("input");
          input.type = "radio"; input.name = "span-" + key + "-" + sq.key; input.value = o.value; input.id = id;
          if (draft.answers && draft.answers[sq.key] === o.value) input.checked = true;
          const label = el("label", "", o.label);
          label.htmlFor = id;
          fs.appendChild(input); fs.appendChild(label);
        });
      } else {
        const input = el("input");
        input.type = "text"; input.id = "span-" + key + "-" + sq.key; input.value = (draft.answers || {})[sq.key] || "";
        const label = el("label", "", sq.prompt);
        label.htmlFor = input.id;
        fs.appendChild(label); fs.appendChild(input);
      }
      inputs[sq.key] = fs;
      panel.appendChild(fs);
    });
    let rationale = null;
    if (q.rationale !== "none") {
      const id = "span-" + key + "-rationale";
      const label = el("label", "", "Rationale" + (q.rationale === "required" ? " (required)" : ""));
      label.htmlFor = id;
      rationale = el("textarea");
      rationale.dir = "auto";
      rationale.id = id; rationale.rows = 2; rationale.value = draft.rationale || "";
      panel.appendChild(label); panel.appendChild(rationale);
    }
    const message = el("p", "error");
    message.setAttribute("role", "alert");
    panel.appendChild(message);
    const save = el("button", "", "Save highlight");
    save.type = "button";
    const cancel = el("button", "secondary", "Cancel");
    cancel.type = "button";
    const actions = el("div", "actions");
    actions.appendChild(save); actions.appendChild(cancel);
    panel.appendChild(actions);
    cancel.addEventListener("click", function () { panel.hidden = true; panel.textContent = ""; });
    save.addEventListener("click", function () {
      const span = { target: q.target === "linked" ? "summary" : draft.target, start: draft.start, end: draft.end,
                     text: draft.text, answers: {}, rationale: rationale ? rationale.value.trim() : "" };
      if (draft.link) span.link = draft.link;
      if (span.start === undefined || (q.target === "linked" && !span.link)) {
        message.textContent = "Select both parts first.";
        return;
      }
      // The panel checks its own sub-answers before saving: every problem at once.
      const missing = [];
      q.sub.forEach(function (sq) {
        const fs = inputs[sq.key];
        const chosen = sq.kind === "choice" ? fs.querySelector("input:checked") : fs.querySelector("input");
        if (chosen && chosen.value.trim()) span.answers[sq.key] = chosen.value.trim();
        else if (sq.required) missing.push(sq.prompt);
      });
      if (rationale && q.rationale === "required" && !span.rationale) missing.push("Rationale");
      if (missing.length) {
        message.textContent = "Before saving this highlight, answer: " + missing.join("; ") + ".";
        return;
      }
      if (index === null) spans[key].push(span); else spans[key][index] = span;
      panel.hidden = true;
      panel.textContent = "";
      refreshSpans(key);
      scheduleSave();
    });
    (panel.querySelector("input, textarea") || save).focus();
    return panel;
  }

  const drafts = {};
  function refreshSpans(key) {
    const list = document.getElementById("q-" + key + "-list");
    const hidden = document.getElementById("q-" + key + "-json");
    list.textContent = "";
    spans[key].forEach(function (sp, i) {
      const li = el("li", "span-item");
      const q = el("q", "", sp.text);
      q.dir = "auto";
      li.appendChild(q);
      if (sp.link) {
        li.appendChild(el("span", "", " ↔ source: "));
        li.appendChild(el("q", "", sp.link.text));
      }
      const details = Object.keys(sp.answers || {}).map(function (k) {
        const sq = data.span_questions[key].sub.find(function (x) { return x.key === k; });
        const opt = sq && sq.options.find(function (o) { return o.value === sp.answers[k]; });
        return opt ? opt.label : sp.answers[k];
      });
      if (details.length) li.appendChild(el("span", "span-answers", " — " + details.join(", ")));
      if (sp.rationale) {
        li.appendChild(document.createTextNode(" — "));
        const why = el("span", "span-rationale", sp.rationale);
        why.dir = "auto";
        li.appendChild(why);
      }
      if (editable) {
        const edit = el("button", "link", "Edit");
        edit.type = "button";
        edit.setAttribute("aria-label", "Edit highlight " + (i + 1));
        edit.addEventListener("click", function () { panelFor(key, i, JSON.parse(JSON.stringify(sp))); });
        const del = el("button", "link", "Delete");
        del.type = "button";
        del.setAttribute("aria-label", "Delete highlight " + (i + 1));
        del.addEventListener("click", function () {
          spans[key].splice(i, 1);
          refreshSpans(key);
          scheduleSave();
        });
        li.appendChild(document.createTextNode(" "));
        li.appendChild(edit);
        li.appendChild(document.createTextNode(" "));
        li.appendChild(del);
      }
      list.appendChild(li);
    });
    document.getElementById("q-" + key + "-empty").hidden = spans[key].length > 0;
    hidden.value = JSON.stringify(spans[key]);
    render();
  }

  document.querySelectorAll("[data-span-tools]").forEach(function (tools) {
    const key = tools.dataset.spanTools;
    const q = data.span_questions[key];
    drafts[key] = {};
    const toolMessage = el("p", "tool-message hint");
    toolMessage.id = "q-" + key + "-tool-message";
    toolMessage.setAttribute("role", "status");
    tools.appendChild(toolMessage);
    const nothingSelected = function (what) {
      toolMessage.textContent = "Nothing is selected: select some " + what + " text first, then press the button.";
    };
    tools.querySelectorAll("button").forEach(function (button) {
      if (!editable) { button.disabled = true; return; }
      button.addEventListener("click", function () {
        const action = button.dataset.action;
        if (action === "mark") {
          const sel = takeSelection(q.target);
          if (!sel) { nothingSelected(q.target); return; }
          toolMessage.textContent = "";
          panelFor(key, null, sel);
        } else {
          const part = takeSelection(action === "use-summary" ? "summary" : "source");
          if (!part) { nothingSelected(action === "use-summary" ? "summary" : "source"); return; }
          toolMessage.textContent = "";
          if (action === "use-summary") Object.assign(drafts[key], part); else drafts[key].link = part;
          panelFor(key, null, drafts[key]);
        }
      });
    });
    refreshSpans(key);
  });

  // Findings: highlight the result span in the source when focused or answered.
  form.querySelectorAll(".finding").forEach(function (div) {
    div.addEventListener("focusin", function () {
      if (focusedFinding === div.dataset.finding) return;
      focusedFinding = div.dataset.finding;
      render();
      const mark = document.querySelector(".finding-focus");
      if (mark && mark.scrollIntoView) mark.scrollIntoView({ block: "nearest" });
    });
    div.addEventListener("change", render);
  });
  render();

  // ---------------------------------------------------------------- collect
  function collect() {
    const answers = {};
    const rationales = {};
    form.querySelectorAll("fieldset[data-question]").forEach(function (fs) {
      const key = fs.dataset.question;
      const kind = fs.dataset.kind;
      if (kind === "span") { answers[key] = spans[key]; return; }
      if (kind === "per_finding") {
        answers[key] = {}; rationales[key] = {};
        fs.querySelectorAll(".finding").forEach(function (div) {
          const id = div.dataset.finding;
          const checked = div.querySelector("input[type=radio]:checked");
          if (checked) answers[key][id] = checked.value === "na" ? "na" : Number(checked.value);
          const r = div.querySelector("textarea");
          if (r && r.value.trim()) rationales[key][id] = r.value;
        });
        return;
      }
      if (kind === "per_claim") {
        answers[key] = {}; rationales[key] = {};
        fs.querySelectorAll(".claim-item").forEach(function (div) {
          const id = div.dataset.claim;
          const checked = div.querySelector("input[type=radio]:checked");
          if (checked) answers[key][id] = checked.value;
          const r = div.querySelector("textarea");
          if (r && r.value.trim()) rationales[key][id] = r.value;
        });
        return;
      }
      if (kind === "checkboxes") {
        answers[key] = Array.from(fs.querySelectorAll("input[name='" + key + "']:checked")).map(function (e) { return e.value; });
      } else if (kind === "text") {
        answers[key] = fs.querySelector("textarea[name='" + key + "']").value;
      } else {
        const checked = fs.querySelector("input[name='" + key + "']:checked");
        answers[key] = checked ? (kind === "scale" && checked.value !== "na" ? Number(checked.value) : checked.value) : null;
      }
      const rationale = fs.querySelector("textarea[name='" + key + "__rationale']");
      if (rationale) rationales[key] = rationale.value;
    });
    return { answers: answers, rationales: rationales };
  }

  // A refused submit: focus the summary listing every problem.
  const errorSummary = document.getElementById("error-summary");
  if (errorSummary) errorSummary.focus();

  // ---------------------------------------------------------------- active time
  const IDLE_AFTER_MS = 60000;
  let lastActivity = Date.now();
  let unsentSeconds = 0;
  ["keydown", "mousedown", "mousemove", "scroll", "input", "focusin"].forEach(function (type) {
    document.addEventListener(type, function () { lastActivity = Date.now(); }, { passive: true });
  });
  setInterval(function () {
    if (document.visibilityState === "visible" && Date.now() - lastActivity < IDLE_AFTER_MS) unsentSeconds += 1;
  }, 1000);

  // ---------------------------------------------------------------- autosave
  function setStatus(text) { statusEl.textContent = text; }
  function syncVersion(version) {
    versionInput.value = version;
    document.querySelectorAll(".version-mirror").forEach(function (e) { e.value = version; });
  }
  let timer = null;
  let saving = null;
  let stopped = false;
  let pendingSubmitter = null;

  // A failed save is shown (and announced) beside the question being worked on, with
  // a Retry button; while it is failing the browser warns before leaving the page.
  let failing = false;
  let lastField = null;
  form.addEventListener("focusin", function (event) {
    const fs = event.target.closest && event.target.closest("fieldset[data-question]");
    if (fs) lastField = fs;
  });
  const saveProblem = el("div", "save-problem error");
  saveProblem.id = "save-problem";
  saveProblem.setAttribute("role", "alert");
  saveProblem.hidden = true;
  function showSaveProblem(text) {
    failing = true;
    saveProblem.textContent = "";
    saveProblem.appendChild(el("span", "", text + " "));
    const retry = el("button", "secondary", "Retry");
    retry.type = "button";
    retry.addEventListener("click", function () { save(); });
    saveProblem.appendChild(retry);
    (lastField || form.querySelector("fieldset[data-question]") || form).appendChild(saveProblem);
    saveProblem.hidden = false;
  }
  function clearSaveProblem() { failing = false; saveProblem.hidden = true; }
  window.addEventListener("beforeunload", function (event) {
    if (failing && editable && !stopped) { event.preventDefault(); event.returnValue = ""; }
  });

  // Rule problems of a draft come back as hints: shown at their question, never a refusal.
  function showHints(hints) {
    document.querySelectorAll(".draft-hint").forEach(function (e) { e.remove(); });
    Object.keys(hints || {}).forEach(function (key) {
      const fs = form.querySelector("fieldset[data-question='" + CSS.escape(key) + "']");
      if (!fs) return;
      const hint = el("p", "draft-hint hint", "Before you submit: " + hints[key]);
      fs.appendChild(hint);
    });
  }

  function draftBody() {
    const body = collect();
    body.version = Number(versionInput.value);
    body.active_seconds = unsentSeconds;
    return body;
  }

  function save() {
    timer = null;
    if (stopped) return Promise.resolve();
    const body = draftBody();
    const sent = body.active_seconds;
    setStatus("Saving draft…");
    saving = fetch(apiUrl, {
      method: "PUT",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, "Accept": "application/json" },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (result) {
        if (response.ok) {
          unsentSeconds -= sent;
          syncVersion(result.version);
          clearSaveProblem();
          showHints(result.hints);
          setStatus("Draft saved at " + new Date().toLocaleTimeString());
        } else if (response.status === 409) {
          stopped = true;
          setStatus((result.error && result.error.message) || "Changed elsewhere: reload the page.");
          showSaveProblem("Not saved: this item was changed elsewhere. Copy your text, then reload the page.");
        } else {
          const message = (result.error && result.error.message) || "The server refused it.";
          setStatus("Draft not saved. " + message);
          showSaveProblem("Draft not saved. " + message);
        }
      });
    }).catch(function () {
      setStatus("Draft not saved (offline?). Your answers are still on this page.");
      showSaveProblem("Draft not saved (offline?). Your answers are still on this page.");
    }).finally(function () {
      saving = null;
      if (pendingSubmitter) {
        const submitter = pendingSubmitter;
        pendingSubmitter = null;
        form.requestSubmit(submitter);
      }
    });
    return saving;
  }
  // Leaving the page never drops typing: a pending change is sent with keepalive, with
  // the version and CSRF header. If a save is in flight, the flush waits for it so it
  // carries the new version instead of meeting a 409.
  function flush() {
    if (!editable || stopped || !timer) return;
    clearTimeout(timer);
    timer = null;
    const send = function () {
      fetch(apiUrl, {
        method: "PUT",
        credentials: "same-origin",
        keepalive: true,
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, "Accept": "application/json",
                   "If-Match": '"' + versionInput.value + '"' },
        body: JSON.stringify(draftBody()),
      }).then(function (response) {
        if (response.ok) return response.json().then(function (r) { syncVersion(r.version); });
      }).catch(function () {});
    };
    if (saving) saving.then(send); else send();
  }
  window.addEventListener("pagehide", flush);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") flush();
  });
  function scheduleSave() {
    if (!editable || stopped) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(save, 1200);
  }
  if (editable) {
    form.addEventListener("input", scheduleSave);
    form.addEventListener("change", scheduleSave);
    form.addEventListener("submit", function (event) {
      if (timer) { clearTimeout(timer); timer = null; }
      if (saving) {
        // Let the in-flight autosave finish first, so the form posts the newest version.
        event.preventDefault();
        pendingSubmitter = event.submitter;
        return;
      }
      activeInput.value = unsentSeconds;
    });
  }

  // ---------------------------------------------------------------- keyboard
  // Shortcuts for every scale, choice and tickbox question of any rubric: digits answer
  // the question being worked on (the focused one, else the last one, else the first),
  // n moves to the next one, ] and [ to the next and previous item, ? lists them.
  // A question asked per finding or per claim is one stop per finding or claim, so n
  // reaches each of them. None is active while typing in a text field.
  const questions = Array.prototype.slice.call(form.querySelectorAll("fieldset[data-question]"));
  const PARTS = ".finding, .claim-item";
  function stopsOf(fs) {
    const parts = Array.prototype.slice.call(fs.querySelectorAll(PARTS));
    return parts.length ? parts : [fs];
  }
  const stops = [];
  questions.forEach(function (fs) { stopsOf(fs).forEach(function (s) { stops.push(s); }); });
  let lastStop = null;
  function stopOf(node) {
    if (!node || !node.closest) return null;
    const part = node.closest(PARTS);
    if (part && stops.indexOf(part) >= 0) return part;
    const fs = node.closest("fieldset[data-question]");
    return fs ? stopsOf(fs)[0] : null;
  }
  form.addEventListener("focusin", function (event) {
    const stop = stopOf(event.target);
    if (stop) lastStop = stop;
  });
  function currentStop() {
    const here = stopOf(document.activeElement);
    if (here) return here;
    if (lastStop) return lastStop;
    const fs = form.querySelector("fieldset[data-question='" + CSS.escape(digitQuestion || "") + "']");
    return fs ? stopsOf(fs)[0] : stops[0];
  }
  function firstControl(stop) {
    return stop.querySelector("input[type=radio]:checked, input:not([type=hidden]), textarea, button");
  }
  function radioGroup(stop) {
    const active = document.activeElement;
    let name = active && active.type === "radio" && stop.contains(active) ? active.name : null;
    if (!name) { const first = stop.querySelector("input[type=radio]"); name = first && first.name; }
    return name ? Array.prototype.slice.call(stop.querySelectorAll("input[type=radio]")).filter(function (r) { return r.name === name; }) : [];
  }
  function pick(stop, digit) {
    const fs = stop.closest("fieldset[data-question]");
    const kind = fs ? fs.getAttribute("data-kind") : "";
    const radios = radioGroup(stop);
    if (radios.length) {
      // A scale's digit is its value; a choice's digit is its place in the list.
      return window.ItemPage.choose(radios.find(function (r) { return r.value === digit; }) ||
        (kind === "scale" || kind === "per_finding" ? null : radios[Number(digit) - 1]));
    }
    // A tickbox question: the digit ticks (or unticks) the box in that place.
    return window.ItemPage.toggle(stop.querySelectorAll("input[type=checkbox]")[Number(digit) - 1] || null);
  }
  // Closing the list gives the keyboard back where it was (or to the question being
  // worked on), never to the page's <body>.
  const help = window.ItemPage.shortcutHelp(
    [["1–9", "answer the current question (a scale's value, a choice's place in the list, or tick the box in that place)"],
     ["n", "go to the next question (each finding and claim is one)"],
     ["← →", "move between the summary's citations (one Tab stop); Enter or Space keeps a citation's sentences shown"],
     ["]", "next item"], ["[", "previous item"],
     ["Ctrl+Enter", "submit"], ["?", "show this list"], ["Esc", "close it"]],
    function () { return firstControl(currentStop()); });

  document.addEventListener("keydown", function (event) {
    if (editable && (event.ctrlKey || event.metaKey) && event.key === "Enter") {
      event.preventDefault();
      form.requestSubmit(document.getElementById("submit-button"));
      return;
    }
    if (event.key === "Escape" && help.isOpen()) { event.preventDefault(); help.hide(); return; }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (window.ItemPage.isTyping(event.target)) return;
    if (event.key === "?") { event.preventDefault(); help.open(); return; }
    if (event.key === "]" || event.key === "[") {
      if (window.ItemPage.goToItem(event.key)) event.preventDefault();
      return;
    }
    if (event.key === "n") {
      const next = stops[stops.indexOf(currentStop()) + 1];
      if (next) {
        event.preventDefault();
        lastStop = next;
        const target = firstControl(next);
        if (target) target.focus(); else { next.tabIndex = -1; next.focus(); }
        if (next.scrollIntoView) next.scrollIntoView({ block: "nearest" });
      }
      return;
    }
    if (editable && /^[0-9]$/.test(event.key)) {
      const stop = currentStop();
      if (stop && pick(stop, event.key)) event.preventDefault();
    }
  });
})();
