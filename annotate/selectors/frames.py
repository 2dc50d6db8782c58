"""Tidy pandas frames of a study for the analysis app (which imports no ORM):
the answers that count, the highlighted spans, and the summaries' metadata."""

from __future__ import annotations

from annotate.models import (
    Assignment,
    Batch,
    ComparisonMember,
    ConsensusAnswer,
    Rating,
    Span,
    Study,
    Summary,
)
from annotate.selectors.counting import rater_answer_revisions


def _counting(study: Study, phase: str, include_calibration: bool, revisions):
    """The revisions given, or rater_answer_revisions read now."""
    if revisions is not None:
        return revisions
    return rater_answer_revisions(study=study, phase=phase, include_calibration=include_calibration)


def ratings_frame(*, study: Study, phase: str = "all", include_calibration: bool = False, revisions=None):
    """A tidy pandas frame, one row per (item, rater, question, phase), of the answers
    that count (each assignment's newest submitted revision; of a rater's several
    assignments to one summary, the newest submitted: rater_answer_revisions).

    Columns: item (summary uuid), rater (user id), question, finding (uuid of the
    finding for per-finding questions, else ""), score (float, NaN for
    non-scale answers), answer (the stored answer: int, str, list or None), rationale,
    phase, rubric_version, submitted_at. Analysis code imports no ORM; it gets this.
    `revisions`: rater_answer_revisions' answer, when the caller read it for several frames.
    """
    import pandas as pd

    revisions = {r.pk: r for r in _counting(study, phase, include_calibration, revisions)}
    ratings = (
        Rating.objects.filter(revision_id__in=list(revisions))
        .order_by("revision__assignment__summary__key", "revision__assignment__rater_id", "question")
        .values_list(
            "revision_id",
            "revision__assignment__summary__uuid",
            "revision__assignment__rater_id",
            "question",
            "finding__uuid",
            "score",
            "value",
            "rationale__text",
        )
    )
    rows = []
    for revision_id, item, rater, question, finding, score, value, rationale in ratings:
        revision = revisions[revision_id]
        rows.append(
            (
                str(item),
                str(rater),
                question,
                str(finding) if finding is not None else "",
                float(score) if score is not None else float("nan"),
                score if score is not None else value,  # Rating.answer
                rationale or "",
                revision.phase,
                revision.rubric.version,
                revision.submitted_at,
            )
        )
    columns = [
        "item",
        "rater",
        "question",
        "finding",
        "score",
        "answer",
        "rationale",
        "phase",
        "rubric_version",
        "submitted_at",
    ]
    return pd.DataFrame(rows, columns=columns)


def summaries_frame(*, study: Study):
    """One row per summary: item (uuid), key, source key, generator, text length, the
    source's metadata as `source.<field>` columns and the summary's own metadata as
    `summary.<field>` columns (a field whose value is an object or a list is left out: it
    cannot be a group). For admins and analysis only: it names the generator, so it must
    never reach a rater."""
    import pandas as pd

    rows = []
    # Comparison items stand for comparisons (comparisons_frame), not for summaries.
    for summary in (
        Summary.objects.filter(study=study, comparison__isnull=True).select_related("source").order_by("key")
    ):
        row = {
            "item": str(summary.uuid),
            "key": summary.key,
            "source": summary.source.key,
            "generator": summary.generator,
            "n_chars": len(summary.text),
            "n_words": len(summary.text.split()),
            "context_sentences": len(summary.source.sentence_spans),
            # What the generation pipeline recorded (LitSumm's Table 2), when it wrote the summary.
            "pipeline": summary.metadata.get("pipeline", ""),
            "attempts": summary.metadata.get("attempts"),
            "references_passed": (summary.metadata.get("reference_checks") or {}).get("passed"),
            "consistency_revised": summary.metadata.get("consistency_revised"),
            "flags": list(summary.flags),
        }
        row.update({f"source.{k}": v for k, v in sorted(summary.source.metadata.items())})
        row.update({f"summary.{k}": v for k, v in sorted(summary.metadata.items()) if not isinstance(v, dict | list)})
        rows.append(row)
    return pd.DataFrame(rows)


def spans_frame(*, study: Study, phase: str = "all", include_calibration: bool = False, revisions=None):
    """One row per highlighted span of the answers that count: item (summary uuid),
    rater, question, target, start, end, text, answers (the span's sub-answers: key ->
    value), factual (its "factual" answer, if its question asks it), rationale, phase.
    The revisions are ratings_frame's (and `revisions` as there)."""
    import pandas as pd

    revisions = {r.pk: r for r in _counting(study, phase, include_calibration, revisions)}
    spans = (
        Span.objects.filter(revision_id__in=list(revisions))
        .order_by("revision__assignment__summary__key", "revision__assignment__rater_id", "question", "index")
        .values_list(*_SPAN_OWNERS, *_SPAN_FIELDS)
    )
    rows = [
        (str(item), str(rater), question, target, start, end, text, dict(answers or {}))
        + ((answers or {}).get("factual"), rationale, revisions[revision_id].phase)
        for item, rater, revision_id, question, target, start, end, text, answers, rationale in spans
    ]
    return pd.DataFrame(rows, columns=["item", "rater", *_SPAN_FIELDS[:-1], "factual", "rationale", "phase"])


