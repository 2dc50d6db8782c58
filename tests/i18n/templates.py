"""The rater-facing templates and what the tests of tests/i18n read from them: the text a
template shows outside {% trans %} and {% blocktrans %}, and the msgids it gives the
catalogue (docs/languages.md)."""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path

from django.conf import settings
from django.template.base import Lexer, TokenType
from django.utils.translation.template import templatize

TEMPLATES = Path(settings.BASE_DIR) / "templates"

# Every page a rater or a participant sees: the layout, the rating pages and their parts
# (not templates/annotate/studies/, the study admins' pages), recruit's participant pages
# (not its *_admin.html pages, which study admins see), the sign-in, invitation, password
# and account pages, and the refusals anyone can meet (403, 404, unavailable).
RATER_TEMPLATES = sorted(
    [
        TEMPLATES / "base.html",
        *(TEMPLATES / "annotate").glob("*.html"),
        *(TEMPLATES / "annotate" / "questions").glob("*.html"),
        *(p for p in (TEMPLATES / "recruit").glob("*.html") if not p.name.endswith("_admin.html")),
        *(TEMPLATES / "registration").glob("*.html"),
        TEMPLATES / "403.html",
        TEMPLATES / "404.html",
        TEMPLATES / "unavailable.html",
    ]
)

# Visible text that may stay as it is, each with its reason.
ALLOWED = {
    # The admin pages stay English; the link to them shows to staff only.
    ("base.html", "Admin"),
    # A file's name, the link's text to the API's documentation (which is English).
    ("account.html", "docs/api.md"),
}

STATIC = Path(settings.BASE_DIR) / "static"


def rater_scripts() -> list[Path]:
    """The scripts the rater templates load ({% static 'js/...' %})."""
    names = set()
    for path in RATER_TEMPLATES:
        names |= set(re.findall(r"""\{%\s*static\s+['"](js/[^'"]+\.js)['"]\s*%\}""", path.read_text(encoding="utf-8")))
    return sorted(STATIC / name for name in names)


# Where a script puts text a person reads or hears: an element's text or read attribute, the
# page's status line and save problems, the live region, the browser's own dialogs, and
# ItemPage.el(tag, class, text).
_JS_SINK = re.compile(
    r"""(?:\.(?:textContent|innerText|title|placeholder|alt)\s*=(?!=)\s*"""
    r"""|\b(?:setStatus|showSaveProblem|announce|alert|confirm|prompt|createTextNode)\(\s*"""
    r"""|\.setAttribute\(\s*["'](?:aria-label|title|placeholder|alt)["']\s*,\s*"""
    r"""|\bel\(\s*["'][^"']*["']\s*,\s*["'][^"']*["']\s*,\s*)"""
    r"""(?:[^"'`;]*?(?:\?|:|\|\||\+)\s*)?(["'`])((?:(?!\1)[^\\]|\\.)*)\1"""
)
_JS_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def untranslated_js(source: str) -> list[str]:
    """The string literals a script shows (put where a person reads or hears them) without
    gettext, ngettext or interpolate over a gettext: those with a word in them. Text built
    from values (a summary's text, a number) and punctuation alone may stay."""
    code = _JS_COMMENT.sub("", source)
    return [m.group(2) for m in _JS_SINK.finditer(code) if re.search(r"[^\W\d_]{2}", m.group(2))]


# What stands for a translated piece or a value: a character of Unicode's private use
# area, which is neither a letter nor anything a template holds.
SLOT = "\ue000"
# Attributes whose values a person reads or hears (screen readers read aria-label).
READ_ATTRIBUTES = {"aria-label", "title", "placeholder", "alt"}


class _VisibleText(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        values = dict(attrs)
        self.texts += [v for k, v in attrs if k in READ_ATTRIBUTES and v]
        if tag == "input" and values.get("type") in ("submit", "button") and values.get("value"):
            self.texts.append(values["value"])

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.texts.append(data)


def visible_text(html: str) -> str:
    """What a person reads or hears on a rendered page: its text (the title included) and
    its read attributes, one piece a line."""
    parser = _VisibleText()
    parser.feed(html)
    parser.close()
    return "\n".join(" ".join(t.split()) for t in parser.texts if t.strip())


def _outside_translation(source: str) -> str:
    """The template with every translated piece, value and tag replaced by SLOT, and its
    comments dropped: what is left is the text it shows as written."""
    pieces, in_blocktrans, in_comment = [], False, False
    for token in Lexer(source).tokenize():
        if token.token_type == TokenType.COMMENT:
            continue
        name = token.contents.split()[0] if token.token_type == TokenType.BLOCK and token.contents else ""
        if name == "comment":
            in_comment = True
        elif name == "endcomment":
            in_comment = False
        elif name in ("blocktrans", "blocktranslate"):
            in_blocktrans = True
        elif name in ("endblocktrans", "endblocktranslate"):
            in_blocktrans = False
        if in_comment or in_blocktrans or name in ("comment", "endcomment", "endblocktrans", "endblocktranslate"):
            pieces.append(SLOT if name in ("blocktrans", "blocktranslate") else "")
            continue
        pieces.append(token.contents if token.token_type == TokenType.TEXT else SLOT)
    return "".join(pieces)


def untranslated(source: str) -> list[str]:
    """The pieces of text a template shows that no {% trans %} or {% blocktrans %} holds:
    each run of visible text (or of a read attribute) between two template pieces that has
    a letter in it. Punctuation, symbols, digits and white space alone may stay."""
    parser = _VisibleText()
    parser.feed(_outside_translation(source))
    parser.close()
    found = []
    for text in parser.texts:
        for piece in text.split(SLOT):
            piece = " ".join(piece.split())
            if any(c.isalpha() for c in piece):
                found.append(piece)
    return found


def template_msgids(source: str) -> set[str]:
    """The msgids a template gives the catalogue, as makemessages reads them (Django's
    templatize, then its gettext calls)."""
    code = templatize(source)
    msgids = set()
    for call in re.finditer(r"\b(?:n|p|np)?gettext\(((?:u?'(?:[^'\\]|\\.)*'\s*,?\s*)+)", code):
        msgids.update(ast.literal_eval(f"[{call.group(1)}]"))
    return msgids
