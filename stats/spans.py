"""Agreement on highlighted spans, as FactPICO reports it (pure; no ORM).

FactPICO (Joseph et al., section 3) reports added-information agreement at the
sentence level: for each summary sentence, whether each rater marked added
information in it; and agreement on "factual" for the spans both raters marked.

Inputs:
- `spans`: a frame with one row per span: item, rater, start, end, factual
  ("yes"/"no"/None), character offsets into the item's text;
- `sentences`: item -> list of (start, end) sentence spans of that text;
- `raters`: item -> the raters whose answers count for the item (a rater who marked
  nothing in an item still says "no added information" for each of its sentences).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pandas as pd

from stats.agreement import agreement_report
from stats.frames import AgreementInputError


@dataclass(frozen=True)
class SpanAgreement:
    sentences: dict[str, Any] | None  # agreement report over (item, sentence) with values 0/1
    factual: dict[str, Any] | None  # agreement report over overlapping span pairs, 0 = no, 1 = yes
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


def overlapping_pairs(spans: pd.DataFrame) -> pd.DataFrame:
    """For each item and pair of raters, each pair of their spans that overlap, as a tidy
    frame item="<item>#<pair>", rater, value (1 factual, 0 not factual). A span is
    paired with at most one span of the other rater: the one it overlaps most."""
    rows = []
    for item, group in spans.groupby("item", sort=True):
        by_rater = {r: list(g.itertuples(index=False)) for r, g in group.groupby("rater", sort=True)}
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
                if span.factual in ("yes", "no") and other.factual in ("yes", "no"):
                    key = f"{item}#{a}-{b}-{len(rows)}"
                    rows.append((key, a, 1.0 if span.factual == "yes" else 0.0))
                    rows.append((key, b, 1.0 if other.factual == "yes" else 0.0))
    return pd.DataFrame(rows, columns=["item", "rater", "value"])


def span_agreement(
    spans: pd.DataFrame, sentences: Mapping[Any, Sequence[tuple[int, int]]], raters: Mapping[Any, Sequence[Any]]
) -> SpanAgreement:
    """Sentence-level agreement on marking, and agreement on "factual" for overlapping
    spans, both as agreement reports on a two-point scale (Randolph's q = 2)."""
    errors: dict[str, str] = {}
    by_sentence = sentence_frame(spans, sentences, raters)
    pairs = overlapping_pairs(spans)
    reports: dict[str, dict | None] = {}
    for name, frame in (("sentences", by_sentence), ("factual", pairs)):
        try:
            reports[name] = agreement_report(frame, [0.0, 1.0]).to_json_dict() if len(frame) else None
        except AgreementInputError as exc:
            reports[name] = None
            errors[name] = str(exc)
        if not len(frame):
            errors.setdefault(name, "no data")
    return SpanAgreement(
        sentences=reports["sentences"],
        factual=reports["factual"],
        n_sentences=by_sentence["item"].nunique() if len(by_sentence) else 0,
        n_overlapping_pairs=len(pairs) // 2,
        errors=errors,
    )
