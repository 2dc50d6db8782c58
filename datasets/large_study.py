"""A large synthetic study for measuring what admins open (`manage.py make_large_study`).

At full size (the defaults): 2,000 sources, 6,000 summaries from six systems (three a source), 60 raters,
every summary rated by three (one `k_raters` batch), the ten questions of
fixtures/large-study/rubric.yaml with highlighted spans, and consensus answers on a third
of the items: about 150,000 stored answers. Every row goes through the project's own
paths, as real data would: the study, sources and summaries through the JSON Lines import
(`import_records`), the batch through `create_batch`, and the raters' answers checked by
the rubric (`RubricDefinition.validate`, final) and stored, as submitted revisions, by the
import pipeline's writer (`RowWriter`, `bulk_create` or COPY) a chunk of items at a time.

The answers are drawn from a seeded model, so the report has something to find: each
system has its own mean quality, each summary a quality around it, each rater a bias, and
each answer noise. The same seed on a fresh database gives the same study (which rater
rates which item follows create_batch's seeded design over the accounts' ids).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotate.models import (
    Assignment,
    Batch,
    ConsensusAnswer,
    Rating,
    Revision,
    Span,
    Study,
    StudyMembership,
    Summary,
)
from annotate.rubrics import AnswerContext, RubricDefinition
from annotate.selectors.contents import rubric_definition
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.ratings import new_answer_rows
from annotate.services.rubrics import load_rubric, read_rubric_file
from core.exceptions import ApplicationError
from datasets.importing import import_records
from datasets.pipeline import RowWriter, batches

FULL_SOURCES = 2000
FULL_RATERS = 60
SYSTEMS = ("system-a", "system-b", "system-c", "system-d", "system-e", "system-f")
# The systems' mean quality on the model's scale (0 is "adequate").
SYSTEM_MEANS = (1.0, 0.6, 0.3, 0.0, -0.4, -0.8)
SUMMARIES_PER_SOURCE = 3
RATERS_PER_ITEM = 3
ADJUDICATED_SHARE = 1 / 3
# Items whose answers are written per chunk: a chunk's rows are forgotten once stored.
CHUNK_ITEMS = 500

WORDS = (
    "adults children patients trial placebo dose weeks months risk reduction increase outcome "
    "mortality symptoms pain blood pressure asthma diabetes therapy treatment control group "
    "randomised cohort follow-up adverse events quality life score hospital admission relapse "
    "improvement evidence moderate low high certainty analysis effect size confidence interval"
).split()


def rubric_path() -> Path:
    return Path(settings.BASE_DIR) / "fixtures" / "large-study" / "rubric.yaml"


@dataclass(frozen=True)
class LargeStudyResult:
    """What was made, counted from the database."""

    study: Study
    batch: Batch
    sources: int
    summaries: int
    raters: int
    assignments: int
    answers: int
    spans: int
    adjudicated_items: int
    consensus_answers: int

    def summary_line(self) -> str:
        return (
            f"{self.study.slug}: {self.sources:,} sources, {self.summaries:,} summaries, {self.raters} raters, "
            f"{self.assignments:,} submitted assignments, {self.answers:,} answers and {self.spans:,} spans, "
            f"{self.adjudicated_items:,} items adjudicated ({self.consensus_answers:,} consensus answers)"
        )


def _sentence(rng: random.Random, words: int) -> str:
    chosen = [rng.choice(WORDS) for _ in range(words)]
    return " ".join(chosen).capitalize() + "."


def _text(rng: random.Random, sentences: int, words: tuple[int, int]) -> str:
    return " ".join(_sentence(rng, rng.randint(*words)) for _ in range(sentences))


def import_lines(*, slug: str, sources: int, rubric_key: str, seed: int) -> Iterator[str]:
    """The study's JSON Lines import (docs/import-format.md): its study line, then each
    source followed by its summaries, from three of the six systems in turn (source i by
    systems i, i+1 and i+2), so that each system writes a sixth of them."""
    rng = random.Random(seed)
    yield json.dumps(
        {"type": "study", "slug": slug, "title": f"Large study ({sources:,} sources)", "rubric": rubric_key}
    )
    for i in range(sources):
        source = f"src-{i:05d}"
        text = f"Trial {i}. " + _text(rng, 8, (14, 24))
        yield json.dumps({"type": "source", "study": slug, "key": source, "title": f"Trial {i}", "text": text})
        for system in (SYSTEMS[(i + j) % len(SYSTEMS)] for j in range(SUMMARIES_PER_SOURCE)):
            summary = {"type": "summary", "study": slug, "source": source, "key": f"{source}-{system}"}
            summary.update(text=f"In trial {i}, " + _text(rng, 3, (10, 18)).lower(), generator=system)
            yield json.dumps(summary)


def _create_raters(*, study: Study, slug: str, raters: int) -> list:
    """The study's admin and raters: accounts without a usable password (sign in as them
    with `manage.py set_password` or an invitation), made in one statement."""
    user_model = get_user_model()
    names = [f"{slug}-admin"] + [f"{slug}-rater-{i:02d}" for i in range(1, raters + 1)]
    taken = sorted(user_model.objects.filter(username__in=names).values_list("username", flat=True))
    if taken:
        raise ApplicationError(f"accounts exist already: {', '.join(taken[:3])}: choose another --slug")
    unusable = make_password(None)
    user_model.objects.bulk_create([user_model(username=name, password=unusable) for name in names])
    users = list(user_model.objects.filter(username__in=names).order_by("username"))
    admin, rater_users = users[0], users[1:]
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    return [admin, *rater_users]


class AnswerModel:
    """Seeded answers: a summary's quality (its system's mean plus noise), a rater's bias,
    and each answer's noise, turned into the rubric's ten answers."""

    def __init__(self, seed: int, rater_ids: list[int]):
        self.rng = random.Random(seed + 1)
        self.bias = {r: self.rng.gauss(0, 0.3) for r in rater_ids}
        self.quality: dict[int, float] = {}

    def item_quality(self, summary: Summary) -> float:
        if summary.pk not in self.quality:
            self.quality[summary.pk] = SYSTEM_MEANS[SYSTEMS.index(summary.generator)] + self.rng.gauss(0, 0.7)
        return self.quality[summary.pk]

    def _scale(self, z: float, low: int, high: int) -> int:
        middle, spread = (low + high) / 2, (high - low) / 4
        return max(low, min(high, round(middle + (z + self.rng.gauss(0, 0.6)) * spread)))

    def answers(self, summary: Summary, rater_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
        rng, z = self.rng, self.item_quality(summary) + self.bias[rater_id]
        answers: dict[str, Any] = {
            "overall": self._scale(z, 1, 5),
            "faithful": self._scale(z + 0.3, 1, 4),
            "complete": self._scale(z, 1, 4),
            "concise": self._scale(z * 0.5, 1, 5),
            "readable": self._scale(z * 0.5 + 0.2, 1, 5),
            "direction": "correct"
            if z + rng.gauss(0, 0.5) > -0.4
            else rng.choice(["overstated", "understated", "wrong"]),
            "certainty": "yes" if z + rng.gauss(0, 0.8) > 0 else "no",
            "problems": [p for p in ("jargon", "numbers", "population", "outcome", "hedging") if rng.random() < 0.15],
        }
        rationales: dict[str, Any] = {}
        if rng.random() < 0.2:
            rationales["overall"] = f"Quality judged {answers['overall']} of 5 against the source."
        spans = self._spans(summary.text, z)
        if spans:
            answers["unsupported"] = spans
        if rng.random() < 0.1:
            answers["comments"] = "Give the size of the effect with its units."
        return answers, rationales

    def _spans(self, text: str, z: float) -> list[dict]:
        """One or two highlighted words of the summary, more often in a poor one."""
        rng, spans, start = self.rng, [], 0
        for _ in range(2):
            if rng.random() > 0.45 - 0.15 * z:
                break
            start = text.find(" ", start + rng.randint(5, 40)) + 1
            end = text.find(" ", start + 1)
            if start <= 0 or end <= start:
                break
            spans.append(
                {
                    "start": start,
                    "end": end,
                    "text": text[start:end],
                    "answers": {"severity": rng.choice(["minor", "major"])},
                }
            )
            start = end
        return spans


def _write_answers(
    *, study: Study, batch: Batch, definition: RubricDefinition, model: AnswerModel, now
) -> dict[int, list[dict]]:
    """Every assignment of the batch submitted: a chunk of items at a time, its answers
    checked by the rubric as a submit checks them, its revisions, ratings, rationales and
    spans stored in bulk. Returns each summary's clean answers (for the adjudication)."""
    writer = RowWriter()
    assignments = list(
        Assignment.objects.filter(batch=batch).select_related("summary__source").order_by("summary_id", "rater_id")
    )
    given: dict[int, list[dict]] = {}
    for chunk in batches(assignments, CHUNK_ITEMS * RATERS_PER_ITEM):
        revisions, rows = [], []
        for assignment in chunk:
            summary = assignment.summary
            answers, rationales = model.answers(summary, assignment.rater_id)
            context = AnswerContext(summary_text=summary.text, source_text=summary.source.text)
            clean = definition.validate(answers, rationales, final=True, context=context)
            given.setdefault(summary.pk, []).append(clean.values)
            seconds = model.rng.randint(40, 400)
            assignment.submitted_at = now - timedelta(seconds=model.rng.randint(600, 14 * 86400))
            assignment.first_opened_at = assignment.submitted_at - timedelta(seconds=seconds + 5)
            assignment.active_seconds = seconds
            assignment.state = Assignment.State.SUBMITTED
            revision = Revision(
                assignment=assignment,
                number=1,
                rubric=study.rubric,
                status=Revision.Status.SUBMITTED,
                phase=Revision.Phase.INITIAL,
                assisted=study.assisted,
                submitted_at=assignment.submitted_at,
                shown_order=assignment.shown_order,
            )
            revisions.append(revision)
            rows.append(new_answer_rows(revision, clean, definition))
        writer.create(revisions)
        writer.create([rating for ratings, _, _ in rows for rating in ratings])
        writer.create([rationale for _, rationales, _ in rows for rationale in rationales])
        writer.create([span for _, _, spans in rows for span in spans])
        writer.update(chunk, ["state", "submitted_at", "first_opened_at", "active_seconds"])
    # A submit moves the assignment's version on (the compare-and-set of submit_rating).
    Assignment.objects.filter(batch=batch).update(version=F("version") + 1)
    return given


