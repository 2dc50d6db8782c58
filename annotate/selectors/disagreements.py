"""Disagreements of a batch (study admins and viewers only): the items where the raters'
answers to a question differ, and how far apart they lie."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotate.models import Batch, Rating, Span, Summary
from annotate.rubrics import per_claim_parts
from annotate.selectors.batches import ItemRef, batch_answer_revisions, per_batch_state
from annotate.selectors.contents import rubric_definition


@dataclass(frozen=True)
class Disagreement:
    summary: ItemRef
    question: str
    values: dict  # username -> answer
    spread: float  # how far apart: scale range, or number of differing raters/sentences


def question_answers(batch: Batch, *, question: str, phase: str = "initial") -> dict[int, dict[str, Any]]:
    """{summary id: {rater's username: answer}} to one question, from the answers that
    count (batch_answer_revisions), in a fixed number of queries that read only that
    question's ratings or spans: what disagreements compare. An answer is as
    revision_answers gives it (a score, "na", a choice, a list; {finding uuid: answer} for
    per-finding questions; the list of spans for span questions); None when the rater
    left the question unanswered."""
    counting = batch_answer_revisions(batch, phase=phase)
    slots = {}
    result: dict[int, dict[str, Any]] = {}
    for revision_id, summary_id, username in counting.values_list(
        "pk", "assignment__summary_id", "assignment__rater__username"
    ):
        slots[revision_id] = (summary_id, username)
        result.setdefault(summary_id, {})[username] = None
    chosen = counting.order_by().values("pk")
    ratings = (
        Rating.objects.filter(revision__in=chosen, question=question)
        .order_by("revision_id", "pk")
        .values_list("revision_id", "score", "value", "finding__uuid")
    )
    for revision_id, score, value, finding in ratings:
        summary_id, username = slots[revision_id]
        answer = score if score is not None else value
        if finding is None:
            result[summary_id][username] = answer
        else:
            by_finding = result[summary_id][username] or {}
            by_finding[str(finding)] = answer
            result[summary_id][username] = by_finding
    spans = (
        Span.objects.filter(revision__in=chosen, question=question)
        .order_by("revision_id", "index")
        .values("revision_id", *Span.ANSWER_FIELDS)
    )
    for span in spans:
        summary_id, username = slots[span["revision_id"]]
        result[summary_id][username] = (result[summary_id][username] or []) + [Span.answer_from(span)]
    return result


def _sentence_marks(summary_text: str, spans: list[dict]) -> dict[int, set[str]]:
    """Sentence index -> the 'factual' answers of the spans that touch it."""
    from core.sentences import split_spans

    marks: dict[int, set[str]] = {}
    for index, (start, end) in enumerate(split_spans(summary_text)):
        for span in spans:
            if span["start"] < end and span["end"] > start:
                marks.setdefault(index, set()).add(str(span.get("answers", {}).get("factual", "")))
    return marks


def _scale_spread(values: dict, threshold: float) -> tuple[float, dict] | None:
    """Scores at least `threshold` apart; N/A differs from any score."""
    scores = [v for v in values.values() if isinstance(v, int)]
    has_na = any(v == "na" for v in values.values())
    spread = float(max(scores) - min(scores)) if len(scores) >= 2 else 0.0
    if has_na and scores:
        spread = max(spread, float(threshold))
    return None if spread < threshold else (spread, values)


def _compared_spans_spread(values: dict) -> tuple[float, dict] | None:
    """Spans in either compared summary, each not marked alike by every rater."""
    marked = {rater: {(x.get("summary"), x["text"]) for x in v or []} for rater, v in values.items()}
    differing = len(set().union(*marked.values()) - set.intersection(*marked.values()))
    shown = {rater: [x["text"] for x in v or []] for rater, v in values.items()}
    return (float(differing), shown) if differing else None


def _highlight_spread(values: dict, text: str) -> tuple[float, dict] | None:
    """Sentences marked by one rater only, or marked factual by one and not by another."""
    marks = {rater: _sentence_marks(text, v or []) for rater, v in values.items()}
    sentences = set().union(*(m.keys() for m in marks.values()))
    differing = sum(
        1
        for i in sentences
        if len({i in m for m in marks.values()}) > 1 or len(set().union(*(m.get(i, set()) for m in marks.values()))) > 1
    )
    shown = {
        rater: [
            s["text"] + (" (not factual)" if s.get("answers", {}).get("factual") == "no" else "") for s in (v or [])
        ]
        for rater, v in values.items()
    }
    return (float(differing), shown) if differing else None


def _per_claim_spread(values: dict) -> tuple[float, dict] | None:
    """Claim by claim: a claim counts when the raters chose different options for it."""
    values = {rater: per_claim_parts(v or {})[0] for rater, v in values.items()}
    claims = set().union(*(v.keys() for v in values.values()))
    differing = sum(len({v.get(c) for v in values.values()}) > 1 for c in claims)
    return (float(differing), values) if differing else None


def _per_finding_spread(values: dict, threshold: float) -> tuple[float, dict] | None:
    """The largest gap between two raters' scores of one finding, at least `threshold`."""
    findings = set().union(*((v or {}).keys() for v in values.values()))
    gaps = [
        max(s) - min(s)
        for f in findings
        if len(s := [v.get(f) for v in values.values() if isinstance((v or {}).get(f), int)]) >= 2
    ]
    spread = float(max(gaps, default=0))
    return None if spread < threshold else (spread, values)


def _choice_spread(q, values: dict) -> tuple[float, dict] | None:
    """Different choices or tickbox sets; for a preference, a different summary (or a tie)."""
    if q.several_options:
        values = {rater: v or [] for rater, v in values.items()}  # nothing ticked
    if q.preference:
        # Raters disagree on which summary (or a tie), not on how much.
        values = {rater: (v or {}).get("preferred") for rater, v in values.items()}
    normalised = {str(sorted(v)) if isinstance(v, list) else str(v) for v in values.values()}
    if not q.comparable or len(normalised) < 2:
        return None
    return float(len(normalised)), values


def _spread(q, values: dict, *, threshold: float, text: str | None) -> tuple[float, dict] | None:
    """How far one item's answers lie apart and the answers as shown; None if they agree."""
    if q.plain_scale:
        return _scale_spread(values, threshold)
    if q.in_compared:
        return _compared_spans_spread(values)
    if q.highlights:
        return _highlight_spread(values, text)
    if q.per_claim:
        return _per_claim_spread(values)
    if q.per_finding:
        return _per_finding_spread(values, threshold)
    return _choice_spread(q, values)


def _item_refs(summary_ids: list[int], *, with_texts: bool) -> tuple[dict[int, ItemRef], dict[int, str]]:
    """Each item's key and uuid as plain values (ItemRef); texts only where sentences are compared."""
    refs, texts = {}, {}
    for start in range(0, len(summary_ids), 5000):
        chunk = Summary.objects.filter(pk__in=summary_ids[start : start + 5000])
        refs.update((pk, ItemRef(pk, uuid, key)) for pk, uuid, key in chunk.values_list("pk", "uuid", "key"))
    if with_texts:
        for start in range(0, len(summary_ids), 5000):
            texts.update(Summary.objects.filter(pk__in=summary_ids[start : start + 5000]).values_list("pk", "text"))
    return refs, texts


def batch_disagreements(
    batch: Batch, *, question: str, threshold: float = 1, phase: str = "initial", sort: str = "spread"
) -> list[Disagreement]:
    """Items where the raters' answers to `question` differ: scale answers at least
    `threshold` apart (N/A differs from any score), different choices or tickbox
    sets, span questions marked in a sentence by one rater only or marked factual by
    one and not factual by another. Sorted by spread (largest first) or by item.

    Computed from every answer that counts, once per state of the batch (batch_state),
    and kept in Django's cache: the pages of a large batch's disagreements read them back
    until an answer changes."""
    return per_batch_state(
        batch,
        "disagreements",
        lambda: _disagreements(batch, question=question, threshold=threshold, phase=phase, sort=sort),
        question,
        float(threshold),
        phase,
        sort,
    )


def _disagreements(batch: Batch, *, question: str, threshold: float, phase: str, sort: str) -> list[Disagreement]:
    definition = rubric_definition(batch.study.rubric)
    q = definition.question(question)
    answers = question_answers(batch, question=question, phase=phase)
    compared = [summary_id for summary_id, values in answers.items() if len(values) >= 2]
    summaries, texts = _item_refs(compared, with_texts=q.highlights)
    rows = []
    for summary_id in compared:
        found = _spread(q, answers[summary_id], threshold=threshold, text=texts.get(summary_id))
        if found is not None:
            spread, values = found
            rows.append(Disagreement(summary=summaries[summary_id], question=question, values=values, spread=spread))
    if sort == "item":
        rows.sort(key=lambda r: r.summary.key)
    else:
        rows.sort(key=lambda r: (-r.spread, r.summary.key))
    return rows
