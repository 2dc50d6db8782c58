"""The catalogues under locale/ are complete: every Spanish and German entry translated and
none fuzzy, every msgid of the rater templates and scripts in them, their compiled .mo
files (committed beside them) the same catalogues, and gettext's own check passes
(docs/languages.md)."""

import gettext
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from tests.i18n.catalogues import DOMAINS, TRANSLATED, messages, po_path
from tests.i18n.templates import RATER_TEMPLATES, rater_scripts, template_msgids

CATALOGUES = [(language, domain) for language in TRANSLATED for domain in DOMAINS]
# The scripts of the rater pages (the item pages load item_page.js, then rate.js or compare.js).
RATER_SCRIPTS = rater_scripts()


def test_spanish_and_german_are_translated():
    assert TRANSLATED == ["es", "de"]


@pytest.mark.parametrize(("language", "domain"), CATALOGUES)
def test_every_entry_is_translated_and_none_is_fuzzy(language, domain):
    entries = messages(po_path(language, domain))
    assert len(entries) > 40
    fuzzy = [e.msgid for e in entries if "fuzzy" in e.flags]
    untranslated = [e.msgid for e in entries if not e.msgstr or not all(e.msgstr.values())]
    plurals_short = [e.msgid for e in entries if e.msgid_plural is not None and len(e.msgstr) < 2]
    assert fuzzy == [] and untranslated == [] and plurals_short == []


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_msgid_of_the_rater_templates_is_in_the_catalogue(language):
    wanted = set().union(*(template_msgids(p.read_text(encoding="utf-8")) for p in RATER_TEMPLATES))
    have = set()
    for e in messages(po_path(language, "django")):
        have |= {e.msgid, e.msgid_plural} - {None}
    assert len(wanted) > 150
    assert sorted(wanted - have) == []


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_string_of_the_rater_scripts_is_in_the_catalogue(language):
    wanted = set()
    for path in RATER_SCRIPTS:
        wanted |= set(re.findall(r'\bgettext\("((?:[^"\\]|\\.)*)"\)', path.read_text(encoding="utf-8")))
    have = {e.msgid for e in messages(po_path(language, "djangojs"))}
    assert len(wanted) > 40
    assert sorted(wanted - have) == []


@pytest.mark.parametrize(("language", "domain"), CATALOGUES)
def test_the_committed_mo_file_is_the_po_file_compiled(language, domain):
    po = po_path(language, domain)
    with open(po.with_suffix(".mo"), "rb") as f:
        compiled = gettext.GNUTranslations(f)
    for e in messages(po):
        if e.msgid_plural is None:
            assert compiled.gettext(e.msgid) == e.msgstr[0], e.msgid
        else:
            assert compiled.ngettext(e.msgid, e.msgid_plural, 1) == e.msgstr[0], e.msgid
            assert compiled.ngettext(e.msgid, e.msgid_plural, 2) == e.msgstr[1], e.msgid


@pytest.mark.parametrize(("language", "domain"), CATALOGUES)
def test_msgfmt_checks_each_catalogue(language, domain, tmp_path):
    # --check: the header, the plural forms, and the same placeholders in every translation.
    done = subprocess.run(
        ["msgfmt", "--check", "-o", str(tmp_path / "out.mo"), str(po_path(language, domain))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_string_the_python_code_marks_is_in_the_catalogue(language, tmp_path):
    # The keywords makemessages gives xgettext for Python: a string marked in the code but
    # never put in the catalogue (`make messages`) would show in English.
    base = Path(settings.BASE_DIR)
    files = sorted(
        str(p.relative_to(base))
        for app in ("annotate", "recruit", "config", "core", "sso")
        for p in (base / app).rglob("*.py")
        if "migrations" not in p.parts
    )
    keywords = ["gettext_noop", "gettext_lazy", "ngettext_lazy:1,2", "gettext", "ngettext:1,2", "_"]
    out = tmp_path / "code.po"
    subprocess.run(
        ["xgettext", "--language=Python", "--from-code=UTF-8", "-o", str(out), *(f"--keyword={k}" for k in keywords)]
        + files,
        cwd=base,
        check=True,
    )
    wanted = set()
    for e in messages(out):
        wanted |= {e.msgid, e.msgid_plural} - {None}
    have = set()
    for e in messages(po_path(language, "django")):
        have |= {e.msgid, e.msgid_plural} - {None}
    assert "Rating submitted." in wanted and "an answer is required" in wanted
    assert "This sign-in has expired or was used already: sign in again." in wanted
    assert sorted(wanted - have) == []
