// The comparison page (templates/annotate/compare.html): two summaries of one source side
// by side. Progressive enhancement over a plain form that posts without this script.
// Text is only ever set with textContent: summaries are model output (hostile).
// Keys: a, b, t answer the current preference question (1 much, 2 slightly then say how
// much), n goes to the next question, ] and [ to the next and previous item, ? lists
// them, Ctrl+Enter submits. Drafts are saved through the API with the version read.
(function () {
  "use strict";
  const form = document.getElementById("rating-form");
  const dataEl = document.getElementById("rating-data");
  if (!form || !dataEl) return;
  const data = JSON.parse(dataEl.textContent);
  const editable = form.dataset.editable === "true";
  const apiUrl = form.dataset.apiUrl;
  const versionInput = document.getElementById("id_version");
  const activeInput = document.getElementById("id_active_seconds");
  const statusEl = document.getElementById("save-status");
  const csrf = (form.querySelector("input[name=csrfmiddlewaretoken]") || {}).value;

  const el = window.ItemPage.el;
  const gettext = window.ItemPage.gettext;
  const interpolate = window.ItemPage.interpolate;
  function cps(s) { return Array.from(s); }

  // ---------------------------------------------------------------- source toggle
  const toggle = document.getElementById("source-toggle");
  const sourceEl = document.getElementById("compare-source");
  const narrow = window.matchMedia("(max-width: 1099px)");
  function layout() {
    if (!toggle || !sourceEl) return;
    toggle.hidden = !narrow.matches;
    if (!narrow.matches) { sourceEl.hidden = false; sourceEl.classList.remove("pinned"); return; }
    const open = toggle.getAttribute("aria-expanded") === "true";
    sourceEl.hidden = !open;
    sourceEl.classList.toggle("pinned", open);
    toggle.textContent = open ? gettext("Hide the source") : gettext("Show the source");
  }
  if (toggle) {
    toggle.setAttribute("aria-expanded", "false");
    toggle.addEventListener("click", function () {
      toggle.setAttribute("aria-expanded", toggle.getAttribute("aria-expanded") === "true" ? "false" : "true");
      layout();
    });
    narrow.addEventListener("change", layout);
  }
  layout();

  // ---------------------------------------------------------------- spans and citations
  const spanKeys = Object.keys(data.span_questions || {});
  const spans = {};
  spanKeys.forEach(function (key) { spans[key] = (data.spans[key] || []).slice(); });
  const textOf = {};
  data.compared.forEach(function (c) { textOf[c.uuid] = cps(c.text); });
  const refsInSource = new Set((data.sentences || []).map(function (s) { return s.ref; }).filter(Boolean));

  function linkRefs(refs, on) {
    document.querySelectorAll(".sentences li[data-ref]").forEach(function (li) {
      if (refs.indexOf(li.dataset.ref) >= 0) li.classList.toggle("cited", on);
    });
  }
  function citations(chars) {
    // [REF] or [REF1, REF2] in a summary: a focusable mark that lights its source sentences.
    const text = chars.join("");
    const found = [];
    const re = /\[([A-Za-z0-9_.:\-]+(?:\s*[,;]\s*[A-Za-z0-9_.:\-]+)*)\]/g;
    let m;
    while ((m = re.exec(text)) !== null) {
      const start = cps(text.slice(0, m.index)).length;
      found.push({ start: start, end: start + cps(m[0]).length, refs: m[1].split(/\s*[,;]\s*/) });
    }
    return found;
  }
  function renderSummary(container) {
    const uuid = container.dataset.summary;
    const chars = textOf[uuid];
    if (!chars) return;
    const marks = [];
    spanKeys.forEach(function (key) {
      spans[key].forEach(function (sp) { if (sp.summary === uuid) marks.push(sp); });
    });
    const cites = citations(chars);
    const cuts = new Set([0, chars.length]);
    marks.concat(cites).forEach(function (x) { cuts.add(x.start); cuts.add(x.end); });
    const points = Array.from(cuts).sort(function (a, b) { return a - b; });
    container.textContent = "";
    for (let i = 0; i < points.length - 1; i++) {
      const s = points[i], e = points[i + 1];
      let node = document.createTextNode(chars.slice(s, e).join(""));
      const cite = cites.find(function (c) { return c.start <= s && e <= c.end; });
      if (cite) {
        const span = el("span", "cite" + (cite.refs.some(function (r) { return !refsInSource.has(r); }) ? " cite-missing" : ""));
        span.tabIndex = 0;
        span.dataset.start = s;
        span.appendChild(node);
        span.addEventListener("mouseenter", function () { linkRefs(cite.refs, true); });
        span.addEventListener("mouseleave", function () { linkRefs(cite.refs, false); });
        span.addEventListener("focus", function () { linkRefs(cite.refs, true); });
        span.addEventListener("blur", function () { linkRefs(cite.refs, false); });
        node = span;
      }
      if (marks.some(function (m) { return m.start <= s && e <= m.end; })) {
        const mark = el("mark", "hl");
        mark.appendChild(node);
        node = mark;
      }
      const wrap = el("span", "seg");
      wrap.dataset.start = s;
      wrap.appendChild(node);
      container.appendChild(wrap);
    }
  }
  const summaryEls = Array.prototype.slice.call(document.querySelectorAll(".compared-text"));
  function renderAll() { summaryEls.forEach(renderSummary); }

  // The selection, as (summary, start, end) in code points, from the mouse or a keyboard box.
  let selection = null;
  function offsetIn(container, node, offset) {
    let seg = node.nodeType === 1 ? node : node.parentNode;
    while (seg && seg !== container && !(seg.classList && seg.classList.contains("seg"))) seg = seg.parentNode;
    if (!seg || seg === container) return null;
    const before = node.nodeType === 3 ? cps(node.textContent.slice(0, offset)).length : 0;
    return Number(seg.dataset.start) + before;
  }
  document.addEventListener("selectionchange", function () {
    const sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    const range = sel.getRangeAt(0);
    const container = summaryEls.find(function (c) { return c.contains(range.startContainer) && c.contains(range.endContainer); });
    if (!container) return;
    const a = offsetIn(container, range.startContainer, range.startOffset);
    const b = offsetIn(container, range.endContainer, range.endOffset);
    if (a === null || b === null || a === b) return;
    selection = { summary: container.dataset.summary, start: Math.min(a, b), end: Math.max(a, b) };
  });
  document.querySelectorAll("textarea.kbd-text").forEach(function (ta) {
    const original = ta.value;
    ta.addEventListener("beforeinput", function (event) { event.preventDefault(); });
    ta.addEventListener("input", function () { ta.value = original; });
    const update = function () {
      if (ta.selectionStart === ta.selectionEnd) return;
      const start = cps(ta.value.slice(0, ta.selectionStart)).length;
      const end = cps(ta.value.slice(0, ta.selectionEnd)).length;
      selection = { summary: ta.dataset.summary, start: start, end: end };
    };
    ["select", "keyup", "mouseup"].forEach(function (type) { ta.addEventListener(type, update); });
  });
  document.querySelectorAll(".kbd-select").forEach(function (button) {
    button.addEventListener("click", function () {
      const ta = document.getElementById(button.getAttribute("aria-controls"));
      ta.hidden = !ta.hidden;
      if (!ta.hidden) ta.focus();
    });
  });

  function labelOf(uuid) {
    const c = data.compared.find(function (x) { return x.uuid === uuid; });
    return c ? interpolate(gettext("Summary %s"), [c.label]) : "?";
  }
  function refreshSpans(key) {
    const list = document.getElementById("q-" + key + "-list");
    const empty = document.getElementById("q-" + key + "-empty");
    const hidden = document.getElementById("q-" + key + "-json");
    if (hidden) hidden.value = JSON.stringify(spans[key]);
    if (!list) return;
    list.textContent = "";
    const q = data.span_questions[key];
    spans[key].forEach(function (sp, i) {
      const li = el("li");
      li.appendChild(el("strong", "", labelOf(sp.summary) + ": "));
      li.appendChild(el("q", "", sp.text));
      const details = Object.keys(sp.answers || {}).map(function (k) {
        const sq = q.sub.find(function (x) { return x.key === k; });
        const opt = sq && sq.options.find(function (o) { return o.value === sp.answers[k]; });
        return opt ? opt.label : sp.answers[k];
      });
      if (details.length) li.appendChild(el("span", "hint", " — " + details.join(", ")));
      if (editable) {
        const del = el("button", "link", gettext("Remove"));
        del.type = "button";
        del.setAttribute("aria-label", interpolate(gettext("Remove highlight %s"), [i + 1]));
        del.addEventListener("click", function () { spans[key].splice(i, 1); refreshSpans(key); renderAll(); scheduleSave(); });
        li.appendChild(document.createTextNode(" "));
        li.appendChild(del);
      }
      list.appendChild(li);
    });
    if (empty) empty.hidden = spans[key].length > 0;
  }
  function openPanel(key, draft) {
    const q = data.span_questions[key];
    const panel = document.getElementById("q-" + key + "-panel");
    panel.textContent = "";
    panel.appendChild(el("p", "", labelOf(draft.summary) + ": “" + draft.text + "”"));
    const inputs = {};
    q.sub.forEach(function (sq) {
      const group = el("fieldset", "sub-question");
      group.appendChild(el("legend", "", sq.prompt));
      if (sq.kind === "choice") {
        sq.options.forEach(function (o, n) {
          const id = "q-" + key + "-new-" + sq.key + "-" + n;
          const input = el("input");
          input.type = "radio"; input.name = "new-" + key + "-" + sq.key; input.value = o.value; input.id = id;
          const label = el("label", "", o.label);
          label.htmlFor = id;
          group.appendChild(input); group.appendChild(label);
        });
      } else {
        const ta = el("textarea");
        ta.name = "new-" + key + "-" + sq.key;
        group.appendChild(ta);
      }
      inputs[sq.key] = group;
      panel.appendChild(group);
    });
    let rationale = null;
    if (q.rationale !== "none") {
      rationale = el("textarea");
      rationale.setAttribute("aria-label", gettext("Rationale for this highlight"));
      panel.appendChild(rationale);
    }
    const save = el("button", "", gettext("Save highlight"));
    save.type = "button";
    save.addEventListener("click", function () {
      const span = { summary: draft.summary, start: draft.start, end: draft.end, text: draft.text, answers: {}, rationale: rationale ? rationale.value.trim() : "" };
      q.sub.forEach(function (sq) {
        const chosen = inputs[sq.key].querySelector("input:checked") || inputs[sq.key].querySelector("textarea");
        if (chosen && chosen.value.trim()) span.answers[sq.key] = chosen.value.trim();
      });
      spans[key].push(span);
      panel.hidden = true; panel.textContent = "";
      refreshSpans(key); renderAll(); scheduleSave();
      const list = document.getElementById("q-" + key + "-list");
      if (list) { list.tabIndex = -1; list.focus(); }
    });
    panel.appendChild(save);
    panel.hidden = false;
    const first = panel.querySelector("input, textarea");
    if (first) first.focus();
  }
  document.querySelectorAll("[data-compared-span-tools]").forEach(function (tools) {
    const key = tools.dataset.comparedSpanTools;
    tools.querySelector("[data-action=mark]").addEventListener("click", function () {
      if (!selection) { if (statusEl) statusEl.textContent = gettext("Select words of summary A or B first."); return; }
      const text = textOf[selection.summary].slice(selection.start, selection.end).join("");
      openPanel(key, { summary: selection.summary, start: selection.start, end: selection.end, text: text });
    });
    refreshSpans(key);
  });
  renderAll();

  // ---------------------------------------------------------------- collect and save
  function collect() {
    const answers = {};
    const rationales = {};
    form.querySelectorAll("fieldset[data-question]").forEach(function (fs) {
      const key = fs.dataset.question;
      if (fs.dataset.kind === "span") { answers[key] = spans[key] || []; return; }
      const checked = fs.querySelector("input[name='" + key + "']:checked");
      const strength = fs.querySelector("input[name='" + key + "__strength']:checked");
      answers[key] = checked ? { preferred: checked.value } : null;
      if (checked && strength && checked.value !== "tie") answers[key].strength = strength.value;
      const rationale = fs.querySelector("textarea[name='" + key + "__rationale']");
      if (rationale) rationales[key] = rationale.value;
    });
    return { answers: answers, rationales: rationales };
  }
  let unsentSeconds = 0;
  let lastActivity = Date.now();
  ["keydown", "mousedown", "scroll", "input", "focusin"].forEach(function (type) {
    document.addEventListener(type, function () { lastActivity = Date.now(); }, { passive: true });
  });
  setInterval(function () {
    if (document.visibilityState === "visible" && Date.now() - lastActivity < 60000) unsentSeconds += 1;
  }, 1000);
  let timer = null, saving = null, stopped = false, pendingSubmitter = null;
  function setStatus(t) { if (statusEl) statusEl.textContent = t; }
  function save() {
    timer = null;
    if (stopped) return Promise.resolve();
    const body = collect();
    body.version = Number(versionInput.value);
    body.active_seconds = unsentSeconds;
    const sent = unsentSeconds;
    setStatus(gettext("Saving draft…"));
    saving = fetch(apiUrl, {
      method: "PUT", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, "Accept": "application/json" },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (result) {
        if (response.ok) {
          unsentSeconds -= sent;
          versionInput.value = result.version;
          document.querySelectorAll(".version-mirror").forEach(function (e) { e.value = result.version; });
          setStatus(interpolate(gettext("Draft saved at %s"), [new Date().toLocaleTimeString()]));
        } else {
          if (response.status === 409) stopped = true;
          setStatus(interpolate(gettext("Draft not saved. %s"), [(result.error && result.error.message) || gettext("The server refused it.")]));
        }
      });
    }).catch(function () {
      setStatus(gettext("Draft not saved (offline?). Your answers are still on this page."));
    }).finally(function () {
      saving = null;
      if (pendingSubmitter) { const s = pendingSubmitter; pendingSubmitter = null; form.requestSubmit(s); }
    });
    return saving;
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
      if (saving) { event.preventDefault(); pendingSubmitter = event.submitter; return; }
      activeInput.value = unsentSeconds;
    });
  }

  // ---------------------------------------------------------------- keyboard
  const questions = Array.prototype.slice.call(form.querySelectorAll("fieldset[data-question]"));
  let lastQuestion = null;
  form.addEventListener("focusin", function (event) {
    const fs = event.target.closest && event.target.closest("fieldset[data-question]");
    if (fs) lastQuestion = fs;
  });
  function current() {
    const here = document.activeElement && document.activeElement.closest && document.activeElement.closest("fieldset[data-question]");
    return here || lastQuestion || questions[0];
  }
  const choose = window.ItemPage.choose;
  const help = window.ItemPage.shortcutHelp(
    [["a", gettext("summary A is better")], ["b", gettext("summary B is better")], ["t", gettext("a tie")],
     ["1 / 2", gettext("much / slightly better")], ["n", gettext("next question")], ["]", gettext("next item")],
     ["[", gettext("previous item")], [gettext("Ctrl+Enter"), gettext("submit")], ["?", gettext("show this list")],
     ["Esc", gettext("close it")]],
    function () { const q = current(); return q && q.querySelector("input"); });

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
      const next = questions[questions.indexOf(current()) + 1];
      if (next) {
        event.preventDefault();
        lastQuestion = next;
        const target = next.querySelector("input[type=radio]:checked, input:not([type=hidden]), textarea, button");
        if (target) target.focus();
        if (next.scrollIntoView) next.scrollIntoView({ block: "nearest" });
      }
      return;
    }
    if (!editable) return;
    const fs = current();
    if (!fs || fs.dataset.kind !== "preference") return;
    const key = fs.dataset.question;
    if (["a", "b", "t"].indexOf(event.key) >= 0) {
      if (choose(fs.querySelector("input[name='" + key + "'][data-key='" + event.key + "']"))) event.preventDefault();
    } else if (event.key === "1" || event.key === "2") {
      const value = event.key === "1" ? "much" : "slightly";
      if (choose(fs.querySelector("input[name='" + key + "__strength'][value='" + value + "']"))) event.preventDefault();
    }
  });
})();
