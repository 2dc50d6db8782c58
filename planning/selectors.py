"""Reads for study planning: a study's protocols, what a plan freezes, a pilot's frame and
the study's state against its plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db.models import QuerySet

from annotate.models import Batch, RaterExclusion, Study
from annotate.selectors.frames import comparisons_frame, ratings_frame, summaries_frame
from planning.models import Protocol
from planning.protocol import Exclusion, Look, StudyState

SCALE_KINDS = ("scale", "per_finding")


def protocols_of(study: Study) -> QuerySet[Protocol]:
    return Protocol.objects.filter(study=study).select_related("frozen_by").order_by("version")


def latest_protocol(study: Study) -> Protocol | None:
    return Protocol.objects.filter(study=study).order_by("-version").first()


def recorded_looks(protocol: Protocol) -> list[Look]:
    """The reports computed under this protocol so far (planning.services.record_look)."""
    return [Look(at.isoformat(), n) for at, n in protocol.looks.order_by("at").values_list("at", "n_rated")]


def scale_questions(study: Study) -> list[str]:
    """The keys of the rubric's questions answered on a scale (the pointwise tests' input)."""
    return [q["key"] for q in study.rubric.definition.get("questions", []) if q.get("kind") in SCALE_KINDS]


def rubric_record(study: Study) -> dict:
    rubric = study.rubric
    return {"key": rubric.key, "version": rubric.version, "content_hash": rubric.content_hash}


# Keys of a batch's stored design that name people: a protocol (and the dataset it is
# exported with) records the design, never who rates.
PEOPLE_KEYS = ("raters",)


def batch_records(study: Study) -> list[dict]:
    """The study's main batches' designs and seeds (calibration batches are not analysed),
    without the raters' accounts."""
    batches = Batch.objects.filter(study=study).exclude(kind=Batch.Kind.CALIBRATION).order_by("name")
    return [
        {
            "name": b.name,
            "kind": b.kind,
            "design": {k: v for k, v in (b.design or {}).items() if k not in PEOPLE_KEYS},
            "seed": b.seed,
            "raters_per_item": b.raters_per_item,
        }
        for b in batches
    ]


def pilot_frames(study: Study, question: str):
    """One question's counted answers of a study (item, rater, score) and each summary's
    system (its generator) and source: stats.power.pilot_estimate's input."""
    import pandas as pd

    answers = ratings_frame(study=study)
    answers = answers[answers["question"] == question][["item", "rater", "question", "score"]]
    summaries = summaries_frame(study=study)
    if not len(summaries):
        return answers, pd.Series(dtype=str), pd.Series(dtype=str)
    system = pd.Series(summaries["generator"].to_numpy(), index=summaries["item"])
    source = pd.Series(summaries["source"].to_numpy(), index=summaries["item"])
    return answers, system, source


def n_rated(study: Study, plan: Mapping, *, before=None) -> int:
    """Items rated in the plan's unit: sources with a counted score on the primary
    question (pointwise), or comparison items judged (side by side); with `before`, only
    from answers submitted by then."""
    ratings = ratings_frame(study=study)
    if before is not None:
        ratings = ratings[ratings["submitted_at"] <= before]
    if plan["kind"] == "side_by_side":
        frame = comparisons_frame(study=study)
        judged = set(frame["item"]) if len(frame) else set()
        return int(ratings.loc[ratings["item"].isin(judged), "item"].nunique())
    scored = ratings[(ratings["question"] == plan["primary_question"]) & ratings["score"].notna()]
    summaries = summaries_frame(study=study)
    if not len(summaries) or not len(scored):
        return 0
    source = dict(zip(summaries["item"], summaries["source"], strict=True))
    return len({source[item] for item in scored["item"].unique() if item in source})


def study_state(
    *, study: Study, plan: Mapping, rater_labels: Mapping[int, str], looks: Sequence[Look] = ()
) -> StudyState:
    exclusions = tuple(
        Exclusion(batch=e.batch.name, rater=rater_labels.get(e.rater_id, "a rater"), reason=e.reason)
        for e in RaterExclusion.objects.filter(batch__study=study).select_related("batch").order_by("pk")
    )
    return StudyState(
        rubric=rubric_record(study),
        batches=batch_records(study),
        n_rated=n_rated(study, plan),
        exclusions=exclusions,
        looks=tuple(looks),
    )


def protocol_records(study: Study) -> list[dict]:
    """Every frozen protocol of the study for its dataset export: version, when, the
    SHA-256, the note, and the document it was taken over (never who froze it)."""
    return [
        {
            "version": p.version,
            "frozen_at": p.frozen_at.isoformat(),
            "sha256": p.sha256,
            "note": p.note,
            "document": p.document,
        }
        for p in Protocol.objects.filter(study=study).order_by("version")
    ]
