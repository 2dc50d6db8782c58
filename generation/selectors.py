"""Reads of the generation app: a run's report and a summary's trace."""

from __future__ import annotations

from django.db.models import Count, Max, Prefetch, Q, QuerySet, Sum

from annotate.models import Claim, Summary
from generation.models import EvaluationRun, EvaluationScore, GenerationJob, GenerationRun
from generation.reference_checks import CHECKS


def run_jobs(run: GenerationRun) -> QuerySet[GenerationJob]:
    return (
        run.jobs.select_related("source", "summary")
        .prefetch_related(Prefetch("summary__claims", queryset=Claim.objects.order_by("index")))
        .annotate(
            n_calls=Count("llm_calls"),
            n_tokens_in=Sum("llm_calls__tokens_in"),
            n_tokens_out=Sum("llm_calls__tokens_out"),
            total_cost=Sum("llm_calls__cost"),
        )
        .order_by("source__key")
    )


def run_progress(run: GenerationRun) -> dict[str, int]:
    counts = dict(run.jobs.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    return {status: counts.get(status, 0) for status in GenerationJob.Status.values}


def with_progress(runs: QuerySet[GenerationRun]) -> QuerySet[GenerationRun]:
    """Runs annotated with n_<status>: how many of their jobs are in each status."""
    return runs.annotate(
        **{f"n_{status}": Count("jobs", filter=Q(jobs__status=status)) for status in GenerationJob.Status.values}
    )


def job_report(job: GenerationJob) -> dict:
    """One entry of `generate --json` (job annotated by run_jobs)."""
    checks = (job.result.get("reference_checks") or {}).get("checks")
    claims = list(job.summary.claims.all()) if job.summary_id else []
    return {
        "source": job.source.key,
        "summary": job.summary.text if job.summary_id else None,
        "status": job.status,
        "attempts": job.result.get("attempts", 0),
        "reference_checks": {name: checks[name] for name in CHECKS} if checks else None,
        "flags": job.result.get("flags", []),
        "claims": [
            {"text": c.text, "verdict": c.verdict, "explanation": c.explanation, "probability": c.probability}
            for c in claims
        ],
        "llm_calls": job.n_calls,
        "tokens": (job.n_tokens_in or 0) + (job.n_tokens_out or 0),
        "cost": float(job.total_cost) if job.total_cost is not None else None,
    }


def run_report(run: GenerationRun) -> dict:
    return {"run": str(run.uuid), "summaries": [job_report(job) for job in run_jobs(run)]}


def evaluation_rows(*, study) -> dict[str, QuerySet]:
    """The study's evaluator runs and scores and rubric-judge runs and answers: a score
    stored, a run resumed or a judge's answer changes the study report (its cache key,
    analysis.selectors.report_inputs, counts these rows)."""
    from generation.models import JudgeAnswer, JudgeRun

    return {
        "evaluator_runs": EvaluationRun.objects.filter(study=study),
        "evaluator_scores": EvaluationScore.objects.filter(run__study=study),
        "judge_runs": JudgeRun.objects.filter(study=study),
        "judge_answers": JudgeAnswer.objects.filter(run__study=study),
    }


def run_state(
    *, done: int, total: int, last_activity, now, lease_seconds: int, status: str = "", heartbeat_at=None
) -> str:
    """How the evaluators page names a run's progress: "done" once every summary has its
    scores (or answer). Otherwise by the run's recorded `status` (generation.run_records):
    "waiting" for a worker, "running" while its heartbeat is fresher than RUN_LEASE, "died"
    when it is not (the worker was killed: "stopped: the worker died"), "failed" with its
    error; a run that ended before the end of the study's summaries (a command's --limit),
    or one recorded before runs had a status, is "stopped" when it wrote nothing within the
    job lease (GENERATION_JOB_LEASE). Starting the evaluator again resumes it."""
    from core.background import run_lease

    if done >= total:
        return "done"
    if status == "pending":
        return "waiting"
    if status == "failed":
        return "failed"
    if status == "running":
        fresh = heartbeat_at is not None and heartbeat_at >= now - run_lease()
        return "running" if fresh else "died"
    if status == "" and last_activity is not None and (now - last_activity).total_seconds() <= lease_seconds:
        return "running"
    return "stopped"


def evaluator_runs(study, *, now) -> dict:
    """The evaluators page's runs: evaluation runs (summaries scored, failed scores) and
    rubric judge runs (summaries judged, valid, refused, unusable), newest first, each with
    its `state` (run_state); `active` when any is still running (the page then reloads)."""
    from generation.conf import job_lease_seconds
    from generation.models import JudgeRun

    total = study.summaries.count()
    lease = job_lease_seconds()
    runs = list(
        EvaluationRun.objects.filter(study=study)
        .annotate(
            scored=Count("scores__summary", distinct=True),
            failed=Count("scores", filter=Q(scores__status="failed")),
            last_score=Max("scores__created_at"),
        )
        .order_by("-created_at", "-pk")
    )
    judge_runs = list(
        JudgeRun.objects.filter(study=study)
        .annotate(
            judged=Count("answers"),
            valid=Count("answers", filter=Q(answers__status="valid")),
            invalid=Count("answers", filter=Q(answers__status="invalid")),
            failed=Count("answers", filter=Q(answers__status="failed")),
            last_answer=Max("answers__created_at"),
        )
        .order_by("-created_at", "-pk")
    )
    # Each run's progress: summaries done, and its newest score or answer (else its start).
    progress = [(run, run.scored, run.last_score) for run in runs]
    progress += [(run, run.judged, run.last_answer) for run in judge_runs]
    for run, done, last in progress:
        activity = last or run.created_at
        run.state = run_state(
            done=done,
            total=total,
            last_activity=activity,
            now=now,
            lease_seconds=lease,
            status=run.status,
            heartbeat_at=run.heartbeat_at,
        )
    active = any(run.state in ("running", "waiting") for run in [*runs, *judge_runs])
    return {"runs": runs, "judge_runs": judge_runs, "n_summaries": total, "active": active}


def factored_probabilities(study) -> dict[str, float | None]:
    """P(summary) that Factored Verification gave each summary of the study (by summary
    uuid; None when it verified no claim), for the summaries it checked."""
    probabilities = {}
    for uuid, metadata in Summary.objects.filter(study=study).values_list("uuid", "metadata"):
        factored = (metadata or {}).get("factored")
        if factored:
            probabilities[str(uuid)] = factored.get("p_summary")
    return probabilities


def evaluator_metrics(study):
    """item + `eval.<evaluator>.<name>` columns from the newest run of each evaluator
    (metric columns of the study report). Per-finding
    scores (`name:<n>`) stay out: the summary's mean is the column."""
    import pandas as pd

    newest: dict[str, EvaluationRun] = {}
    # The reference metrics' stored scores are the report's own columns (stored_reference_metrics).
    for run in EvaluationRun.objects.filter(study=study).exclude(evaluator="reference").order_by("-created_at", "-pk"):
        newest.setdefault(run.evaluator, run)
    rows: dict[str, dict] = {}
    scores = EvaluationScore.objects.filter(run__in=newest.values(), status=EvaluationScore.Status.OK).values_list(
        "run__evaluator", "summary__uuid", "name", "value"
    )
    for evaluator, uuid, name, value in scores:
        if ":" in name:
            continue
        rows.setdefault(str(uuid), {"item": str(uuid)})[f"eval.{evaluator}.{name}"] = value
    return pd.DataFrame(list(rows.values()))


def stored_reference_metrics(study):
    """item + reference-score columns (stats.metrics.TEXT_SCORES, GOLD_SCORES,
    embedding_similarity) stored by the `reference` evaluator's run of today's version,
    for the summaries it scored in full; an empty frame when there is none. The report
    takes these instead of computing them again."""
    import pandas as pd

    # Not generation.evaluators: it imports the LLM gateway (openai, tiktoken), which the
    # report does not need.
    from generation.evaluator_versions import REFERENCE_EVALUATOR, config_version, reference_config

    run = EvaluationRun.objects.filter(
        study=study, evaluator=REFERENCE_EVALUATOR, version=config_version(reference_config())
    ).first()
    if run is None:
        return pd.DataFrame(columns=["item"])
    rows: dict[str, dict] = {}
    scores = EvaluationScore.objects.filter(run=run).exclude(status=EvaluationScore.Status.FAILED)
    for uuid, name, value in scores.values_list("summary__uuid", "name", "value"):
        rows.setdefault(str(uuid), {"item": str(uuid)})[name] = value if value is not None else float("nan")
    # A summary's scores are written together (one transaction), so one with rougeL has them all.
    complete = [row for row in rows.values() if "rougeL" in row]
    return pd.DataFrame(complete) if complete else pd.DataFrame(columns=["item"])


def judge_scores(study):
    """The newest rubric judge run's valid answers, as (judge name, judge_answer_frame), or
    None. Only answers the rubric accepted are scores."""
    from annotate.selectors.contents import rubric_definition
    from generation.models import JudgeAnswer, JudgeRun

    run = JudgeRun.objects.filter(study=study).order_by("-created_at", "-pk").first()
    if run is None:
        return None
    valid = JudgeAnswer.objects.filter(run=run, status=JudgeAnswer.Status.VALID)
    frame = judge_answer_frame(valid.values_list("summary__uuid", "answers"), rubric_definition(study.rubric))
    return run.rater_name, frame


def judge_preferences(study):
    """The newest rubric judge run's answers on comparison items, as (judge name, frame of
    item, question, preferred, consistent), or None: its answer that counts (a flip between
    the two orders is a tie, generation.judging) and whether it gave the same answer in
    both orders. Only answers valid in both orders count."""
    import pandas as pd

    from generation.models import JudgeAnswer, JudgeRun

    run = JudgeRun.objects.filter(study=study).order_by("-created_at", "-pk").first()
    if run is None:
        return None
    rows = []
    valid = JudgeAnswer.objects.filter(run=run, status=JudgeAnswer.Status.VALID).exclude(orders=[])
    for uuid, answers, orders in valid.values_list("summary__uuid", "answers", "orders"):
        consistent = (orders[0].get("consistent") or {}) if orders else {}
        for key, value in (answers or {}).items():
            if isinstance(value, dict) and "preferred" in value:
                rows.append((str(uuid), key, value["preferred"], bool(consistent.get(key, False))))
    frame = pd.DataFrame(rows, columns=["item", "question", "preferred", "consistent"])
    return (run.rater_name, frame) if len(frame) else None


def judge_answer_frame(answers, definition):
    """item, question, part, value, label of the judge's answers that people's can be
    compared with, from (summary uuid, answers) pairs of valid judge answers: numeric
    answers to scale questions (part "" for a plain scale, the finding's id for a
    per-finding one; N/A left out, as the report leaves it out of people's scores) and the
    option chosen for each claim of a per-claim question (part: the claim id; value NaN)."""
    import pandas as pd

    def number(value) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    scales = {q.key for q in definition.questions if q.is_scale}
    claims = {q.key for q in definition.questions if q.per_claim}
    rows = []
    for uuid, given in answers:
        for key, value in (given or {}).items():
            if key in scales:
                parts = value.items() if isinstance(value, dict) else [("", value)]
                rows.extend((str(uuid), key, str(part), float(v), "") for part, v in parts if number(v))
            elif key in claims and isinstance(value, dict):
                rows.extend((str(uuid), key, str(claim), float("nan"), label) for claim, label in value.items())
    return pd.DataFrame(rows, columns=["item", "question", "part", "value", "label"])


def judge_metrics(study):
    """item + `eval.rubric_judge.<question>` columns: the judge's scale answers as metrics
    (per-finding ones averaged over the findings), so the report correlates them with
    every human question like any evaluator's."""
    import pandas as pd

    from generation.evaluator_versions import JUDGE_NAME  # not judging: it imports the LLM gateway

    found = judge_scores(study)
    scores = found[1].dropna(subset=["value"]) if found is not None else None
    if scores is None or not len(scores):
        return pd.DataFrame(columns=["item"])
    # A per-finding question's column is the mean over the source's findings (as the
    # factpico evaluators' `evidence`).
    frame = scores.pivot_table(index="item", columns="question", values="value", aggfunc="mean")
    frame.columns = [f"eval.{JUDGE_NAME}.{c}" for c in frame.columns]
    return frame.reset_index()
