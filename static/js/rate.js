// Rating page: draft autosave through the API, active-time tracking and keyboard
// shortcuts. The page works without this script (plain form posts); nothing here
// ever inserts stored text as HTML.
(function () {
  "use strict";
  const form = document.getElementById("rating-form");
  if (!form) return;
  const editable = form.dataset.editable === "true";
  const apiUrl = form.dataset.apiUrl;
  const digitQuestion = form.dataset.digitQuestion;
  const versionInput = document.getElementById("id_version");
  const activeInput = document.getElementById("id_active_seconds");
  const statusEl = document.getElementById("save-status");
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;

  // --- active time: a second counts while the page is visible and the rater has
  // touched it within the last minute.
  const IDLE_AFTER_MS = 60000;
  let lastActivity = Date.now();
  let unsentSeconds = 0;
  ["keydown", "mousedown", "mousemove", "scroll", "input", "focusin"].forEach(function (type) {
    document.addEventListener(type, function () { lastActivity = Date.now(); }, { passive: true });
  });
  setInterval(function () {
    if (document.visibilityState === "visible" && Date.now() - lastActivity < IDLE_AFTER_MS) {
      unsentSeconds += 1;
    }
  }, 1000);

  function setStatus(text) { statusEl.textContent = text; }
  function syncVersion(version) {
    versionInput.value = version;
    document.querySelectorAll(".version-mirror").forEach(function (el) { el.value = version; });
  }

  function collect() {
    const answers = {};
    const rationales = {};
    form.querySelectorAll("fieldset[data-question]").forEach(function (fs) {
      const key = fs.dataset.question;
      const kind = fs.dataset.kind;
      if (kind === "checkboxes") {
        answers[key] = Array.from(fs.querySelectorAll("input[name='" + key + "']:checked")).map(function (el) { return el.value; });
      } else if (kind === "text") {
        answers[key] = fs.querySelector("textarea[name='" + key + "']").value;
      } else {
        const checked = fs.querySelector("input[name='" + key + "']:checked");
        answers[key] = checked ? (kind === "scale" ? Number(checked.value) : checked.value) : null;
      }
      const rationale = fs.querySelector("textarea[name='" + key + "__rationale']");
      if (rationale) rationales[key] = rationale.value;
    });
    return { answers: answers, rationales: rationales };
  }

  // --- autosave
  let timer = null;
  let saving = null;        // the in-flight save, if any
  let stopped = false;      // after a conflict nothing more is sent
  let pendingSubmitter = null;

  function save() {
    timer = null;
    if (stopped) return Promise.resolve();
    const body = collect();
    const sent = unsentSeconds;
    body.version = Number(versionInput.value);
    body.active_seconds = sent;
    setStatus("Saving draft…");
    saving = fetch(apiUrl, {
      method: "PUT",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, "Accept": "application/json" },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (response.ok) {
          unsentSeconds -= sent;
          syncVersion(data.version);
          setStatus("Draft saved at " + new Date().toLocaleTimeString());
        } else if (response.status === 409) {
          stopped = true;
          setStatus((data.error && data.error.message) || "Changed elsewhere: reload the page.");
        } else {
          setStatus((data.error && data.error.message) || "Draft not saved.");
        }
      });
    }).catch(function () {
      setStatus("Draft not saved (offline?). Your answers are still on this page.");
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

  // --- keyboard: digits set the score, Ctrl/Cmd+Enter submits.
  document.addEventListener("keydown", function (event) {
    if (!editable) return;
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      event.preventDefault();
      form.requestSubmit(document.getElementById("submit-button"));
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || !digitQuestion) return;
    const target = event.target;
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"))) return;
    if (/^[0-9]$/.test(event.key)) {
      const radio = document.getElementById("q-" + digitQuestion + "-" + event.key);
      if (radio) {
        event.preventDefault();
        radio.checked = true;
        radio.focus();
        radio.dispatchEvent(new Event("change", { bubbles: true }));
      }
    }
  });
})();
