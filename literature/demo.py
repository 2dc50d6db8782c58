"""The question demo (`manage.py load_question_demo`, part of `make run`), built offline.

- Sources: every Evidence Inference 2.0 abstract in fixtures/ (150 trials, CC BY).
- Questions: one per abstract among the first QUESTIONS, from its first prompt: "How does
  <intervention> compare with <comparator> for <outcome>?". Its abstract is the one
  reference; its label (significantly increased / decreased / no significant difference)
  gives the gold answer.
- Retrieval: the local BM25 engine over the 150 abstracts, the question's text as the
  query (no model writes queries in the demo), unrestricted (the demo's questions have no
  review to exclude and no date), top RETRIEVED. Recall is real: nothing is arranged.
- Answers: written by a template from the Evidence Inference annotations, not by a model,
  and labelled so (generator "demo-template", metadata "demo"): if the question's own
  abstract is among the evidence (the 5 best-ranked articles; no relevance step without a
  model), the answer quotes its evidence sentence and states its label, citing it; if not,
  the answer says the evidence does not answer the question. A configured model replaces
  them with `manage.py answer_questions`.
- A main batch of every answer for rater1 and rater2; with `--with-answers`, seeded
  ratings for all but the last LEFT_TO_RATE of each queue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import transaction

from annotate.models import Assignment, Batch, Study, StudyMembership, Summary
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member, ensure_user
from annotate.services.ratings import submit_rating
from annotate.services.rubrics import load_builtin_rubric
from datasets.demo import DEMO_SEED, LEFT_TO_RATE, fixture, record_demo_active_time
from datasets.demo_state import QUESTION_STUDY
from datasets.importing import import_evidence_inference
from literature.answers import evidence_articles, number_citations, store_answer
from literature.engines import LocalEngine
from literature.importing import QuestionRow, import_questions
from literature.models import Question, Retrieval
from literature.services import retrieve_for_question

QUESTIONS = 12
RETRIEVED = 10
GENERATOR = "demo-template"
LABELS = {
    "significantly increased": "increased",
    "significantly decreased": "decreased",
    "no significant difference": "made no significant difference to",
}
GUIDELINES = (
    "You see a clinical question, an answer to it with numbered citations [n], and beside it the articles "
    "the answer could cite: article n starts with its citation line [n]. Hover over or focus a citation to "
    "highlight its article.\n\nJudge the answer only against the articles shown. Give a reason for every "
    "judgement: it is what makes disagreements useful."
)


@dataclass(frozen=True)
class QuestionDemoResult:
    questions: int
    answers_created: int
    assignments_created: int
    answers_submitted: int
    recall: float  # share of questions whose reference was retrieved (top RETRIEVED)


def question_text(prompt: dict) -> str:
    return f"How does {prompt['intervention']} compare with {prompt['comparator']} for {prompt['outcome']}?"


def gold_answer(prompt: dict) -> str:
    verb = LABELS.get(prompt.get("label", ""), "changed")
    return f"{prompt['intervention']} {verb} {prompt['outcome']} compared with {prompt['comparator']}."


def template_answer(prompt: dict, own_number: int | None) -> tuple[str, str]:
    """(synthesis, TL;DR) from the annotations; cites only the question's own article."""
    if own_number is None:
        return (
            f"None of the articles found reports {prompt['outcome']} for {prompt['intervention']} compared with "
            f"{prompt['comparator']}.",
            "The articles found do not answer this question.",
        )
    n = own_number
    verb = LABELS.get(prompt.get("label", ""), "changed")
    return (
        f"One randomised trial compared {prompt['intervention']} with {prompt['comparator']} [{n}]. "
        f'It reports: "{prompt["evidence"].strip()}" [{n}].',
        f"In one trial, {prompt['intervention']} {verb} {prompt['outcome']} compared with "
        f"{prompt['comparator']} [{n}].",
    )


