"""The demo: the LitSumm-style and FactPICO studies, their accounts, batches and (optionally) answers."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotate.models import Assignment, Batch, Study, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member, ensure_user
from annotate.services.ratings import submit_rating
from datasets.demo_state import DEFAULT_DEMO_PASSWORD, DEMO_STUDY, FACTPICO_STUDY, PAIRWISE_STUDY  # noqa: F401 - re-exported
from datasets.importing import ImportResult, import_evidence_inference, import_records

# The pairwise demo's systems (docs/pairwise.md): the demo's two hand-written summaries of
# each abstract (keys -a and -b) and an extractive template, the abstract's first three
# sentences, labelled as such. No LLM wrote any of them.
PAIRWISE_SOURCES = 8
LEAD3 = "template-lead3"
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
    pairwise_created, pairwise_answered = load_pairwise_demo(
        admin=admin, raters=raters, with_answers=with_answers, imported=imported
    )
    created += pairwise_created
    answered += pairwise_answered
    return DemoResult(
        imported=imported, users_created=created_users, assignments_created=created, answers_submitted=answered
    )


def record_demo_active_time(assignment: Assignment, seed_key: str, rater_index: int) -> None:
    """Give a seeded demo answer a seeded active time, 60-209 s (reading an abstract and a
    summary and answering), as a rater's browser would have reported it: the loader submits
    all of them within a second, so the clock the service checks the reported time against
    would credit none, and the batch's monitor would show a median of 0.0 s. Same time on
    every load (seeded by `seed_key`, the item's key or queue position, and the rater)."""
    seconds = 60 + zlib.crc32(f"{seed_key}:{rater_index}".encode()) % 150
    Assignment.objects.filter(pk=assignment.pk).update(active_seconds=seconds)


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
                record_demo_active_time(assignment, assignment.summary.key, index)
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


def _pairwise_records() -> list[dict]:
    """The pairwise demo study as import records, from the LitSumm demo file: its first
    PAIRWISE_SOURCES abstracts, their two hand-written summaries as systems
    "handwritten-a" and "handwritten-b", and a lead-3 template summary of each."""
    study = {
        "type": "study",
        "slug": PAIRWISE_STUDY,
        "title": "Demo: pairwise comparison of summaries of RCT abstracts",
        "rubric": "pairwise",
        "licence": "CC-BY-4.0",
        "description": (
            "Three systems per abstract: two hand-written summaries (systems handwritten-a and handwritten-b) "
            "and a template, the abstract's first three sentences (template-lead3). No LLM wrote any of them."
        ),
        "guidelines": (
            "Each item shows an abstract and two summaries of it, A on the left and B on the right. Say which "
            "summary is better overall and on each criterion, judging only against the abstract shown, or call "
            "it a tie. Keys: a, b, t; then 1 (much) or 2 (slightly)."
        ),
    }
    records = [study]
    sources = []
    with demo_file().open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    for row in rows:
        if row["type"] == "source" and len(sources) < PAIRWISE_SOURCES:
            sources.append(row)
            records.append({**row, "study": PAIRWISE_STUDY})
    keys = {s["key"] for s in sources}
    for row in rows:
        if row["type"] == "summary" and row["source"] in keys:
            system = "handwritten-" + row["key"].rsplit("-", 1)[1]
            records.append({**row, "study": PAIRWISE_STUDY, "generator": system})
    for source in sources:
        lead = [s["text"] if isinstance(s, dict) else s for s in source.get("sentences") or []][:3]
        text = " ".join(lead) if lead else source["text"][:600]
        records.append(
            {
                "type": "summary",
                "study": PAIRWISE_STUDY,
                "source": source["key"],
                "key": f"{source['key']}-lead3",
                "text": text,
                "generator": LEAD3,
                "metadata": {"template": "the first three sentences of the abstract, copied"},
            }
        )
    return records


def load_pairwise_demo(*, admin, raters, with_answers: bool, imported: ImportResult | None = None) -> tuple[int, int]:
    """The pairwise demo study with a comparison batch of every pair of its three systems
    per abstract, two raters each; with answers, seeded preferences for all but the last
    LEFT_TO_RATE items of each queue. Skipped entirely when the study exists (make run
    stays cheap). Returns (assignments created, answers submitted); the import's counts
    are added to `imported`."""
    if Study.objects.filter(slug=PAIRWISE_STUDY).exists():
        return 0, 0
    result = import_records(lines=(json.dumps(r) for r in _pairwise_records()))
    if imported is not None:
        _merge(imported, result)
    study = Study.objects.get(slug=PAIRWISE_STUDY)
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN, seed=0)
    for i, rater in enumerate(raters, start=1):
        add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER, seed=DEMO_SEED + i)
    batch = create_batch(
        study=study, name="pairs", raters=raters, design="comparisons", k=2, seed=DEMO_SEED, created_by=admin
    )
    answered = 0
    if with_answers:
        quality = {}
        for uuid, generator, metadata in study.summaries.values_list("uuid", "generator", "metadata"):
            quality[str(uuid)] = (generator, (metadata or {}).get("intended_quality", ""))
        for index, rater in enumerate(raters):
            queue = list(batch.assignments.filter(rater=rater).order_by("position"))
            for assignment in queue[:-LEFT_TO_RATE]:
                answers = pairwise_demo_answers(assignment.shown_order, quality, index, assignment.position)
                submit_rating(assignment=assignment, rater=rater, answers=answers, version=assignment.version)
                record_demo_active_time(assignment, f"pair-{assignment.position}", index)
                answered += 1
    return batch.created_assignments, answered


# Seeded judgements: a good hand-written summary beats the extract, which beats a flawed
# one on faithfulness (it is copied) and loses on readability. rater2 leans left on
# close calls (the report's position bias shows it).
_PAIRWISE_SCORES = {
    "overall": {"good": 3.0, "flawed": 1.0, LEAD3: 2.0},
    "faithfulness": {"good": 3.0, "flawed": 1.0, LEAD3: 3.0},
    "completeness": {"good": 3.0, "flawed": 2.0, LEAD3: 1.5},
    "readability": {"good": 3.0, "flawed": 2.5, LEAD3: 1.0},
}


def pairwise_demo_answers(shown: list[str], quality: dict, rater_index: int, position: int) -> dict:
    answers = {}
    for key, table in _PAIRWISE_SCORES.items():
        scores = []
        for uuid in shown:
            generator, intended = quality[uuid]
            scores.append(table[LEAD3] if generator == LEAD3 else table.get(intended, 2.0))
        left, right = scores
        # Now and then a rater sees it the other way (seeded by rater, item and question).
        if (position * 7 + rater_index * 3 + len(key)) % 9 == 0:
            left, right = right, left
        if rater_index == 1 and abs(left - right) <= 1.0:
            answers[key] = {"preferred": shown[0], "strength": "slightly"}  # a close call: the left one
            continue
        if left == right:
            answers[key] = {"preferred": "tie"}
            continue
        winner = shown[0] if left > right else shown[1]
        answers[key] = {"preferred": winner, "strength": "much" if abs(left - right) >= 1.5 else "slightly"}
    return answers
