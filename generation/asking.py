"""Ask a question: Clinfo.ai's web app for study admins (docs/questions.md, "Ask a question").

A study admin types a clinical question; it becomes a question of the study (key
`ask-<hex>`, who asked in its metadata) and one answer job, run off the request like every
answer job. The runner writes its trace on the job as each step ends (queries and their
hits, every relevance decision with its reason, the BM25 re-ranking, the citations, each
article's summary, the synthesis), so the page shows the steps as they run by polling
`ask_status`. The answer is not a summary of the study yet: it waits in the job's trace
until the admin adds it (`add_asked_answer`), which stores it as any answer is stored
(literature.answers.store_answer) and verifies it when QUESTIONS_VERIFY is on. An answer
never added is never rated, exported or counted in the report.
"""

from __future__ import annotations

import secrets

from django.db import transaction
from django.http import Http404

from annotate.models import Study, Summary
from core.exceptions import ApplicationError, InvalidStateError
from core.text_validation import check_text
from generation.models import AnswerJob
from literature.models import Question, Retrieval

Status = AnswerJob.Status
MAX_QUESTION_CHARS = 2000
ASK_PREFIX = "ask-"
DONE = (Status.OK, Status.SKIPPED, Status.FAILED, Status.FLAGGED)


def ask_question(*, study: Study, text: str, engine: str, regime: str, asked_by: str) -> AnswerJob:
    """A new question of the study and its answer job (pending: the caller enqueues it
    once committed, generation.tasks.enqueue_asked_question)."""
    from generation.questions import question_settings
    from generation.services import require_api_key

    text = " ".join((text or "").split())
    if not text:
        raise ApplicationError('field "question": write a question')
    if len(text) > MAX_QUESTION_CHARS:
        raise ApplicationError(f'field "question": at most {MAX_QUESTION_CHARS} characters')
    check_text(text, "question")
    if engine not in Retrieval.Engine.values:
        raise ApplicationError(f'field "engine": use one of {", ".join(Retrieval.Engine.values)}')
    if regime not in Retrieval.Regime.values:
        raise ApplicationError(f'field "regime": use one of {", ".join(Retrieval.Regime.values)}')
    require_api_key()
    conf = question_settings()
    with transaction.atomic():
        question = Question.objects.create(
            study=study, key=f"{ASK_PREFIX}{secrets.token_hex(5)}", text=text, metadata={"asked_by": asked_by}
        )
        return AnswerJob.objects.create(
            question=question,
            engine=engine,
            regime=regime,
            pipeline_version=conf.version,
            config={**conf.config(), "ask": True},
        )


def asked_jobs(study: Study) -> list[AnswerJob]:
    """The study's asked questions, newest first, with their questions."""
    # The key prefix in SQL, the flag in Python: a JSON boolean test reads differently on
    # SQLite and PostgreSQL (and an imported question's key may start with "ask-" too).
    jobs = (
        AnswerJob.objects.filter(question__study=study, question__key__startswith=ASK_PREFIX)
        .select_related("question")
        .order_by("-created_at", "-pk")
    )
    return [job for job in jobs if job.config.get("ask")][:50]


def get_asked_job(study: Study, uuid) -> AnswerJob:
    """The study's asked question's job, or Http404 (for pages and the API alike)."""
    job = AnswerJob.objects.filter(question__study=study, uuid=uuid).select_related("question", "summary").first()
    if job is None or not job.config.get("ask"):
        raise Http404("No such asked question in this study.")
    return job


def ask_status(job: AnswerJob) -> dict:
    """What the ask page shows, from the job's trace: every step done so far. `steps_done`
    grows with every step, so a poller knows when to show more."""
    trace = job.result or {}
    queries, problems = [], []
    for step in trace.get("steps", []):
        if "queries" in step:
            queries += [
                {"query": q, "hits": n}
                for q, n in zip(step["queries"], step.get("hits", [None] * len(step["queries"])), strict=False)
            ]
        elif "problem" in step:
            problems.append(step["problem"])
    relevance = [
        {"identifier": k, "title": v.get("title", ""), "relevant": v["relevant"], "reason": v["reason"]}
        for k, v in sorted((trace.get("relevance") or {}).items(), key=lambda kv: kv[1].get("rank", 0))
    ]
    references = {str(c["number"]): c["reference"] for c in trace.get("citations", [])}
    summaries = [
        {"number": int(n), "reference": references.get(n, ""), "text": text}
        for n, text in sorted((trace.get("article_summaries") or {}).items(), key=lambda kv: int(kv[0]))
    ]
    answer = trace.get("answer") if job.status == Status.OK else None
    rerank = trace.get("rerank")
    finished = job.status in DONE
    return {
        "uuid": str(job.uuid),
        "status": job.status,
        "finished": finished,
        "question": job.question.text,
        "engine": job.engine,
        "regime": job.regime,
        "queries": queries,
        "problems": problems,
        "retrieved": trace.get("retrieved"),
        "to_judge": trace.get("to_judge"),
        "relevance": relevance,
        "relevant": sum(1 for r in relevance if r["relevant"]),
        "rerank": {"relevant": rerank["relevant"], "kept": rerank["kept"], "dropped": rerank["dropped"]}
        if rerank
        else None,
        "citations": [{"number": c["number"], "reference": c["reference"]} for c in trace.get("citations", [])],
        "article_summaries": summaries,
        "answer": {"synthesis": answer["synthesis"], "tldr": answer["tldr"]} if answer else None,
        "skip_reason": job.skip_reason,
        "error": job.error,
        "added": job.summary_id is not None,
        "summary": str(job.summary.uuid) if job.summary_id else None,
        "steps_done": sum((len(queries), len(problems), len(relevance), len(summaries), bool(answer), finished)),
    }


@transaction.atomic
def add_asked_answer(*, job: AnswerJob) -> Summary:
    """Store an asked question's answer as an answer of the study, for rating, exactly as
    the pipeline stores the answers it writes (same key, generator and metadata). Once:
    adding it again is refused (409)."""
    from generation.questions import question_settings
    from literature.answers import Citation, store_answer

    # Only the job's row is locked: PostgreSQL refuses FOR UPDATE on the nullable side of
    # an outer join (the retrieval), so the related rows are read after the lock.
    locked = AnswerJob.objects.select_for_update(of=("self",)).select_related("question").get(pk=job.pk)
    if locked.summary_id is not None:
        raise InvalidStateError("This answer is already in the study.")
    if locked.status != Status.OK or not (locked.result or {}).get("answer"):
        raise InvalidStateError("Only a finished answer can be added to the study.")
    conf = question_settings()
    version = locked.pipeline_version
    trace = locked.result
    summary = store_answer(
        question=locked.question,
        retrieval=locked.retrieval,
        synthesis=trace["answer"]["synthesis"],
        tldr=trace["answer"]["tldr"],
        generator=f"{locked.config.get('model', conf.model)}/clinfo@{version}",
        key=f"{locked.question.key}:answer:{locked.engine}-{locked.regime}@{version}",
        citations=[Citation(**c) for c in trace["citations"]],
        metadata={
            "pipeline": "clinfo",
            "pipeline_version": version,
            "answer_job": str(locked.uuid),
            "model": locked.config.get("model", conf.model),
            "engine": locked.engine,
            "regime": locked.regime,
            "article_summaries": trace.get("article_summaries", {}),
            "asked_by": locked.question.metadata.get("asked_by", ""),
        },
    )
    AnswerJob.objects.filter(pk=locked.pk).update(summary=summary)
    job.summary = summary
    return summary
