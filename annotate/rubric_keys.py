"""What may name a new rubric: the rules for an uploaded rubric's key.

A study, an import file and the API name a rubric by its key, and people pick one from a
list, so two keys that look alike are one key to a reader. A key is NFKC-normal
lower-case ASCII (letters, digits and hyphens), and it must not look like a built-in key
or another account's key: two keys look alike when their skeletons are equal. The
skeleton is a simplified form of Unicode's confusable skeleton (UTS #39) for short
Latin identifiers: NFKC, accents dropped, common Cyrillic and Greek look-alikes mapped to
Latin, case folded, `0` read as `o`, `1`, `i` and `l` as one letter, `rn` as `m` and
`vv` as `w`, and everything but letters and digits dropped (`lit-summ`, `lit_summ`).
The full confusables table is not needed: a key past the first rule is ASCII already,
and the table here catches the look-alikes an ASCII key can have and the ones stored
before these rules.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")
MAX_KEY_CHARS = 64  # Rubric.key's column
KEY_RULE = "a key is made of lower-case letters, digits and hyphens (a-z, 0-9, -) and starts with a letter or digit"

# Capital and small look-alikes, read before case is folded (Greek capital eta looks
# like H, its small form like n).
_LOOK_ALIKES = str.maketrans(
    {
        # Cyrillic capitals and smalls
        "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
        "С": "C", "Т": "T", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J", "Ү": "Y", "Ӏ": "I",
        "а": "a", "в": "b", "г": "r", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o",
        "п": "n", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ь": "b", "ѕ": "s",
        "і": "i", "ј": "j", "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ү": "y",
        # Greek capitals and smalls
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
        "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
        "α": "a", "β": "b", "γ": "y", "ε": "e", "η": "n", "ι": "i", "κ": "k", "μ": "u",
        "ν": "v", "ο": "o", "π": "n", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w",
        # Latin letters outside ASCII, and ASCII digits that read as letters
        "ı": "i", "ɑ": "a", "ɡ": "g", "ʟ": "l", "0": "o", "1": "l", "i": "l",
    }
)  # fmt: skip
_RUNS = (("rn", "m"), ("vv", "w"))


def normal_key(key: str) -> str:
    """The form a key is stored in: NFKC, lower case."""
    return unicodedata.normalize("NFKC", key).lower()


def skeleton(key: str) -> str:
    """What `key` looks like (the module docstring): equal skeletons, look-alike keys."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", key))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.translate(_LOOK_ALIKES).casefold().translate(_LOOK_ALIKES)
    for run, letter in _RUNS:
        text = text.replace(run, letter)
    return "".join(ch for ch in text if ch.isalnum())


def key_problem(key: object, *, builtin: Iterable[str] = (), others: Iterable[str] = ()) -> str | None:
    """Why `key` cannot name an uploaded rubric, or None. `builtin`: the built-in keys,
    which no upload may be or look like; `others`: stored keys of other accounts (or of
    nobody), which it may not look like (being one of them is a question of ownership,
    not of the key)."""
    if not isinstance(key, str) or not key:
        return f"the rubric key must be text: {KEY_RULE}"
    normal = normal_key(key)
    foreign = next((ch for ch in normal if not ch.isascii()), None)
    if foreign is not None:
        name = unicodedata.name(foreign, "a character")
        return f"rubric key {key!r} holds {foreign!r} (U+{ord(foreign):04X}, {name}): {KEY_RULE}"
    if not KEY_PATTERN.fullmatch(normal):
        return f"rubric key {key!r}: {KEY_RULE}"
    if len(normal) > MAX_KEY_CHARS:
        return f"rubric key {key!r} is {len(normal)} characters long: at most {MAX_KEY_CHARS}"
    mine = skeleton(key)
    for other in builtin:
        if other == key:
            return f"{key!r} is a built-in rubric (fixtures/rubrics/{key}.yaml): give your rubric its own key"
        if skeleton(other) == mine:
            return f"rubric key {key!r} looks like the built-in rubric {other!r}: give your rubric a key of its own"
    for other in others:
        if other != key and skeleton(other) == mine:
            return (
                f"rubric key {key!r} looks like the rubric {other!r} of another account: "
                "give your rubric a key of its own"
            )
    if normal != key:
        return f"rubric key {key!r}: keys are lower case: write it as {normal!r}"
    return None
