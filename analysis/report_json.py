"""The study report's one JSON form: the stored payload (AnalysisResult.result), the API's
``result`` and the ``report.json`` file are all written by :func:`report_payload` /
:func:`report_json`, and read back by :func:`report_from_payload`.

- ``report_payload(report)``: the JSON-ready dict, keys in the dataclasses' order; NaN and
  infinities become null, numpy scalars Python numbers;
- ``report_json(report)``: that dict as text (what ``report.json`` holds);
- ``report_from_payload(payload)``: a stored payload back into the dataclasses
  (analysis.sections); a key the dataclasses do not know is an error, not dropped.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from analysis.sections import StudyReport

__all__ = ["from_payload", "json_text", "report_from_payload", "report_json", "report_payload", "to_payload"]


_SCALARS = frozenset({str, int, bool, type(None)})


def to_payload(value: Any) -> Any:
    """A dataclass, mapping or sequence as JSON-ready values (recursively)."""
    kind = type(value)
    if kind in _SCALARS:  # most values of a report: answered first
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None and field.metadata.get("optional"):
                continue
            out[field.name] = to_payload(item)
        return out
    if isinstance(value, Mapping):
        return {str(k): to_payload(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_payload(v) for v in value]
    if hasattr(value, "item") and type(value).__module__ == "numpy":  # a numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _kept(value: Any) -> Any:
    return value


@functools.cache
def _reader(kind: Any) -> Callable[[Any], Any]:
    """The function that reads a parsed JSON value as ``kind`` (see from_payload), made once
    per type: the type hints are looked at once, not at every value of a large report."""
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        readers = {field.name: _reader(hints[field.name]) for field in dataclasses.fields(kind)}

        def read_dataclass(value: Any) -> Any:
            unknown = set(value) - readers.keys()
            if unknown:
                raise ValueError(f"{kind.__name__} has no field {', '.join(sorted(unknown))}.")
            return kind(**{name: None if item is None else readers[name](item) for name, item in value.items()})

        return read_dataclass
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union or origin is types.UnionType:
        (inner,) = [a for a in args if a is not type(None)]
        return _reader(inner)
    if origin is tuple:
        item = _reader(args[0])
        if item is _kept:
            return tuple
        return lambda value: tuple(None if v is None else item(v) for v in value)
    if origin in (Mapping, dict):
        item = _reader(args[1])
        return lambda value: {k: None if v is None else item(v) for k, v in value.items()}
    return _kept


def from_payload(kind: Any, value: Any) -> Any:
    """``value`` (JSON as parsed) read as the type ``kind``: dataclasses, ``X | None``,
    ``tuple[X, ...]``, ``Mapping[str, X]``; anything else is kept as it is."""
    return None if value is None else _reader(kind)(value)


def report_payload(report: StudyReport) -> dict[str, Any]:
    """The report as the JSON-ready dict that is stored and served."""
    return to_payload(report)


def report_from_payload(payload: Mapping[str, Any]) -> StudyReport:
    """A stored payload (report_payload's output, as parsed JSON) as the dataclasses."""
    return from_payload(StudyReport, payload)


def json_text(value: Any) -> str:
    """The report's JSON text form (indented, UTF-8 kept, a final newline)."""
    return json.dumps(to_payload(value), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def report_json(report: StudyReport) -> str:
    """The report as JSON text: ``report.json``, and the API's ``result`` when parsed."""
    return json_text(report)
