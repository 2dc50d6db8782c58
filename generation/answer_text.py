"""A model's answer as text we can store and read: control characters taken out
(`clean_model_text`), a JSON object read tolerantly (fences, trailing commas, an answer cut
off mid-object: `parse_json_object`), values as text and short excerpts for messages.
Pure text handling; the traffic itself goes through generation/llm.py."""

from __future__ import annotations

import json
import re

_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
NUL = "\x00"
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_model_text(text: str) -> tuple[str, list[str]]:
    """(text that can be stored and shown, what was changed). Model output is hostile
    text: NUL characters (which PostgreSQL refuses) and bidirectional overrides (which
    make a page show text other than what is stored) are removed, and lone surrogates
    (which are not Unicode and break every page that reads them) become U+FFFD."""
    notes = []
    if "\x00" in text:
        notes.append(f"{text.count(NUL)} NUL character(s) removed")
        text = text.replace("\x00", "")
    if not text.isascii():
        surrogates = len(_SURROGATE.findall(text))
        if surrogates:
            notes.append(f"{surrogates} lone surrogate(s) replaced by U+FFFD")
            text = _SURROGATE.sub("\ufffd", text)
        controls = len(_BIDI_CONTROLS.findall(text))
        if controls:
            notes.append(f"{controls} bidirectional control character(s) removed")
            text = _BIDI_CONTROLS.sub("", text)
    return text, notes


# --- tolerant parsing --------------------------------------------------------------

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*|\s*```\s*$")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _outside_strings(text: str, start: int = 0):
    """Yield (index, character) of every character of `text` from `start` that is not
    inside a JSON string (the quotes themselves are not yielded)."""
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            yield i, ch


def _balanced_objects(text: str):
    """Yield every top-level {...} substring, respecting JSON strings."""
    depth, start = 0, None
    for i, ch in _outside_strings(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                yield text[start : i + 1]


def parse_json_object(text: str) -> dict | None:
    """The JSON object in an LLM answer: plain, fenced in ```json, surrounded by
    prose, with trailing commas, or cut off (at max_tokens) after some complete members,
    which are kept. None when there is no readable object."""
    cleaned = _FENCE.sub("", text.strip())
    candidates = [cleaned, *_balanced_objects(cleaned)]
    for candidate in candidates:
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                value = json.loads(attempt)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                return _clean_strings(value)
    value = _close_truncated(cleaned)
    return _clean_strings(value) if value is not None else None


def _clean_strings(value: dict) -> dict:
    """`value` with every string and key made storable (clean_model_text): a JSON escape
    (\\u0000, \\ud800) decodes to what the raw text's cleaning could not see."""

    def clean(item):
        if isinstance(item, str):
            return clean_model_text(item)[0]
        if isinstance(item, list):
            return [clean(child) for child in item]
        if isinstance(item, dict):
            return {clean_model_text(str(k))[0]: clean(v) for k, v in item.items()}
        return item

    try:
        return clean(value)
    except RecursionError:  # nested deeper than any answer we ask for
        return {}


def _close_truncated(text: str, tries: int = 50) -> dict | None:
    """The object of a JSON answer that stops before its end, closed after its last
    complete member (a cut-off string is dropped with its member): `{"queries": ["a",
    "b` gives {"queries": ["a"]}. None for text that is not an unfinished object."""
    start = text.find("{")
    if start < 0:
        return None
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of the kept text, the brackets that close it)
    for i, ch in _outside_strings(text, start):
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
            if len(stack) > 64:  # deeper than any answer we ask for
                return None
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return None  # a complete object: not cut off (and not readable as JSON)
            cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == ",":
            cuts.append((i, "".join(reversed(stack))))
    if not stack:
        return None
    for end, closers in reversed(cuts[-tries:]):
        try:
            value = json.loads(_TRAILING_COMMA.sub(r"\1", text[start:end] + closers))
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def as_text(value) -> str:
    """A JSON value a model gave where text was asked for, as text: a string as it is,
    a list of strings joined by spaces (models often answer a list); nothing for null, a
    number, an object or anything else."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return " ".join(part.strip() for part in value if isinstance(part, str) and part.strip())
    return ""


def excerpt(text: str, limit: int = 80) -> str:
    """The start of a model's answer for a message: whitespace collapsed, quoted, cut."""
    flat = " ".join(text.split())
    if not flat:
        return "an empty answer"
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
