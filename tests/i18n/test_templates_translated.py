"""Every text a rater or participant reads in a template goes through the catalogue: a
template that shows words outside {% trans %} / {% blocktrans %} fails here, naming them
(docs/languages.md). Punctuation, symbols and digits may stay as written; the few words
that may stay are listed in tests/i18n/templates.py (ALLOWED) with their reasons. The same
holds for the text the rater pages' scripts write: through gettext (Django's JavaScript
catalogue), never as a bare string."""

import pytest

from tests.i18n.templates import ALLOWED, RATER_TEMPLATES, TEMPLATES, rater_scripts, untranslated, untranslated_js


@pytest.mark.parametrize("path", RATER_TEMPLATES, ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_a_rater_template_shows_no_untranslated_text(path):
    left = [text for text in untranslated(path.read_text(encoding="utf-8")) if (path.name, text) not in ALLOWED]
    assert left == [], f"{path.relative_to(TEMPLATES)}: wrap in {{% trans %}} or {{% blocktrans %}}: {left}"


def test_the_rater_templates_include_every_page_a_rater_reaches():
    names = {str(p.relative_to(TEMPLATES)) for p in RATER_TEMPLATES}
    assert {"base.html", "annotate/queue.html", "annotate/rate.html", "annotate/compare.html"} <= names
    assert {"annotate/done.html", "annotate/questions/scale.html", "recruit/consent.html", "recruit/done.html"} <= names
    assert {"registration/login.html", "registration/invite_accept.html", "registration/sso_refused.html"} <= names
    assert {"registration/password_reset_form.html", "403.html", "404.html", "recruit/refused_write.html"} <= names
    assert not any(n.startswith("annotate/studies/") or n.endswith("_admin.html") for n in names)


@pytest.mark.parametrize("path", rater_scripts(), ids=lambda p: p.name)
def test_a_rater_script_shows_no_untranslated_text(path):
    left = untranslated_js(path.read_text(encoding="utf-8"))
    assert left == [], f"static/js/{path.name}: wrap in gettext(): {left}"


def test_the_rater_scripts_are_those_the_item_pages_and_the_layout_load():
    assert [p.name for p in rater_scripts()] == ["announce.js", "compare.js", "item_page.js", "rate.js"]


def test_the_script_check_finds_words_where_a_person_reads_them_and_nothing_else():
    source = """el("p", "hint", "Hello there");  // el("p", "", "in a comment")
    x.textContent = ""; y.textContent = gettext("Fine"); z.textContent = count + " / " + total;
    status.textContent = ok ? "Saved." : gettext("Not saved");
    setStatus('Draft saved'); announce(interpolate(gettext("Highlight %s saved."), [n]));
    b.setAttribute("aria-label", "Close the list"); b.setAttribute("role", "dialog");
    li.appendChild(el("span", "", " ↔ " + gettext("source:") + " ")); if (a.title === "x") {}
    const c = el("span", "cite cite-missing"); c.title = `Not found`;"""
    assert untranslated_js(source) == ["Hello there", "Saved.", "Draft saved", "Close the list", "Not found"]


def test_the_check_finds_words_in_text_and_in_read_attributes_and_nothing_else():
    source = """{% load i18n %}<h1>Hello {{ name }}</h1>
    <button aria-label="Close the list">{% trans "Close" %}</button>
    <input type="submit" value="Send">
    <p>{% blocktrans %}Fine, {{ name }}{% endblocktrans %} → · 3 % ✓</p>
    {% comment %}A note for the template's readers{% endcomment %}{# another #}
    <script>const words = "not shown";</script><a href="/x" class="link">{{ label }}</a>"""
    assert untranslated(source) == ["Hello", "Close the list", "Send"]
