"""The demo: the LitSumm-style and FactPICO studies, their accounts, batches and (optionally) answers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotate.batches import create_batch
from annotate.models import Assignment, Batch, Study, StudyMembership
from annotate.services import add_study_member, ensure_user, submit_rating
from datasets.demo_state import DEFAULT_DEMO_PASSWORD, DEMO_STUDY, FACTPICO_STUDY  # noqa: F401 - re-exported
from datasets.importing import ImportResult, import_evidence_inference, import_records

DEMO_SEED = 2026


def fixture(*parts: str) -> Path:
    return Path(settings.BASE_DIR).joinpath("fixtures", *parts)


def demo_file() -> Path:
    return fixture("demo", "litsumm_demo.jsonl")


def _import_file(path: Path) -> ImportResult:
    with path.open(encoding="utf-8") as handle:
        return import_records(lines=handle)


def _load_factpico_demo() -> ImportResult:
    """The FactPICO study: its study line, the abstracts its summaries were written
    from (with their Evidence Inference findings), then the summaries."""
    result = _import_file(fixture("demo", "factpico_study.jsonl"))
    summaries_path = fixture("demo", "factpico_summaries.jsonl")
    with summaries_path.open(encoding="utf-8") as handle:
        pmcids = {json.loads(line)["source"] for line in handle if line.strip()}
    study = Study.objects.get(slug=FACTPICO_STUDY)
    with fixture("evidence_inference", "abstracts.jsonl").open(encoding="utf-8") as handle:
        _merge(result, import_evidence_inference(study=study, lines=handle, only=pmcids))
    return _merge(result, _import_file(summaries_path))


def _merge(into: ImportResult, other: ImportResult) -> ImportResult:
    for bucket in ("created", "updated", "unchanged"):
        getattr(into, bucket).update(getattr(other, bucket))
    return into


@dataclass(frozen=True)
class DemoResult:
    imported: ImportResult
    users_created: list[str]
    assignments_created: int
    answers_submitted: int = 0


# Each demo study's two batches: a calibration round on a few summaries, then a main
# double-annotation batch. The rest of the summaries are left for the admin's own batches.
DEMO_BATCHES = {
    DEMO_STUDY: {"calibration": 4, "main": 12},
    FACTPICO_STUDY: {"calibration": 2, "main": 8},
}
# With answers, each rater leaves this many main-batch items of their queue to rate.
LEFT_TO_RATE = 3


@transaction.atomic
def load_demo(*, password: str, with_answers: bool = False) -> DemoResult:
    """Load the demo studies and accounts, and give both raters a calibration batch and
    a double-annotation main batch in each study. With `with_answers`, the raters'
    answers are filled in (seeded), all but the last LEFT_TO_RATE of each main queue,
    so progress, disagreements and the report have data. Idempotent: a second run
    changes nothing (existing accounts keep their passwords; existing batches stay)."""
    imported = _merge(_import_file(demo_file()), _load_factpico_demo())
    created_users = []
    admin, made = ensure_user(username="admin", password=password, is_staff=True, is_superuser=True)
    created_users += ["admin"] if made else []
    raters = []
    for name in ("rater1", "rater2"):
        user, made = ensure_user(username=name, password=password)
        created_users += [name] if made else []
        raters.append(user)

    created = 0
    answered = 0
    for slug, sizes in DEMO_BATCHES.items():
        study = Study.objects.get(slug=slug)
        add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN, seed=0)
        for i, rater in enumerate(raters, start=1):
            add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER, seed=DEMO_SEED + i)
        if study.batches.exists():
            continue  # loaded before
        for kind, n in sizes.items():
            batch = create_batch(
                study=study,
                name=kind,
                kind=Batch.Kind.CALIBRATION if kind == "calibration" else Batch.Kind.MAIN,
                raters=raters,
                design="k_raters",
                k=2,
                n=n,
                seed=DEMO_SEED,
                filters={"assigned": False},
                created_by=admin,
            )
            created += batch.created_assignments
    if with_answers and created:  # only on the run that made the batches: never over a person's work
        answered = answer_demo(raters=raters)
    return DemoResult(
        imported=imported, users_created=created_users, assignments_created=created, answers_submitted=answered
    )


def answer_demo(*, raters) -> int:
    """Submit seeded answers for the demo raters' open assignments, leaving the last
    LEFT_TO_RATE items of each main queue open. Returns the number submitted."""
    submitted = 0
    for index, rater in enumerate(raters):
        for slug in DEMO_BATCHES:
            queue = list(
                Assignment.objects.filter(study__slug=slug, rater=rater, state=Assignment.State.PENDING)
                .select_related("summary__source", "study", "batch")
                .order_by("position")
            )
            main = [a for a in queue if a.batch.kind == Batch.Kind.MAIN]
            keep_open = {a.pk for a in main[-LEFT_TO_RATE:]}
            for assignment in queue:
                if assignment.pk in keep_open:
                    continue
                if slug == FACTPICO_STUDY:
                    answers, rationales = factpico_demo_answers(assignment, index)
                else:
                    answers, rationales = litsumm_demo_answers(assignment.summary.key, index)
                submit_rating(
                    assignment=assignment,
                    rater=rater,
                    answers=answers,
                    rationales=rationales,
                    version=assignment.version,
                )
                submitted += 1
    return submitted


def litsumm_demo_answers(summary_key: str, rater_index: int) -> tuple[dict, dict]:
    """Seeded LitSumm answers. The raters mostly agree, by a step on about one item in
    three, so the report shows real agreement and the disagreement list has entries."""
    base = sum(map(ord, summary_key))
    seed = base + rater_index
    overall = 1 + base % 5
    if rater_index % 2 and (base // 5) % 3 == 0:
        overall = overall + 1 if overall < 5 else overall - 1
    modes = ["hallucination"] if overall <= 2 and seed % 2 else []
    notes = LITSUMM_FEEDBACK["hallucination" if modes else overall]
    return {"overall": overall, "failure_modes": modes, "feedback": notes[seed % len(notes)]}, {}


# The demo raters' feedback, written as the rubric asks (instructions to the writer of the
# summary), by score: the adjudication page shows it beside the scores, so it must read
# like a rater's note, not a placeholder.
LITSUMM_FEEDBACK = {
    1: (
        "Start again from the abstract: the main result is reported the wrong way round.",
        "Remove the figures that are not in the abstract and the reference that does not exist.",
    ),
    2: (
        "Several sentences have no reference; cite the trial after each result.",
        "The conclusion goes further than the trial: say it was one small study.",
    ),
    3: (
        "Mostly right, but the sentence on long-term benefit is not supported by the context.",
        "Give the number of participants and say how long they were followed.",
    ),
    4: (
        "Good. Shorten the background sentence; it repeats the title.",
        "Accurate; name the comparator in the first sentence.",
    ),
    5: (
        "Accurate, referenced and easy to read; nothing to change.",
        "Clear and complete. Keep it as it is.",
    ),
    "hallucination": (
        "The second reference is not in the context: remove it and the claim it supports.",
        "The dosage figure is made up; the abstract gives none. Delete it.",
    ),
}

# FactPICO rationales by score (1 missing to 4 accurate; N/A).
PICO_RATIONALES = {
    1: "The summary does not say this at all.",
    2: "Mentioned, but wrongly: it does not match the abstract.",
    3: "Mentioned, but vaguely; the abstract is more specific.",
    4: "Described as in the abstract.",
    "na": "Not meaningful for this trial.",
}
EVIDENCE_RATIONALES = {
    1: "The summary leaves this result out.",
    2: "The summary reports a different direction of effect.",
    3: "Reported, but without saying whether the difference was significant.",
    4: "Reported as the abstract states it.",
}


def factpico_demo_answers(assignment: Assignment, rater_index: int) -> tuple[dict, dict]:
    """Seeded FactPICO answers: a highlight, the PICO scales (one N/A now and then), the
    per-finding evidence scores with rationales, and sometimes a linked contradiction."""
    summary = assignment.summary
    source = summary.source
    base = sum(map(ord, summary.key))
    seed = base + rater_index
    # The second rater differs from the first on about one item in three (a step on a scale).
    step = 1 if rater_index % 2 and base % 3 == 1 else 0
    first_word = summary.text.split()[0]
    findings = [str(f.uuid) for f in source.findings.order_by("index")]
    answers = {
        "added_info": [
            {
                "start": 0,
                "end": len(first_word),
                "text": first_word,
                "answers": {"factual": "yes" if seed % 3 else "no"},
                "rationale": "Plain-language wording added for readers; "
                + ("it is true to the abstract." if seed % 3 else "it claims more than the abstract says."),
            }
        ],
        "population": 1 + (base + step) % 4,
        "intervention": 1 + (base // 2) % 4,
        "comparator": "na" if base % 5 == 0 else 1 + (base // 3 + step) % 4,
        "outcome": 4,
        "outcome_exhaustive": "yes" if seed % 2 else "no",
        "evidence": {f: 1 + (base + i + step) % 4 for i, f in enumerate(findings)},
        "contradictions": [
            {
                "start": 0,
                "end": 4,
                "text": summary.text[:4],
                "rationale": "The summary says the opposite of the abstract here.",
                "link": {"start": 0, "end": 5, "text": source.text[:5]},
            }
        ]
        if seed % 4 == 0
        else [],
        "comments": "",
    }
    rationales = {key: PICO_RATIONALES[answers[key]] for key in ("population", "intervention", "comparator", "outcome")}
    rationales["evidence"] = {f: EVIDENCE_RATIONALES[score] for f, score in answers["evidence"].items()}
    return answers, rationales
