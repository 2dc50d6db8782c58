"""Reading a rubric file someone uploads: YAML limited to the small tree a rubric is.

A rubric is a few levels of mappings and lists holding text, numbers and booleans
(docs/rubric-format.md), stored as JSON. An uploaded file is read more strictly than the
built-in files of fixtures/rubrics/ (the project's own, which use anchors):

- no anchors or aliases: an alias repeats a node without repeating its text, so a few
  kilobytes of aliases expand into a value of millions of characters ("billion laughs");
- at most MAX_RUBRIC_DEPTH levels of nesting, counted over the parser's events, which
  come one at a time, before the composer (recursive, in Python or in C) builds a node:
  thousands of `[` would otherwise overflow its stack;
- at most MAX_RUBRIC_BYTES;
- only what JSON holds: explicit tags other than the plain ones (`!!str`, `!!int`, …)
  are refused (`!!python/object`, `!!binary`, `!!set`, `!custom`), mapping keys are
  text, integers fit in 64 bits, floats are finite, and a date or `=` stays text.

Every refusal is a RubricDefinitionError naming the problem and, where there is one,
its line.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from annotate.rubrics import RubricDefinitionError
from core.text_validation import check_text

MAX_RUBRIC_BYTES = 1 << 20
# The built-in rubrics nest 7 levels (a span question's sub-question's option); the
# stored definition must also stay within core.text_validation's 64 for JSON.
MAX_RUBRIC_DEPTH = 20
# Longer integer literals than a 64-bit integer needs are refused before Python parses
# them (a 5,000-digit literal is a ValueError in int(), beyond its digit limit).
MAX_INT_LITERAL = 30
INT_BOUND = 2**63

_CORE = "tag:yaml.org,2002:"
ALLOWED_TAGS = frozenset(_CORE + name for name in ("str", "int", "float", "bool", "null", "seq", "map"))
# Resolved from plain text by YAML 1.1 into values JSON has no kind for: kept as text.
_TEXT_TAGS = (_CORE + "timestamp", _CORE + "value")

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it


def _line(mark) -> str:
    return f"line {mark.line + 1}: " if mark is not None else ""


def _shown(tag: str) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag


class _RubricLoader(_Base):
    """The safe loader with JSON's kinds of value only (the module docstring)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _TEXT_TAGS]
        for first, resolvers in _Base.yaml_implicit_resolvers.items()
    }

    # PyYAML's constructors trust the resolver's patterns; an explicit tag (`!!int abc`,
    # `!!float ""`, `!!bool maybe`) reaches them with any text, and they fail with
    # Python's own errors.

    def construct_yaml_int(self, node):
        if len(node.value) > MAX_INT_LITERAL:
            raise RubricDefinitionError(f"{_line(node.start_mark)}an integer this long is not accepted")
        try:
            value = super().construct_yaml_int(node)
        except (ValueError, IndexError):
            raise RubricDefinitionError(f"{_line(node.start_mark)}{node.value!r} is not an integer") from None
        if not -INT_BOUND < value < INT_BOUND:
            raise RubricDefinitionError(f"{_line(node.start_mark)}the integer is too large (at most 64 bits)")
        return value

    def construct_yaml_bool(self, node):
        try:
            return super().construct_yaml_bool(node)
        except KeyError:
            raise RubricDefinitionError(f"{_line(node.start_mark)}{node.value!r} is not true or false") from None

    def construct_yaml_float(self, node):
        try:
            value = super().construct_yaml_float(node)
        except (ValueError, IndexError):
            raise RubricDefinitionError(f"{_line(node.start_mark)}{node.value!r} is not a number") from None
        if not math.isfinite(value):
            raise RubricDefinitionError(f"{_line(node.start_mark)}infinite or not-a-number values are not accepted")
        return value

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        for key_node, _ in node.value:  # merged already: `<<` keys are gone
            if key_node.tag != _CORE + "str":
                raise RubricDefinitionError(f"{_line(key_node.start_mark)}mapping keys must be text")
        return mapping


_RubricLoader.add_constructor(_CORE + "int", _RubricLoader.construct_yaml_int)
_RubricLoader.add_constructor(_CORE + "float", _RubricLoader.construct_yaml_float)
_RubricLoader.add_constructor(_CORE + "bool", _RubricLoader.construct_yaml_bool)


def _scan(text: str) -> None:
    """Refuse anchors, aliases, foreign tags and deep nesting, reading events only."""
    loader = _RubricLoader(text)
    try:
        depth = 0
        while loader.check_event():
            event = loader.get_event()
            where = _line(event.start_mark)
            if isinstance(event, yaml.AliasEvent):
                raise RubricDefinitionError(
                    f"{where}YAML aliases (*{event.anchor}) are not accepted in an uploaded rubric: "
                    "write the part out in full"
                )
            if getattr(event, "anchor", None) is not None:
                raise RubricDefinitionError(
                    f"{where}YAML anchors (&{event.anchor}) and aliases are not accepted in an uploaded rubric: "
                    "write each part out in full"
                )
            tag = getattr(event, "tag", None)
            if tag is not None and tag not in ALLOWED_TAGS:
                raise RubricDefinitionError(
                    f"{where}the tag {_shown(tag)} is not accepted: a rubric holds mappings, lists, text, "
                    "numbers, true/false and null"
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_RUBRIC_DEPTH:
                    raise RubricDefinitionError(f"{where}the rubric is nested more than {MAX_RUBRIC_DEPTH} levels deep")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        raise RubricDefinitionError(f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def read_uploaded_rubric(text: str) -> Any:
    """The value of an uploaded rubric file (any JSON value; RubricDefinition.from_dict
    says whether it is a rubric). Raises RubricDefinitionError, or InvalidTextError for
    text that cannot be stored, naming the problem."""
    check_text(text, "rubric")
    size = len(text.encode("utf-8"))
    if size > MAX_RUBRIC_BYTES:
        raise RubricDefinitionError(f"the file is {size:,} bytes; a rubric file is at most {MAX_RUBRIC_BYTES:,}")
    _scan(text)
    loader = _RubricLoader(text)
    try:
        value = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise RubricDefinitionError(f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    # Escapes such as "\0" make text that cannot be stored out of text that can.
    check_text(value, "rubric")
    return value