_SPAN_OWNERS = ("revision__assignment__summary__uuid", "revision__assignment__rater_id", "revision_id")
_SPAN_FIELDS = ("question", "target", "start", "end", "text", "answers", "rationale")


def raters_by_item(
    *, study: Study, phase: str = "all", include_calibration: bool = False, revisions=None
) -> dict[str, list[str]]:
    """Summary uuid -> the raters whose answer counts for it (ratings_frame's revisions),
    whatever they answered: a rater who marked no span still said "nothing to mark" in
    every sentence. Span agreement takes its raters from here, not from the scale
    answers, so a study answered only with spans (a Thresh import) has its agreement.
    `revisions` as ratings_frame's."""
    revisions = _counting(study, phase, include_calibration, revisions)
    pairs = Assignment.objects.filter(pk__in={r.assignment_id for r in revisions}).values_list(
        "summary__uuid", "rater_id"
    )
    found: dict[str, set[str]] = {}
    for summary_uuid, rater_id in pairs:
        found.setdefault(str(summary_uuid), set()).add(str(rater_id))
    return {item: sorted(raters) for item, raters in sorted(found.items())}


COMPARISON_COLUMNS = [
    "item",
    "comparison",
    "rater",
    "question",
    "left",
    "right",
    "left_summary",
    "right_summary",
    "choice",
    "strength",
    "rationale",
    "phase",
    "batch",
]


def comparisons_frame(*, study: Study, phase: str = "all", include_calibration: bool = False):
    """One row per preference of the answers that count (ratings_frame's revisions) on a
    comparison of two summaries: item (the comparison item's uuid), comparison (its key),
    rater, question, left and right (the generators shown on each side: for admins and
    analysis only), left_summary and right_summary (uuids), choice ("left", "right" or
    "tie", from the preferred summary and the side it was shown on when answered:
    Revision.shown_order), strength, rationale, phase, batch. The frame stats.pairwise
    reads. Comparisons of more than two summaries are left out (their answers rank
    more than a pair; docs/pairwise.md)."""
    import pandas as pd

    revisions = {
        r.pk: r for r in rater_answer_revisions(study=study, phase=phase, include_calibration=include_calibration)
    }
    members = {}
    for item_id, key, uuid in ComparisonMember.objects.filter(comparison__study=study).values_list(
        "comparison__item_id", "comparison__key", "summary__uuid"
    ):
        members.setdefault(item_id, (key, []))[1].append(str(uuid))
    generators = {
        str(u): g
        for u, g in Summary.objects.filter(study=study, comparison__isnull=True).values_list("uuid", "generator")
    }
    rows = []
    ratings = (
        Rating.objects.filter(revision_id__in=list(revisions), revision__assignment__summary_id__in=list(members))
        .select_related("revision__assignment__summary", "revision__assignment__batch", "rationale")
        .order_by("revision__assignment__summary__key", "revision__assignment__rater_id", "question")
    )
    for rating in ratings:
        value = rating.value
        if not isinstance(value, dict) or "preferred" not in value:
            continue
        revision = rating.revision
        assignment = revision.assignment
        key, uuids = members[assignment.summary_id]
        order = [u for u in revision.shown_order if u in uuids] or uuids
        if len(uuids) != 2 or len(order) != 2:
            continue
        preferred = value["preferred"]
        choice = "tie" if preferred == "tie" else ("left" if preferred == order[0] else "right")
        rationale = getattr(rating, "rationale", None)
        rows.append(
            {
                "item": str(assignment.summary.uuid),
                "comparison": key,
                "rater": str(assignment.rater_id),
                "question": rating.question,
                "left": generators.get(order[0], ""),
                "right": generators.get(order[1], ""),
                "left_summary": order[0],
                "right_summary": order[1],
                "choice": choice,
                "strength": value.get("strength", ""),
                "rationale": rationale.text if rationale is not None else "",
                "phase": revisions[rating.revision_id].phase,
                "batch": assignment.batch.name if assignment.batch_id else "",
            }
        )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def consensus_frame(*, study: Study, include_calibration: bool = False):
    """One row per (summary, question) adjudicated: the newest consensus answer recorded for
    it in any batch of the study (calibration batches left out unless asked), as
    ConsensusAnswer keeps every decision and the latest counts. Columns: item (summary
    uuid), question, value (the stored answer: a scale value, "na", an option, a list),
    batch (name), decided_at."""
    import pandas as pd

    answers = ConsensusAnswer.objects.filter(batch__study=study)
    if not include_calibration:
        answers = answers.exclude(batch__kind__in=Batch.OUTSIDE_ANALYSIS)
    latest: dict[tuple[str, str], tuple] = {}
    for uuid, question, value, batch, decided_at in answers.order_by("created_at", "pk").values_list(
        "summary__uuid", "question", "value", "batch__name", "created_at"
    ):
        latest[(str(uuid), question)] = (str(uuid), question, value, batch, decided_at)
    return pd.DataFrame(
        [latest[key] for key in sorted(latest)], columns=["item", "question", "value", "batch", "decided_at"]
    )
