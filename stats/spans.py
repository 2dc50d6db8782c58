"""Agreement on highlighted spans, for any span question (pure; no ORM).

Two levels, as FactPICO (Joseph et al., section 3) reports them for its added-information
question, and as this module computes them for every span question of any rubric:
- marking, at the sentence level: for each sentence of the text, whether each rater
  marked a span that overlaps it;
- each sub-question asked about a span (a choice: "factual", "severity", ...), on the
  spans two raters both marked: each span of one rater is paired with the span of the
  other rater it overlaps most, and the pair is an item the two raters answered.

Inputs:
- `spans`: a frame with one row per span: item, rater, start, end (character offsets into
  the item's text) and answers (the span's sub-answers: sub-question key -> option);
- `sentences`: item -> list of (start, end) sentence spans of that text;
- `raters`: item -> the raters whose answers count for the item (a rater who marked
  nothing in an item still says "nothing to mark" for each of its sentences);
- `sub_questions`: sub-question key -> its options in the rubric's order (free-text
  sub-questions have no options and no agreement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pandas as pd

from stats.agreement import agreement_report
from stats.frames import AgreementInputError

NO_DATA = "no data"


@dataclass(frozen=True)
class SubQuestionAgreement:
    """Agreement on one sub-question over the pairs of overlapping spans both raters
    answered it on. ``report`` is an agreement report (JSON dict) on the option codes
    0..len(options)-1: a nominal question, so read its nominal figures."""

    key: str
    options: tuple[str, ...]
    n_pairs: int
    report: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class SpanAgreement:
    sentences: dict[str, Any] | None  # agreement report over (item, sentence) with values 0/1
    sub_questions: tuple[SubQuestionAgreement, ...]
    n_sentences: int
    n_overlapping_pairs: int
    errors: dict[str, str]


def sentence_frame(
    spans: pd.DataFrame, sentences: Mapping[Any, Sequence[tuple[int, int]]], raters: Mapping[Any, Sequence[Any]]
) -> pd.DataFrame:
    """Tidy frame item="<item>#<sentence index>", rater, value: 1 when the rater marked a
    span overlapping that sentence, else 0."""
    marked: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
    for row in spans.itertuples(index=False):
        marked.setdefault((row.item, row.rater), []).append((row.start, row.end))
    rows = []
    for item, item_raters in raters.items():
        for index, (s_start, s_end) in enumerate(sentences.get(item, [])):
            for rater in item_raters:
                hit = any(start < s_end and end > s_start for start, end in marked.get((item, rater), []))
                rows.append((f"{item}#{index}", rater, 1.0 if hit else 0.0))
    return pd.DataFrame(rows, columns=["item", "rater", "value"])


PAIR_COLUMNS = ["pair", "rater_a", "rater_b", "answers_a", "answers_b"]


def overlapping_pairs(spans: pd.DataFrame) -> pd.DataFrame:
    """For each item and pair of raters, each pair of their spans that overlap: one row
    per pair (pair="<item>#<a>-<b>-<n>", rater_a, rater_b, answers_a, answers_b). A span
    of rater a is paired with the span of rater b it overlaps most, each span of b used
    at most once (the first of a's spans in order takes it)."""
    spans_of: dict[Any, dict[Any, list]] = {}  # item -> rater -> the rater's spans, in the frame's order
    for span in spans[["item", "rater", "start", "end", "answers"]].itertuples(index=False):
        spans_of.setdefault(span.item, {}).setdefault(span.rater, []).append(span)
    rows = []
    for item in sorted(spans_of):
        by_rater = spans_of[item]
        for a, b in combinations(sorted(by_rater, key=str), 2):
            used: set[int] = set()
            for span in by_rater[a]:
                best, best_overlap = None, 0
                for j, other in enumerate(by_rater[b]):
                    overlap = min(span.end, other.end) - max(span.start, other.start)
                    if overlap > best_overlap and j not in used:
                        best, best_overlap = j, overlap
                if best is None:
                    continue
                used.add(best)
                other = by_rater[b][best]
                rows.append((f"{item}#{a}-{b}-{len(rows)}", a, b, span.answers or {}, other.answers or {}))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def sub_question_frame(pairs: pd.DataFrame, key: str, options: Sequence[str]) -> pd.DataFrame:
    """Tidy frame item (the pair), rater, value (the option's position in `options`) of
    the pairs of overlapping spans on which both raters answered sub-question `key` with
    one of its options; a pair where either left it unanswered is left out."""
    codes = {option: float(i) for i, option in enumerate(options)}
    rows = []
    for pair in pairs.itertuples(index=False):
        a, b = pair.answers_a.get(key), pair.answers_b.get(key)
        if a in codes and b in codes:
            rows += [(pair.pair, pair.rater_a, codes[a]), (pair.pair, pair.rater_b, codes[b])]
    return pd.DataFrame(rows, columns=["item", "rater", "value"])


def _report(frame: pd.DataFrame, scale: Sequence[float]) -> tuple[dict[str, Any] | None, str | None]:
    if not len(frame):
        return None, NO_DATA
    try:
        return agreement_report(frame, scale).to_json_dict(), None
    except AgreementInputError as exc:
        return None, str(exc)


def span_agreement(
    spans: pd.DataFrame,
    sentences: Mapping[Any, Sequence[tuple[int, int]]],
    raters: Mapping[Any, Sequence[Any]],
    sub_questions: Mapping[str, Sequence[str]] | None = None,
) -> SpanAgreement:
    """Sentence-level agreement on marking (a two-point scale, so Randolph's q = 2), and
    for every sub-question with options, agreement on the overlapping spans both raters
    answered it on, over all its options (Randolph's q = the number of options, used or
    not). ``errors`` names what has no figure and why ("sentences", or a sub-question key)."""
    errors: dict[str, str] = {}
    by_sentence = sentence_frame(spans, sentences, raters)
    sentence_report, error = _report(by_sentence, [0.0, 1.0])
    if error:
        errors["sentences"] = error
    pairs = overlapping_pairs(spans)
    results = []
    for key, options in (sub_questions or {}).items():
        frame = sub_question_frame(pairs, key, options)
        report, error = _report(frame, [float(i) for i in range(len(options))])
        if error:
            errors[key] = error
        results.append(
            SubQuestionAgreement(key=key, options=tuple(options), n_pairs=len(frame) // 2, report=report, error=error)
        )
    return SpanAgreement(
        sentences=sentence_report,
        sub_questions=tuple(results),
        n_sentences=by_sentence["item"].nunique() if len(by_sentence) else 0,
        n_overlapping_pairs=len(pairs),
        errors=errors,
    )