def _majority(values: list[Any]) -> Any:
    counted = Counter(json.dumps(v, sort_keys=True) for v in values if v is not None)
    return json.loads(counted.most_common(1)[0][0]) if counted else None


def _adjudicate(
    *, batch: Batch, definition: RubricDefinition, given: dict[int, list[dict]], admin, seed: int
) -> tuple[int, int]:
    """Consensus answers (the raters' majority) to every adjudicable question answered on
    a third of the items, chosen by the seed; (items, consensus answers)."""
    items = sorted(given)
    chosen = sorted(random.Random(seed + 2).sample(items, round(len(items) * ADJUDICATED_SHARE)))
    questions = [q for q in definition.questions if q.adjudicable]
    rows = []
    for summary_id in chosen:
        for q in questions:
            value = _majority([values.get(q.key) for values in given[summary_id]])
            if value is not None:
                rows.append(
                    ConsensusAnswer(
                        batch=batch,
                        summary_id=summary_id,
                        question=q.key,
                        value=value,
                        rationale="The raters' majority, confirmed in discussion.",
                        decided_by=admin,
                        rubric=batch.study.rubric,
                    )
                )
    RowWriter().create(rows)
    return len(chosen), len(rows)


@transaction.atomic
def make_large_study(
    *, slug: str, sources: int = FULL_SOURCES, raters: int = FULL_RATERS, seed: int = 0
) -> LargeStudyResult:
    """Generate the study (the module's docstring): all of it, or nothing on an error."""
    if sources < 1:
        raise ApplicationError("sources: give at least 1")
    if raters < RATERS_PER_ITEM:
        raise ApplicationError(f"raters: give at least {RATERS_PER_ITEM}, the raters each item needs")
    if Study.objects.filter(slug=slug).exists():
        raise ApplicationError(f"a study {slug!r} exists already: choose another --slug")
    rubric = load_rubric(definition=read_rubric_file(rubric_path()))
    import_records(lines=import_lines(slug=slug, sources=sources, rubric_key=rubric.key, seed=seed))
    study = Study.objects.select_related("rubric").get(slug=slug)
    admin, *rater_users = _create_raters(study=study, slug=slug, raters=raters)
    batch = create_batch(
        study=study,
        name="main",
        raters=rater_users,
        design="k_raters",
        k=RATERS_PER_ITEM,
        seed=seed,
        created_by=admin,
    )
    definition = rubric_definition(study.rubric)
    model = AnswerModel(seed, [r.pk for r in rater_users])
    given = _write_answers(study=study, batch=batch, definition=definition, model=model, now=timezone.now())
    adjudicated, consensus = _adjudicate(batch=batch, definition=definition, given=given, admin=admin, seed=seed)
    return LargeStudyResult(
        study=study,
        batch=batch,
        sources=study.sources.count(),
        summaries=Summary.objects.filter(study=study).count(),
        raters=len(rater_users),
        assignments=Assignment.objects.filter(batch=batch, state=Assignment.State.SUBMITTED).count(),
        answers=Rating.objects.filter(revision__assignment__batch=batch).count(),
        spans=Span.objects.filter(revision__assignment__batch=batch).count(),
        adjudicated_items=adjudicated,
        consensus_answers=consensus,
    )
