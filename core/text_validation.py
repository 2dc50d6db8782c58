"""Text that can be stored and shown: the one check every entry point applies.

Two kinds of string pass Python and JSON but break a study once stored:

- a lone UTF-16 surrogate (``"x\\ud83d"``): a JSON ``\\u`` escape can carry one, and a
  browser sends one when an emoji is cut in half. It is not Unicode text and cannot be
  encoded as UTF-8: PostgreSQL refuses it (the request failed with a 500), and SQLite
  keeps it as an escape inside a JSON column, after which every page, API answer and
  export that reads the row fails;
- NUL (U+0000), which PostgreSQL's text and jsonb columns refuse.

And one shape of JSON breaks the code that reads it: nesting deeper than Python's
recursion limit makes `json.loads` (and any recursive walk after it) raise
RecursionError. No input of the platform nests more than a few levels.

`text_problem` says what is wrong with one string; `find_problem` walks a decoded JSON
value (object keys included) without recursion and names the first bad place;
`check_text` and `loads` raise `InvalidTextError`, a 400 naming the field. The API's
JSON parser, the rubric's answer validation, the services that take free text, the
HTML forms and the importers all use them; `manage.py scan_text` finds stored text
that predates them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.exceptions import ApplicationError

# Deeper than any input the platform takes (a span's sub-answer sits 5 levels down),
# far below Python's recursion limit.
MAX_DEPTH = 64

TOO_DEEP = f"is nested more than {MAX_DEPTH} levels deep"

# The longest texts a study takes, in characters (code points). A rating page shows the
# whole source beside the summary; beyond these it stops being a page a person can rate
# (the longest full-text article of the Evidence Inference corpus is about 90,000
# characters; LitSumm and FactPICO summaries are under 3,000). docs/import-format.md.
MAX_SOURCE_CHARS = 200_000
MAX_SUMMARY_CHARS = 20_000
TEXT_LIMITS = {"source": MAX_SOURCE_CHARS, "summary": MAX_SUMMARY_CHARS}


def length_problem(text: str, kind: str) -> str | None:
    """Why `text` is too long to be a `kind` ("source" or "summary"), or None."""
    limit = TEXT_LIMITS[kind]
    if len(text) <= limit:
        return None
    return f"is {len(text):,} characters long; a {kind} may have at most {limit:,} (docs/import-format.md)"


def check_length(text: str, kind: str, field: str = "text") -> None:
    """Raise a 400 naming `field` when `text` is too long to be a `kind`."""
    problem = length_problem(text, kind)
    if problem is not None:
        raise ApplicationError(f'field "{field}": {problem}', extra={"fields": {field: problem}})


# The longest free text a person writes into the platform, in characters, by field
# (docs/security.md, "Limits", lists them all). Longer input is refused with a 400 naming
# the field and the limit, never cut short.
MAX_RATIONALE_CHARS = 20_000  # rationales, span rationales, text answers (annotate.rubrics)
MAX_SKIP_REASON_CHARS = 5_000
MAX_NOTE_CHARS = 20_000
MAX_EXPLANATION_CHARS = 20_000
MAX_ADMIN_TEXT_CHARS = 50_000  # the Django admin's free text: a study's description, guidelines, …
MAX_BATCH_NAME_CHARS = 200  # the column's length (annotate.models.Batch.name)


def limit_problem(text: str, limit: int) -> str | None:
    """Why `text` is longer than `limit` characters, or None."""
    if not isinstance(text, str) or len(text) <= limit:
        return None
    return f"is {len(text):,} characters long; at most {limit:,} are allowed"


def check_limit(text: str, field: str, limit: int) -> None:
    """Raise a 400 naming `field` and the limit when `text` is longer than `limit`."""
    problem = limit_problem(text, limit)
    if problem is not None:
        raise ApplicationError(f'field "{field}": {problem}', extra={"fields": {field: problem}})


class InvalidTextError(ApplicationError):
    """Input holds text that cannot be stored, or JSON nested too deeply. `field` names
    where (a form field, or a dotted path into a JSON body; blank for the top level of a
    body, shown as "body"); `problem` says what."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        name = field or "body"
        super().__init__(f"{name}: {problem}", extra={"fields": {name: problem}})


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character (U+0000), which cannot be stored"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        return (
            f"contains a lone surrogate (U+{code:04X}), which is not Unicode text "
            "(often half of an emoji cut in two); remove it and try again"
        )
    return None


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def find_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """(where, problem) for the first string of `value` (a decoded JSON value: dicts,
    lists, strings, numbers) that cannot be stored, or the first container nested more
    than MAX_DEPTH levels; None when all is well. A bad object key is reported at the
    object that holds it. Iterative, so any depth Python built can be walked."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return where, problem
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                return where, TOO_DEEP
            if isinstance(item, dict):
                children = []
                for key, child in item.items():
                    if isinstance(key, str):
                        problem = text_problem(key)
                        if problem:
                            return where, f"has a key that {problem}"
                    children.append((child, _join(where, key), depth + 1))
            else:
                children = [(child, _join(where, i), depth + 1) for i, child in enumerate(item)]
            stack.extend(reversed(children))  # document order
    return None


def problem_message(value: Any) -> str | None:
    """find_problem's answer as one message for a form or serializer field, or None."""
    found = find_problem(value)
    if found is None:
        return None
    where, problem = found
    return f"{where}: {problem}" if where else problem


def check_text(value: Any, field: str) -> None:
    """Raise InvalidTextError naming `field` (and the path inside it) if `value` holds
    text that cannot be stored."""
    found = find_problem(value, field)
    if found is not None:
        raise InvalidTextError(*found)


# Strings and the punctuation that matters for nesting, in one pass of the C regex engine.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]')


def _too_deep(text: str) -> str | None:
    """The top-level key under which `text` nests deeper than MAX_DEPTH ("" when it is
    not under a key), or None. Scans the raw text, so json.loads never sees input deep
    enough to overflow."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    depth, key, last_string = 0, "", None
    for token in _TOKENS.finditer(text):
        tok = token.group()
        if tok in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return key
        elif tok in "]}":
            depth -= 1
            if depth <= 1:
                key = ""
        elif tok == ":":
            if depth == 1 and last_string is not None:
                try:
                    key = json.loads(last_string)
                except ValueError:
                    key = ""
                if text_problem(key):
                    key = ""
        elif tok != ",":
            last_string = tok
    return None


def loads(text: str, *, field: str = "", **options: Any) -> Any:
    """json.loads for input from outside: JSON nested deeper than MAX_DEPTH and text that
    cannot be stored are refused with InvalidTextError naming the field (`field`, or the
    top-level key of a body); malformed JSON raises json.JSONDecodeError as usual.
    `options` go to json.loads."""
    deep = _too_deep(text)
    if deep is not None:
        raise InvalidTextError(field or deep, TOO_DEEP)
    value = json.loads(text, **options)
    if options.keys() <= {"parse_constant"} and _storable_after_decoding(text):
        return value  # a hook could make strings of its own: those are walked
    check_text(value, field)
    return value


def _storable_after_decoding(text: str) -> bool:
    """True when no string json.loads makes of `text` can hold a NUL or a lone surrogate,
    read off the raw text in C (the common case of an import line: walking every decoded
    string in Python cost a twentieth of an import). Decoded text gets such a character
    only from the raw text itself or from a \\u escape; any backslash-u sends the value to
    the full walk, which names the field."""
    if "\\u" in text or "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
