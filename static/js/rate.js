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
  const gettext = window.ItemPage.gettext;
  const interpolate = window.ItemPage.interpolate;

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
    const where = { n: mark.index + 1, total: mark.total, refs: mark.refs.join(", ") };
    c.setAttribute("aria-label", missing.length
      ? interpolate(gettext("citation %(n)s of %(total)s, reference %(refs)s: not found in the context"), where, true)
      : interpolate(gettext("citation %(n)s of %(total)s, reference %(refs)s: show its sentences in the context"), where, true));
    if (missing.length) c.title = interpolate(gettext("Not found in the context: %s"), [missing.join(", ")]);
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
               title: gettext("Result span") };
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

  // ---------------------------------------------------------------- announcements
  // The page's live region (base.html): a short word for what just happened out of sight.
  function announce(text) {
    const region = document.getElementById("announce");
    if (region) region.textContent = text;
  }

  // ---------------------------------------------------------------- highlights in progress
  // A highlight being made (text marked, answers chosen, "Save highlight" not pressed yet)
  // is kept in this browser, per item and question, as it changes; leaving the page and
  // coming back opens it again. Saving or cancelling it forgets it. It is not part of the
  // server's draft: the draft holds saved highlights only, so nothing half-made is submitted.
  const unsavedKey = "rating-unsaved-highlights:" + apiUrl;
  function storage(kind) {
    try { return window[kind]; } catch (e) { return null; } // storage refused by the browser
  }
  function readStored(kind, name) {
    const store = storage(kind);
    if (!store) return null;
    try { return JSON.parse(store.getItem(name) || "null"); } catch (e) { return null; }
  }
  function writeStored(kind, name, value) {
    const store = storage(kind);
    if (!store) return;
    try {
      if (value === null) store.removeItem(name); else store.setItem(name, JSON.stringify(value));
    } catch (e) { /* full or refused: the page itself still holds the work */ }
  }
  function keepUnsavedHighlight(key, state) {
    const all = readStored("localStorage", unsavedKey) || {};
    if (state) all[key] = state; else delete all[key];
    writeStored("localStorage", unsavedKey, Object.keys(all).length ? all : null);
  }
  // A stored part still quotes this item's text (else it belongs to nothing here).
  function partFits(target, part) {
    return !!part && Number.isInteger(part.start) && Number.isInteger(part.end) && part.start < part.end &&
      part.end <= texts[target].length && slice(target, part.start, part.end) === part.text;
  }
  function restoreUnsavedHighlights() {
    const all = readStored("localStorage", unsavedKey);
    if (!all || typeof all !== "object") return;
    if (!editable) { writeStored("localStorage", unsavedKey, null); return; }
    Object.keys(all).forEach(function (key) {
      const q = data.span_questions[key];
      const state = all[key];
      const draft = state && state.draft;
      if (!q || !draft || typeof draft !== "object") { keepUnsavedHighlight(key, null); return; }
      const summaryPart = draft.start !== undefined ? partFits(q.target === "linked" ? "summary" : draft.target, draft) : true;
      const linkPart = draft.link ? partFits("source", draft.link) : true;
      if (!summaryPart || !linkPart) { keepUnsavedHighlight(key, null); return; }
      const index = Number.isInteger(state.index) && state.index < spans[key].length ? state.index : null;
      panelFor(key, index, draft, { restored: true });
    });
  }

  // ---------------------------------------------------------------- span panel
  function panelFor(key, index, draft, options) {
    const q = data.span_questions[key];
    const restored = !!(options && options.restored);
    const panel = document.getElementById("q-" + key + "-panel");
    panel.textContent = "";
    panel.hidden = false;
    const title = el("p", "panel-title", (index === null ? gettext("New highlight")
      : interpolate(gettext("Edit highlight #%s"), [index + 1])));
    panel.appendChild(title);
    if (restored) {
      panel.appendChild(el("p", "hint panel-restored",
        gettext("Not saved yet: you were making this highlight when you left the page. Save it or cancel it.")));
    }
    function quote(label, part) {
      const p = el("p", "panel-quote");
      p.appendChild(el("strong", "", label + ": "));
      p.appendChild(el("span", "", part ? "“" + part.text + "”" : gettext("(none yet)")));
      panel.appendChild(p);
    }
    if (q.target === "linked") {
      quote(gettext("Summary part"), draft.start !== undefined ? draft : null);
      quote(gettext("Source part"), draft.link || null);
    } else {
      quote(gettext("Selected text"), draft);
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
      const label = el("label", "", q.rationale === "required" ? gettext("Rationale (required)") : gettext("Rationale"));
      label.htmlFor = id;
      rationale = el("textarea");
      rationale.dir = "auto";
      rationale.id = id; rationale.rows = 2; rationale.value = draft.rationale || "";
      panel.appendChild(label); panel.appendChild(rationale);
    }
    const message = el("p", "error");
    message.setAttribute("role", "alert");
    panel.appendChild(message);
    const save = el("button", "", gettext("Save highlight"));
    save.type = "button";
    const cancel = el("button", "secondary", gettext("Cancel"));
    cancel.type = "button";
    const actions = el("div", "actions");
    actions.appendChild(save); actions.appendChild(cancel);
    panel.appendChild(actions);
    // What the panel holds now, kept as the highlight in progress.
    function remember() {
      const state = JSON.parse(JSON.stringify(draft));
      state.answers = {};
      q.sub.forEach(function (sq) {
        const fs = inputs[sq.key];
        const chosen = sq.kind === "choice" ? fs.querySelector("input:checked") : fs.querySelector("input");
        if (chosen && chosen.value) state.answers[sq.key] = chosen.value;
      });
      if (rationale) state.rationale = rationale.value;
      keepUnsavedHighlight(key, { index: index, draft: state });
    }
    // Properties, not listeners: the panel element is reused by every highlight of the question.
    panel.oninput = remember;
    panel.onchange = remember;
    remember();
    function close() {
      panel.hidden = true;
      panel.textContent = "";
      panel.oninput = panel.onchange = null;
      keepUnsavedHighlight(key, null);
    }
    cancel.addEventListener("click", function () {
      close();
      // Back to where the highlight was started, never to the page's <body>.
      const start = document.querySelector("[data-span-tools='" + CSS.escape(key) + "'] button:not([disabled])");
      if (start) start.focus();
    });
    save.addEventListener("click", function () {
      const span = { target: q.target === "linked" ? "summary" : draft.target, start: draft.start, end: draft.end,
                     text: draft.text, answers: {}, rationale: rationale ? rationale.value.trim() : "" };
      if (draft.link) span.link = draft.link;
      if (span.start === undefined || (q.target === "linked" && !span.link)) {
        message.textContent = gettext("Select both parts first.");
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
      if (rationale && q.rationale === "required" && !span.rationale) missing.push(gettext("Rationale"));
      if (missing.length) {
        message.textContent = interpolate(gettext("Before saving this highlight, answer: %s."), [missing.join("; ")]);
        return;
      }
      if (index === null) spans[key].push(span); else spans[key][index] = span;
      close();
      refreshSpans(key);
      scheduleSave();
      // The keyboard goes to the saved highlight's entry in the list.
      const saved = index === null ? spans[key].length - 1 : index;
      focusSpanItem(key, saved);
      announce(interpolate(gettext("Highlight %s saved."), [saved + 1]));
    });
    // A panel reopened on loading the page does not take the keyboard from the page's start.
    if (!restored) (panel.querySelector("input, textarea") || save).focus();
    return panel;
  }

  function focusSpanItem(key, i) {
    const items = document.getElementById("q-" + key + "-list").children;
    const item = items[Math.min(i, items.length - 1)];
    if (item) {
      item.tabIndex = -1;
      item.focus();
      return;
    }
    const start = document.querySelector("[data-span-tools='" + CSS.escape(key) + "'] button:not([disabled])");
    if (start) start.focus();
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
        li.appendChild(el("span", "", " ↔ " + gettext("source:") + " "));
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
        const edit = el("button", "link", gettext("Edit"));
        edit.type = "button";
        edit.setAttribute("aria-label", interpolate(gettext("Edit highlight %s"), [i + 1]));
        edit.addEventListener("click", function () { panelFor(key, i, JSON.parse(JSON.stringify(sp))); });
        const del = el("button", "link", gettext("Delete"));
        del.type = "button";
        del.setAttribute("aria-label", interpolate(gettext("Delete highlight %s"), [i + 1]));
        del.addEventListener("click", function () {
          spans[key].splice(i, 1);
          refreshSpans(key);
          scheduleSave();
          focusSpanItem(key, i);
          announce(interpolate(gettext("Highlight %s deleted."), [i + 1]));
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
      toolMessage.textContent = what === "source"
        ? gettext("Nothing is selected: select some source text first, then press the button.")
        : gettext("Nothing is selected: select some summary text first, then press the button.");
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

  // The reverse of collect(): put a draft's answers into the form (a change sent on leaving
  // that the stored answers may not have yet). Values are only compared and assigned, so
  // nothing in them is ever read as markup.
  function applyAnswers(answers, rationales) {
    const pick = function (inputs, value) {
      inputs.forEach(function (input) {
        input.checked = value !== null && value !== undefined && input.value === String(value);
      });
    };
    const textOf = function (value) { return typeof value === "string" ? value : ""; };
    form.querySelectorAll("fieldset[data-question]").forEach(function (fs) {
      const key = fs.dataset.question;
      const kind = fs.dataset.kind;
      const value = answers[key];
      const why = rationales[key];
      if (kind === "span") {
        if (Array.isArray(value)) { spans[key] = value.slice(); refreshSpans(key); }
        return;
      }
      if (kind === "per_finding" || kind === "per_claim") {
        fs.querySelectorAll(".finding, .claim-item").forEach(function (div) {
          const id = div.dataset.finding || div.dataset.claim;
          pick(div.querySelectorAll("input[type=radio]"), value && typeof value === "object" ? value[id] : null);
          const r = div.querySelector("textarea");
          if (r) r.value = textOf(why && typeof why === "object" ? why[id] : "");
        });
        return;
      }
      if (kind === "checkboxes") {
        const ticked = Array.isArray(value) ? value.map(String) : [];
        fs.querySelectorAll("input[name='" + key + "']").forEach(function (box) {
          box.checked = ticked.indexOf(box.value) !== -1;
        });
      } else if (kind === "text") {
        fs.querySelector("textarea[name='" + key + "']").value = textOf(value);
      } else {
        pick(fs.querySelectorAll("input[name='" + key + "']"), value);
      }
      const rationale = fs.querySelector("textarea[name='" + key + "__rationale']");
      if (rationale) rationale.value = textOf(why);
    });
    render();
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
  let saveAgain = false;
  let leavingByForm = false;
  let flushedSeq = 0;
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
    const retry = el("button", "secondary", gettext("Retry"));
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
      const hint = el("p", "draft-hint hint", interpolate(gettext("Before you submit: %s"), [hints[key]]));
      fs.appendChild(hint);
    });
  }

  // Writes and their order. Each page names itself (`writer`, random per page load) and
  // numbers its writes (`seq`); the server lets a page's newer write replace its own
  // earlier one even when both carry the version the page read, and refuses anyone
  // else's (docs/api.md). So a page's writes in flight never conflict with each other.
  //
  // A change not yet stored when the page is left is sent with keepalive, and kept in
  // this tab's sessionStorage with the page's name, the write's number and the version it
  // was based on. That save may reach the server after the next page's GET (a reload at
  // once): the next page then shows the older stored answers. So a page that finds such
  // an unsent change puts it back in the form and sends it again, as the next write of
  // the page that left: stored if only that page wrote since (whichever of the two saves
  // lands first), a conflict if another tab or device did.
  const writer = randomId();
  let seq = 0;          // this page's last write
  let confirmedSeq = 0; // its newest write the server has stored
  const unsentKey = "rating-unsent-draft:" + apiUrl;
  function randomId() {
    const bytes = new Uint8Array(12);
    window.crypto.getRandomValues(bytes);
    return Array.from(bytes, function (b) { return (b + 256).toString(16).slice(1); }).join("");
  }

  function draftBody() {
    const body = collect();
    body.version = Number(versionInput.value);
    body.active_seconds = unsentSeconds;
    seq += 1;
    body.writer = writer;
    body.seq = seq;
    return body;
  }

  function put(body, keepalive) {
    return fetch(apiUrl, {
      method: "PUT",
      credentials: "same-origin",
      keepalive: !!keepalive,
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, "Accept": "application/json" },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (result) {
        return { response: response, result: result };
      });
    });
  }

  // One of this page's writes was stored.
  function stored(body, result) {
    unsentSeconds = Math.max(0, unsentSeconds - body.active_seconds);
    if (body.seq > confirmedSeq) {
      confirmedSeq = body.seq;
      syncVersion(result.version);
      showHints(result.hints);
    }
    const unsent = readStored("sessionStorage", unsentKey);
    if (unsent && unsent.writer === writer && unsent.seq <= body.seq) writeStored("sessionStorage", unsentKey, null);
    clearSaveProblem();
    setStatus(interpolate(gettext("Draft saved at %s"), [new Date().toLocaleTimeString()]));
  }

  function refused(result) {
    const message = (result.error && result.error.message) || gettext("The server refused it.");
    setStatus(interpolate(gettext("Draft not saved. %s"), [message]));
    showSaveProblem(interpolate(gettext("Draft not saved. %s"), [message]));
  }

  function unreachable() {
    setStatus(gettext("Draft not saved (offline?). Your answers are still on this page."));
    showSaveProblem(gettext("Draft not saved (offline?). Your answers are still on this page."));
  }

  function conflict(result) {
    stopped = true;
    setStatus((result.error && result.error.message) || gettext("Changed elsewhere: reload the page."));
    showSaveProblem(gettext("Not saved: this item was changed elsewhere (another tab or device). Copy your text, then reload the page."));
  }

  function save() {
    timer = null;
    if (stopped) return Promise.resolve();
    // One save at a time: a change made meanwhile is sent when this one is answered.
    if (saving) { saveAgain = true; return saving; }
    const body = draftBody();
    setStatus(gettext("Saving draft…"));
    saving = put(body).then(function (r) {
      if (r.response.ok) {
        stored(body, r.result);
      } else if (r.response.status === 409) {
        // A newer write of this page (the save sent when the tab was hidden) replaced it.
        if (body.seq < seq) return;
        conflict(r.result);
      } else {
        refused(r.result);
      }
    }).catch(unreachable).finally(afterSave);
    return saving;
  }
  function afterSave() {
    saving = null;
    if (saveAgain && !stopped) {
      saveAgain = false;
      save();
      return;
    }
    saveAgain = false;
    if (pendingSubmitter) {
      const submitter = pendingSubmitter;
      pendingSubmitter = null;
      form.requestSubmit(submitter);
    }
  }

  // Leaving the page (or hiding it) never drops typing: a change not yet stored is sent at
  // once with keepalive, without waiting for a save in flight (the page's newer write
  // replaces it, see above), and kept in sessionStorage until a write of it is stored.
  function flush() {
    if (!editable || stopped || leavingByForm) return;
    // A change typed since the last write, or a write not yet stored that this flush has
    // not already covered (pagehide and visibilitychange both come when a page is left).
    if (!(timer || ((saving || failing) && flushedSeq < seq))) return;
    if (timer) { clearTimeout(timer); timer = null; }
    saveAgain = false;
    const body = draftBody();
    flushedSeq = body.seq;
    writeStored("sessionStorage", unsentKey, {
      writer: writer, seq: body.seq, version: body.version, answers: body.answers, rationales: body.rationales,
    });
    put(body, true).then(function (r) {
      if (r.response.ok) stored(body, r.result);
      else if (r.response.status === 409 && body.seq === seq) conflict(r.result);
    }).catch(function () {});
  }
  window.addEventListener("pagehide", flush);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") flush();
  });

  // The unsent change a previous page of this tab left (see above), put back and sent.
  function resendUnsent() {
    const unsent = readStored("sessionStorage", unsentKey);
    if (!unsent || !editable) return;
    if (typeof unsent.writer !== "string" || !Number.isInteger(unsent.seq) || !Number.isInteger(unsent.version)) {
      writeStored("sessionStorage", unsentKey, null);
      return;
    }
    applyAnswers(unsent.answers || {}, unsent.rationales || {});
    const body = { answers: unsent.answers || {}, rationales: unsent.rationales || {}, version: unsent.version,
                   active_seconds: 0, writer: unsent.writer, seq: unsent.seq + 1 };
    setStatus(gettext("Saving the change you made before leaving…"));
    saving = put(body).then(function (r) {
      if (r.response.ok) {
        writeStored("sessionStorage", unsentKey, null);
        syncVersion(r.result.version);
        showHints(r.result.hints);
        setStatus(interpolate(gettext("Draft saved at %s"), [new Date().toLocaleTimeString()]));
      } else if (r.response.status === 409) {
        writeStored("sessionStorage", unsentKey, null);
        conflict(r.result);
      } else {
        refused(r.result);
      }
    }).catch(unreachable).finally(afterSave);
  }

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
      // The form's post carries these answers and the version: a keepalive save on
      // leaving would only race it.
      leavingByForm = true;
    });
  }
  resendUnsent();
  restoreUnsavedHighlights();

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
    [["1–9", gettext("answer the current question (a scale's value, a choice's place in the list, or tick the box in that place)")],
     ["n", gettext("go to the next question (each finding and claim is one)")],
     ["← →", gettext("move between the summary's citations (one Tab stop); Enter or Space keeps a citation's sentences shown")],
     ["]", gettext("next item")], ["[", gettext("previous item")],
     [gettext("Ctrl+Enter"), gettext("submit")], ["?", gettext("show this list")], ["Esc", gettext("close it")]],
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
