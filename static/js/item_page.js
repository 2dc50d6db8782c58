// What the two item pages share (rate.js for one summary, compare.js for summaries side
// by side): building elements with text set only through textContent, answering a radio
// or tickbox the way a click would, telling when a key is typing rather than a shortcut,
// and the keyboard-shortcut list (opened with ?, closed with Esc or its button, giving
// the keyboard back where it was). Loaded before either page's script; no build step.
"use strict";
window.ItemPage = (function () {
  // The page's language: Django's JavaScript catalogue (/jsi18n/, loaded before this file on
  // a page that is not English) defines gettext and its kin. An English page loads none: its
  // strings are the catalogue's msgids, so these stand-ins return them as they are.
  const gettext = window.gettext || function (text) { return text; };
  const ngettext = window.ngettext || function (singular, plural, count) { return count === 1 ? singular : plural; };
  const interpolate = window.interpolate || function (format, values, named) {
    if (named) return format.replace(/%\(\w+\)s/g, function (match) { return String(values[match.slice(2, -2)]); });
    let i = 0;
    return format.replace(/%s/g, function () { return String(values[i++]); });
  };

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The input changed as if clicked: focus on it and a bubbling change event, so the
  // page's autosave and its own listeners see it.
  function changed(input) {
    input.focus();
    input.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }
  function choose(input) {
    if (!input) return false;
    input.checked = true;
    return changed(input);
  }
  function toggle(input) {
    if (!input) return false;
    input.checked = !input.checked;
    return changed(input);
  }

  // A key pressed in a text field is typing, never a shortcut.
  function isTyping(target) {
    return !!target && (target.tagName === "TEXTAREA" || target.tagName === "SELECT" || target.isContentEditable ||
      (target.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(target.type)));
  }

  // The shortcut list: rows are [keys, what they do]. `fallback()` names where the
  // keyboard goes on closing when the element that had it is gone.
  function shortcutHelp(rows, fallback) {
    const help = el("div", "shortcut-help");
    help.id = "shortcut-help";
    help.setAttribute("role", "dialog");
    help.setAttribute("aria-label", gettext("Keyboard shortcuts"));
    help.tabIndex = -1;
    help.hidden = true;
    help.appendChild(el("h2", "", gettext("Keyboard shortcuts")));
    const list = el("ul");
    rows.forEach(function (pair) {
      const li = el("li");
      li.appendChild(el("kbd", "", pair[0]));
      li.appendChild(document.createTextNode(": " + pair[1]));
      list.appendChild(li);
    });
    help.appendChild(list);
    let back = null;
    function open() {
      const active = document.activeElement;
      back = active && active !== document.body && !help.contains(active) ? active : null;
      help.hidden = false;
      help.focus();
    }
    function hide() {
      help.hidden = true;
      const target = back && document.contains(back) ? back : fallback && fallback();
      back = null;
      if (target) target.focus();
    }
    const close = el("button", "secondary", gettext("Close"));
    close.type = "button";
    close.addEventListener("click", hide);
    help.appendChild(close);
    document.body.appendChild(help);
    return { element: help, open: open, hide: hide, isOpen: function () { return !help.hidden; } };
  }

  // ] and [ go to the next and previous item of the queue (links the page carries).
  function goToItem(key) {
    const link = document.getElementById(key === "]" ? "next-item" : "previous-item");
    if (!link) return false;
    window.location.assign(link.href);
    return true;
  }

  return { gettext: gettext, ngettext: ngettext, interpolate: interpolate, el: el, choose: choose, toggle: toggle, isTyping: isTyping, shortcutHelp: shortcutHelp, goToItem: goToItem };
})();
