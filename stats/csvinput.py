"""Reading ratings and scores from CSV files made anywhere (the `agreement` and `correlate` tools).

Pure code, no Django. Every cell is read as text first and converted here, so that the
error names the line and the column instead of pandas guessing a type: an empty cell is a
missing value, anything else in a numeric column must be a finite number.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from stats.agreement import agreement_report
from stats.frames import ITEM, QUESTION, RATER, VALUE, AgreementInputError
from stats.metaeval import MetaEvalInputError, correlate_report

__all__ = [
    "CsvInputError",
    "agreement_from_csv",
    "correlate_from_csv",
    "parse_categories",
    "quoting_problem",
    "read_csv_text",
]


class CsvInputError(ValueError):
    """The file cannot be analysed as given; the message says where and why."""


def quoting_problem(text: str) -> tuple[int, str] | None:
    """(line, what is wrong) for the first record whose quoting is broken, or None.

    Python's csv module and pandas both accept a file whose last quoted cell is never
    closed (`q1,"Q?` reads as one row with the cut text) or treat it as a cell running to
    the end of the file; a strict reader refuses it, and the line named is the one the
    broken record starts on (line 1 is the header)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    try:
        for _ in reader:
            start = reader.line_num + 1
    except csv.Error as exc:
        if "end of data" in str(exc):
            return start, 'a quoted cell starting on this line is never closed (a " opens it and none ends it)'
        return start, f'the quoting is broken ({exc}): a quoted cell must end with " before the next comma or line end'
    return None


def read_csv_text(path: str | Path) -> pd.DataFrame:
    """The file as a frame of stripped strings (header row = column names).

    Refuses a missing, unreadable or empty file, a file with a header but no rows, and a
    file whose quoting is broken (naming the line).
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise CsvInputError(f"{path}: no such file.") from None
    except IsADirectoryError:
        raise CsvInputError(f"{path}: is a directory, not a CSV file.") from None
    except UnicodeDecodeError as exc:
        raise CsvInputError(f"{path}: not a readable CSV file ({exc}).") from None
    problem = quoting_problem(raw)
    if problem is not None:
        raise CsvInputError(f"{path}: line {problem[0]}: {problem[1]}.")
    try:
        frame = pd.read_csv(io.StringIO(raw), dtype=str, keep_default_na=False, na_filter=False)
    except pd.errors.EmptyDataError:
        raise CsvInputError(f"{path}: the file is empty.") from None
    except pd.errors.ParserError as exc:
        raise CsvInputError(f"{path}: not a readable CSV file ({exc}).") from None
    if frame.empty:
        raise CsvInputError(f"{path}: the file has a header but no rows.")
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame.apply(lambda column: column.str.strip())


def _require_columns(frame: pd.DataFrame, columns: Sequence[str], path: Path) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        raise CsvInputError(f"{path}: missing column(s) {names}; the file has {list(frame.columns)}.")


def _numeric_column(frame: pd.DataFrame, column: str, path: Path) -> pd.Series:
    """Floats with NaN for empty cells; a non-number names its line (line 1 is the header)."""
    values = []
    for position, text in enumerate(frame[column]):
        if text == "":
            values.append(math.nan)
            continue
        try:
            number = float(text)
        except ValueError:
            number = math.nan
            valid = False
        else:
            valid = math.isfinite(number)
        if not valid:
            raise CsvInputError(
                f"{path}: line {position + 2}, column {column!r}: {text!r} is not a number "
                "(leave the cell empty for a missing value)."
            )
        values.append(number)
    return pd.Series(values, index=frame.index, dtype=float)


def _require_labels(frame: pd.DataFrame, columns: Sequence[str], path: Path) -> None:
    for column in columns:
        empty = frame.index[frame[column] == ""]
        if len(empty):
            raise CsvInputError(f"{path}: line {empty[0] + 2}, column {column!r}: the cell is empty.")


def parse_categories(text: str) -> list[float]:
    """``"1,2,3,4,5"`` -> ``[1.0, 2.0, 3.0, 4.0, 5.0]``; refuses anything that is not a number list."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise CsvInputError(f"--categories must be comma-separated numbers, got {text!r}.") from None
    if not all(math.isfinite(v) for v in values):
        raise CsvInputError(f"--categories must be finite numbers, got {text!r}.")
    return values


def _scale_for(values: pd.Series, categories: Sequence[float] | None, where: str) -> list[float]:
    if categories is not None:
        return list(categories)
    observed = sorted(set(values.dropna().tolist()))
    if len(observed) < 2:
        raise CsvInputError(
            f"{where}: fewer than 2 distinct values were observed ({observed}), so the scale cannot be "
            "inferred; pass the full scale with --categories."
        )
    return observed


def agreement_from_csv(
    path: str | Path,
    *,
    categories: Sequence[float] | None = None,
    question_column: str | None = None,
) -> dict[str, Any]:
    """The agreement report of a CSV with columns ``item,rater,value`` (+ ``question_column``).

    Empty ``value`` cells are missing ratings. The scale is ``categories`` when given (it
    must be the FULL scale, in increasing order), else the sorted set of observed values,
    separately per question. Returns the JSON-ready dict of
    :meth:`stats.agreement.AgreementReport.to_json_dict`, or with a question column
    ``{"questions": {question: that dict}}``.
    """
    path = Path(path)
    text = read_csv_text(path)
    wanted = [ITEM, RATER, VALUE] + ([question_column] if question_column else [])
    _require_columns(text, wanted, path)
    _require_labels(text, [c for c in wanted if c != VALUE], path)
    frame = pd.DataFrame({ITEM: text[ITEM], RATER: text[RATER], VALUE: _numeric_column(text, VALUE, path)})
    if question_column is None:
        return _agreement(frame, categories, str(path))
    frame[QUESTION] = text[question_column]
    questions: dict[str, Any] = {}
    for question, part in frame.groupby(QUESTION, sort=True):
        questions[str(question)] = _agreement(part.drop(columns=QUESTION), categories, f"{path}: question {question!r}")
    return {"questions": questions}


def _agreement(frame: pd.DataFrame, categories: Sequence[float] | None, where: str) -> dict[str, Any]:
    rated_raters = frame.loc[frame[VALUE].notna(), RATER].nunique()
    if rated_raters < 2:
        raise CsvInputError(f"{where}: agreement needs at least 2 raters with ratings, found {rated_raters}.")
    scale = _scale_for(frame[VALUE], categories, where)
    try:
        return agreement_report(frame, scale).to_json_dict()
    except AgreementInputError as exc:
        raise CsvInputError(f"{where}: {exc}") from None


def correlate_from_csv(
    path: str | Path,
    *,
    human: str,
    metrics: Sequence[str],
    group: str | None = None,
) -> dict[str, Any]:
    """Meta-evaluation of every metric column against the human column of a CSV (one row per item).

    Empty cells are missing scores; rows missing either score are dropped per metric and
    counted. ``group`` (e.g. the source document) groups acc_eq; its cells must not be
    empty. Returns :func:`stats.metaeval.correlate_report`'s dict.
    """
    path = Path(path)
    if not metrics:
        raise CsvInputError("Name at least one --metric column.")
    text = read_csv_text(path)
    wanted = [human, *metrics] + ([group] if group else [])
    _require_columns(text, wanted, path)
    frame = pd.DataFrame({column: _numeric_column(text, column, path) for column in [human, *metrics]})
    if group:
        _require_labels(text, [group], path)
        frame[group] = text[group]
    try:
        return correlate_report(frame, human, list(metrics), group_col=group)
    except MetaEvalInputError as exc:
        raise CsvInputError(f"{path}: {exc}") from None
