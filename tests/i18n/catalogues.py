"""The committed catalogues under locale/, read as gettext's PO format (a small reader:
the entries, their flags and their translations; obsolete `#~` entries are skipped)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

LOCALE = Path(settings.BASE_DIR) / "locale"
TRANSLATED = [code for code, _ in settings.LANGUAGES if code != "en"]
DOMAINS = ("django", "djangojs")


@dataclass
class Entry:
    msgid: str = ""
    msgid_plural: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)


def po_path(language: str, domain: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / f"{domain}.po"


def read_po(path: Path) -> list[Entry]:
    """The entries of a PO file, the header (msgid "") included."""
    entries, entry, target = [], None, None
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip() or line.startswith("#~"):
            if entry is not None and not line.startswith("#~"):
                entries.append(entry)
                entry = None
            continue
        if entry is not None and entry.msgstr and (line.startswith("#") or line.startswith("msgid ")):
            # An entry ends at a blank line, or where the next one starts without one.
            entries.append(entry)
            entry = None
        if entry is None:
            entry = Entry()
        if line.startswith("#,"):
            entry.flags |= {f.strip() for f in line[2:].split(",")}
        elif line.startswith("#"):
            continue
        elif m := re.match(r'^(msgid|msgid_plural|msgstr(?:\[(\d+)\])?) (".*")$', line):
            text = ast.literal_eval(m.group(3))
            if m.group(1) == "msgid":
                entry.msgid, target = text, ("msgid", None)
            elif m.group(1) == "msgid_plural":
                entry.msgid_plural, target = text, ("msgid_plural", None)
            else:
                index = int(m.group(2) or 0)
                entry.msgstr[index], target = text, ("msgstr", index)
        elif line.startswith('"') and target is not None:
            text = ast.literal_eval(line)
            if target[0] == "msgstr":
                entry.msgstr[target[1]] += text
            elif target[0] == "msgid":
                entry.msgid += text
            else:
                entry.msgid_plural = (entry.msgid_plural or "") + text
        else:
            raise ValueError(f"{path}: cannot read {line!r}")
    return entries


def messages(path: Path) -> list[Entry]:
    """The entries but the header."""
    return [e for e in read_po(path) if e.msgid]


def english_strings(language: str) -> list[str]:
    """The English texts of the catalogues a page in `language` must not show: each msgid
    the language translates differently, cut at its placeholders, in pieces long enough
    to mean something (a single word such as "Main" only as a whole word)."""
    found = set()
    for domain in DOMAINS:
        for e in messages(po_path(language, domain)):
            for english, translated in ((e.msgid, e.msgstr.get(0)), (e.msgid_plural, e.msgstr.get(1))):
                if english is None or english == translated:
                    continue
                for piece in re.split(r"%(?:\(\w+\))?[.\d]*[sdf]|<[^>]*>", english):
                    piece = piece.strip(" :;,.()")
                    if len(piece) >= 4 and re.search(r"[A-Za-z]{3}", piece):
                        found.add(piece)
    return sorted(found)


def english_in(shown: str, strings: list[str]) -> list[str]:
    """The strings of `strings` (english_strings) that `shown` holds as whole words."""
    return [s for s in strings if re.search(rf"(?<![A-Za-z]){re.escape(s)}(?![A-Za-z])", shown)]
