"""Validation and reshaping of the tidy ratings frame used by the statistics layer.

The contract: one row per (item, rater[, question]) with columns ``item``, ``rater``,
``value`` and optionally ``question``. ``value`` is numeric, or NaN for a missing
rating (an "N/A" answer is mapped upstream, either to NaN or to a value on the scale).
A ``scale`` is the ordered list of every allowed value, whether or not it was used.

Nothing here imports Django: a selector builds the frame, these functions only read it.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd

ITEM = "item"
RATER = "rater"
VALUE = "value"
QUESTION = "question"


def part_items(items: pd.Series, parts: pd.Series) -> pd.Series:
    """The item of each row, as the statistics count it: the summary, or "summary:part" for
    a row about one part of it (a finding of a per-finding question; `parts` "" otherwise)."""
    items = items.astype(str)
    parts = parts.fillna("").astype(str)
    return items.where(parts == "", items + ":" + parts)


def prepare_ratings(ratings: pd.DataFrame, na_codes: dict[str, int]) -> pd.DataFrame:
    """The ratings frame as the statistics need it: each finding of a per-finding question
    is an item of its own (summary:finding, part_items), and N/A answers of the questions
    that count N/A as a category get their code (`na_codes`: question key -> code; the
    rubric's na_codes); other N/A answers stay missing."""
    ratings = ratings.copy()
    ratings["item"] = part_items(ratings["item"], ratings["finding"])
    for key, code in na_codes.items():
        mask = (ratings["question"] == key) & (ratings["answer"] == "na")
        ratings.loc[mask, "score"] = float(code)
    return ratings


class AgreementInputError(ValueError):
    """The ratings frame or the scale cannot be analysed as given."""


def validate_scale(scale: Sequence[float]) -> tuple[float, ...]:
    """Return the scale as a tuple of floats, or raise if it is not a usable rating scale.

    A scale needs at least two distinct, finite, numeric values in strictly increasing
    order: the order is the ordinal order used by weighted kappa and ordinal alpha.
    """
    values = list(scale)
    if len(values) < 2:
        raise AgreementInputError(f"A scale needs at least 2 values, got {values!r}.")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise AgreementInputError(f"Scale values must be numbers, got {value!r}.")
    as_float = tuple(float(v) for v in values)
    if not all(np.isfinite(as_float)):
        raise AgreementInputError(f"Scale values must be finite, got {values!r}.")
    if any(b <= a for a, b in zip(as_float, as_float[1:], strict=False)):
        raise AgreementInputError(f"Scale values must be strictly increasing, got {values!r}.")
    return as_float


def numeric_array(values: object, name: str = VALUE, error: type[ValueError] = AgreementInputError) -> np.ndarray:
    """Convert a 1-D column of scores to float64 with NaN for missing, refusing non-numbers.

    Booleans and strings are refused rather than coerced: a "3" or a True among the
    scores means the data was built wrongly upstream, and converting it silently would
    hide that. Infinite values are refused too. ``error`` is the exception class raised.
    """
    if not isinstance(values, pd.Series):
        if np.ndim(values) != 1:
            raise error(f"{name} must be one-dimensional.")
        values = pd.Series(values)
    if pd.api.types.is_bool_dtype(values.dtype):
        raise error(f"{name} holds booleans; scores must be numbers.")
    if pd.api.types.is_numeric_dtype(values.dtype):
        array = values.to_numpy(dtype=float, na_value=np.nan)
    else:
        bad = [v for v in values if not pd.isna(v) and (isinstance(v, bool) or not isinstance(v, numbers.Real))]
        if bad:
            shown = ", ".join(repr(v) for v in bad[:5])
            raise error(f"{name} holds non-numeric values: {shown}.")
        array = np.array([np.nan if pd.isna(v) else float(v) for v in values], dtype=float)
    if np.isinf(array).any():
        raise error(f"{name} holds infinite values.")
    return array


def validate_ratings(frame: pd.DataFrame, scale: Sequence[float], *, min_raters: int = 2) -> pd.DataFrame:
    """Check a tidy ratings frame against its scale and return a clean copy.

    The copy has exactly the columns ``item``, ``rater`` and ``value`` (float64, NaN for
    a missing rating). Raises :class:`AgreementInputError` when a column is missing,
    a value is non-numeric, infinite or outside the scale, an (item, rater) pair occurs
    twice, the frame mixes several questions, or fewer than ``min_raters`` raters gave
    at least one rating.
    """
    if not isinstance(frame, pd.DataFrame):
        raise AgreementInputError(f"Expected a pandas DataFrame, got {type(frame).__name__}.")
    missing = [c for c in (ITEM, RATER, VALUE) if c not in frame.columns]
    if missing:
        raise AgreementInputError(f"Ratings frame lacks column(s) {missing}; it has {list(frame.columns)}.")
    if QUESTION in frame.columns and frame[QUESTION].nunique(dropna=True) > 1:
        raise AgreementInputError(
            "Ratings frame mixes several questions; compute agreement per question (see split_by_question)."
        )
    if frame[ITEM].isna().any() or frame[RATER].isna().any():
        raise AgreementInputError("Columns 'item' and 'rater' must not contain missing labels.")

    scale_values = validate_scale(scale)
    values = numeric_array(frame[VALUE], "Column 'value'")
    present = ~np.isnan(values)
    outside = ~np.isin(values[present], scale_values)
    if outside.any():
        shown = sorted(set(values[present][outside].tolist()))[:5]
        raise AgreementInputError(f"Values {shown} are outside the scale {list(scale_values)}.")

    clean = pd.DataFrame({ITEM: frame[ITEM].to_numpy(), RATER: frame[RATER].to_numpy(), VALUE: values})
    duplicated = clean.duplicated([ITEM, RATER], keep=False)
    if duplicated.any():
        pairs = clean.loc[duplicated, [ITEM, RATER]].drop_duplicates().head(5).to_records(index=False).tolist()
        raise AgreementInputError(f"Several rows for the same (item, rater): {pairs}.")

    n_raters = clean.loc[present, RATER].nunique()
    if n_raters < min_raters:
        raise AgreementInputError(f"Agreement needs at least {min_raters} raters with ratings, got {n_raters}.")
    return clean


def split_by_question(frame: pd.DataFrame) -> dict[object, pd.DataFrame]:
    """Split a frame with a ``question`` column into one frame per question."""
    if QUESTION not in frame.columns:
        raise AgreementInputError("Ratings frame has no 'question' column to split on.")
    return {question: part.drop(columns=QUESTION) for question, part in frame.groupby(QUESTION, sort=True)}


def to_wide(frame: pd.DataFrame) -> pd.DataFrame:
    """Items × raters table of values (NaN where a rater did not rate an item).

    Expects a frame already passed through :func:`validate_ratings`. Rows and columns are
    sorted by label so that results do not depend on row order.
    """
    wide = frame.pivot(index=ITEM, columns=RATER, values=VALUE)
    return wide.sort_index(axis=0).sort_index(axis=1)


def reliability_matrix(frame: pd.DataFrame) -> np.ndarray:
    """Raters × items array (NaN for missing), the orientation ``krippendorff.alpha`` expects.

    Built from named columns rather than from an array's axes, so the orientation
    cannot be swapped by accident: transposing this matrix silently changes alpha.
    """
    return to_wide(frame).T.to_numpy(dtype=float)


def scale_codes(values: np.ndarray, scale: Sequence[float]) -> np.ndarray:
    """0-based position of each value in the scale (values must be on the scale, no NaN)."""
    scale_array = np.asarray(validate_scale(scale))
    codes = np.searchsorted(scale_array, values)
    return codes.astype(np.intp)