def _demo_records() -> list[dict]:
    with fixture("evidence_inference", "abstracts.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@transaction.atomic
def load_question_demo(*, password: str, with_answers: bool = False) -> QuestionDemoResult:
    """Idempotent: a second run changes nothing (existing questions, retrievals, answers
    and batches stay; accounts keep their passwords)."""
    study, _ = Study.objects.get_or_create(
        slug=QUESTION_STUDY,
        defaults={
            "title": "Demo: cited answers to clinical questions",
            "rubric": load_builtin_rubric(key="clinfo"),
            "licence": "CC-BY-4.0",
            "description": (
                "Questions built from Evidence Inference 2.0 prompts (CC BY), answered over the 150 demo abstracts; "
                "the answers are written by a template from the annotations, not by a model."
            ),
            "guidelines": GUIDELINES,
        },
    )
    records = _demo_records()
    with fixture("evidence_inference", "abstracts.jsonl").open(encoding="utf-8") as handle:
        import_evidence_inference(study=study, lines=handle)
    chosen = [(r, r["prompts"][0]) for r in records[:QUESTIONS]]
    import_questions(
        study=study,
        rows=[
            QuestionRow(
                line=i,
                key=f"ei-{prompt['prompt_id']}",
                text=question_text(prompt),
                gold_answer=gold_answer(prompt),
                reference_ids=[record["pmcid"]],
                exclude_ids=[],
                published_on=None,
                metadata={"origin": "Evidence Inference 2.0 prompt", "label": prompt.get("label", "")},
            )
            for i, (record, prompt) in enumerate(chosen, start=1)
        ],
    )
    engine = LocalEngine(study)
    answers_created, found = 0, 0
    for record, prompt in chosen:
        question = Question.objects.get(study=study, key=f"ei-{prompt['prompt_id']}")
        retrieval = question.retrievals.filter(engine="local", regime=Retrieval.Regime.UNRESTRICTED).first()
        if retrieval is None:
            retrieval = retrieve_for_question(
                question=question, engine=engine, regime=Retrieval.Regime.UNRESTRICTED, limit=RETRIEVED
            )
        found += retrieval.articles.filter(identifier=record["pmcid"]).exists()
        key = f"{question.key}:answer:demo"
        if Summary.objects.filter(study=study, key=key).exists():
            continue
        citations = number_citations(evidence_articles(retrieval))
        own = next((c.number for c in citations if c.source_key == record["pmcid"]), None)
        synthesis, tldr = template_answer(prompt, own)
        store_answer(
            question=question,
            retrieval=retrieval,
            synthesis=synthesis,
            tldr=tldr,
            generator=GENERATOR,
            key=key,
            citations=citations,
            metadata={"demo": "written by a template from the Evidence Inference annotations, not by a model"},
        )
        answers_created += 1
    created, submitted = _batch_and_ratings(study, password=password, with_answers=with_answers)
    return QuestionDemoResult(
        questions=len(chosen),
        answers_created=answers_created,
        assignments_created=created,
        answers_submitted=submitted,
        recall=found / len(chosen),
    )


def _batch_and_ratings(study: Study, *, password: str, with_answers: bool) -> tuple[int, int]:
    admin, _ = ensure_user(username="admin", password=password, is_staff=True, is_superuser=True)
    raters = [ensure_user(username=name, password=password)[0] for name in ("rater1", "rater2")]
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN, seed=0)
    for i, rater in enumerate(raters, start=1):
        add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER, seed=DEMO_SEED + i)
    if study.batches.exists():
        return 0, 0
    batch = create_batch(
        study=study,
        name="main",
        kind=Batch.Kind.MAIN,
        raters=raters,
        design="k_raters",
        k=2,
        seed=DEMO_SEED,
        created_by=admin,
    )
    submitted = 0
    if with_answers:
        for index, rater in enumerate(raters):
            queue = list(
                Assignment.objects.filter(batch=batch, rater=rater).select_related("summary").order_by("position")
            )
            for assignment in queue[:-LEFT_TO_RATE]:
                answers, rationales = demo_ratings(assignment.summary, index)
                submit_rating(
                    assignment=assignment,
                    rater=rater,
                    answers=answers,
                    rationales=rationales,
                    version=assignment.version,
                )
                record_demo_active_time(assignment, assignment.summary.key, index)
                submitted += 1
    return batch.created_assignments, submitted


def demo_ratings(summary: Summary, rater_index: int) -> tuple[dict, dict]:
    """Seeded ratings: answers that cite nothing are judged unhelpful; the raters differ by
    a step on about one item in three."""
    base = sum(map(ord, summary.key))
    cites = bool(summary.metadata.get("citations")) and "[" in summary.text
    step = 1 if rater_index % 2 and base % 3 == 1 else 0
    tldr = (4 if cites else 2) - step
    answers = {
        "tldr_correct": tldr,
        "citations_supported": 4 - (base + step) % 2 if cites else 1,
        "important_missing": "yes" if not cites else "no",
        "evidence_strength": 3 if cites else 2,
        "could_mislead": "yes" if tldr == 1 or not cites else "no",
        "feedback": "",
    }
    rationales = {
        "tldr_correct": "Matches the cited trial's result." if cites else "It does not answer the question.",
        "citations_supported": "Checked each citation against its article.",
        "important_missing": "The question's own trial is not used." if not cites else "The relevant trial is used.",
        "evidence_strength": "One trial; the answer says so." if cites else "Says nothing of the evidence.",
        "could_mislead": "A clinician would read it as settled." if not cites else "States its limits.",
    }
    return answers, rationales
