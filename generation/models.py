"""Generation runs, one job per (source, pipeline version), and every LLM call.

Nothing here is human work: an LLM call belongs to its job and goes with it. A job
never cascades into the summary it produced (PROTECT): raters' answers hang off
summaries.
"""

import uuid

from django.db import models
from django.db.models import Q

from annotate.models import Source, Study, Summary
from core.models import TimeStamped


class GenerationJob(TimeStamped):
    """The work of writing one source's summary with one pipeline version.

    Unique per (source, pipeline_version): asking again for the same work, from a
    redelivered task or a new run, finds this row instead of writing a second summary.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        OK = "ok", "Done"
        FLAGGED = "flagged", "Done, flagged"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="generation_jobs")
    pipeline = models.CharField(max_length=50, help_text="litsumm, factored or litsumm+factored")
    pipeline_version = models.CharField(max_length=64, help_text="Hash of model, parameters and prompt versions.")
    config = models.JSONField(default=dict, help_text="Model, parameters and prompt versions behind the version.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    tries = models.PositiveIntegerField(default=0, help_text="How many times a worker claimed this job.")
    requeued = models.BooleanField(
        default=False, help_text="Queued a second time because no worker took it (RUN_CLAIM_TIMEOUT)."
    )
    summary = models.ForeignKey(
        Summary, on_delete=models.PROTECT, null=True, blank=True, related_name="generation_jobs"
    )
    result = models.JSONField(default=dict, blank=True, help_text="Checks, drafts, verdicts: the trace.")
    skip_reason = models.TextField(blank=True)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "pipeline_version"], name="generationjob_unique_source_version"),
            models.CheckConstraint(
                condition=~Q(status="skipped") | ~Q(skip_reason=""), name="generationjob_skip_needs_reason"
            ),
        ]
        ordering = ["source", "pipeline"]

    def __str__(self) -> str:
        return f"{self.source.key} · {self.pipeline}@{self.pipeline_version[:10]}"


class GenerationRun(TimeStamped):
    """One `generate` command: which sources, which pipeline; progress is its jobs'."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="generation_runs")
    pipeline = models.CharField(max_length=50)
    pipeline_version = models.CharField(max_length=64)
    config = models.JSONField(default=dict)
    jobs = models.ManyToManyField(GenerationJob, related_name="runs", blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.study.slug} · {self.pipeline} · {self.created_at:%Y-%m-%d %H:%M}"


class AnswerJob(TimeStamped):
    """The work of answering one clinical question (literature.Question) with one
    engine, regime and pipeline version: queries, retrieval, relevance, article
    summaries, a cited synthesis. Unique per (question, engine, regime, version), like
    GenerationJob: asking again finds this row instead of writing a second answer."""

    Status = GenerationJob.Status

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    question = models.ForeignKey("literature.Question", on_delete=models.PROTECT, related_name="answer_jobs")
    engine = models.CharField(max_length=20)
    regime = models.CharField(max_length=20)
    pipeline_version = models.CharField(max_length=64, help_text="Hash of model, parameters and prompt versions.")
    config = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=GenerationJob.Status.choices, default=GenerationJob.Status.PENDING)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    tries = models.PositiveIntegerField(default=0)
    requeued = models.BooleanField(
        default=False, help_text="Queued a second time because no worker took it (RUN_CLAIM_TIMEOUT)."
    )
    retrieval = models.ForeignKey(
        "literature.Retrieval", on_delete=models.PROTECT, null=True, blank=True, related_name="answer_jobs"
    )
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, null=True, blank=True, related_name="answer_jobs")
    result = models.JSONField(default=dict, blank=True, help_text="Queries, relevance, article summaries: the trace.")
    skip_reason = models.TextField(blank=True)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["question", "engine", "regime", "pipeline_version"], name="answerjob_unique_question_version"
            ),
        ]
        ordering = ["question", "engine", "regime"]

    def __str__(self) -> str:
        return f"{self.question.key} · {self.engine}/{self.regime}@{self.pipeline_version[:10]}"


class QueuedRun(TimeStamped):
    """What an evaluator run and a rubric-judge run record of their worker: whether the
    work is queued, running, done or failed (and why), the worker's heartbeat while it
    runs, and whether it was queued a second time because no worker took it."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for a worker"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="While running: renewed every third of RUN_LEASE by the worker."
    )
    requeued = models.BooleanField(
        default=False, help_text="Queued a second time because no worker took it (RUN_CLAIM_TIMEOUT)."
    )

    class Meta:
        abstract = True


class JudgeRun(QueuedRun):
    """An LLM answering a study's own rubric (generation.judging): one model, prompt and
    settings. Unique per (study, version): running again with the same settings resumes
    this run; other settings make a new run, and old answers stay."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="judge_runs")
    model = models.CharField(max_length=200)
    version = models.CharField(max_length=64, help_text="Hash of model, parameters, prompt and rubric versions.")
    config = models.JSONField(default=dict)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "version"], name="judgerun_unique_study_version")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.study.slug} · judge {self.model}@{self.version[:10]}"

    @property
    def rater_name(self) -> str:
        """How the judge is named beside people in agreement tables (never a user)."""
        return f"judge:{self.model}@{self.version[:8]}"


class JudgeAnswer(TimeStamped):
    """The judge's answers for one summary, validated by the rubric like a person's. A
    refused, malformed or invalid answer is kept as such, with why; never as a score."""

    class Status(models.TextChoices):
        VALID = "valid", "Valid"
        INVALID = "invalid", "Refused by the rubric"
        FAILED = "failed", "No usable answer"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="answers")
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="judge_answers")
    status = models.CharField(max_length=16, choices=Status.choices)
    answers = models.JSONField(default=dict, blank=True)
    rationales = models.JSONField(default=dict, blank=True)
    raw = models.TextField(blank=True, help_text="The model's answer as it came.")
    error = models.TextField(blank=True)
    call = models.ForeignKey("LLMCall", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    orders = models.JSONField(
        default=list,
        blank=True,
        help_text="A comparison item: the judge's answer in each order it was asked (shown, status, answers, raw).",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "summary"], name="judgeanswer_unique_run_summary")]
        ordering = ["run", "summary"]

    def __str__(self) -> str:
        return f"{self.run} · {self.summary.key}: {self.status}"


class EvaluationRun(QueuedRun):
    """One automatic evaluator (generation.evaluators) over a study's summaries, with one
    version of its settings. Unique per (study, evaluator, version): running again with
    the same settings resumes it; other settings make a new run (scores are never
    recomputed silently)."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="evaluation_runs")
    evaluator = models.CharField(max_length=64)
    version = models.CharField(max_length=64)
    config = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "evaluator", "version"], name="evaluationrun_unique_version")
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.study.slug} · {self.evaluator}@{self.version[:10]}"


class EvaluationScore(TimeStamped):
    """One score of one summary by an evaluation run, with its provenance (the call, the
    rationale). A failed score keeps why and has no value."""

    class Status(models.TextChoices):
        OK = "ok", "Scored"
        NOT_APPLICABLE = "na", "N/A"
        FAILED = "failed", "No usable answer"

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="scores")
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="evaluation_scores")
    name = models.CharField(max_length=100, help_text="e.g. population, evidence")
    value = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices)
    rationale = models.TextField(blank=True)
    error = models.TextField(blank=True)
    call = models.ForeignKey("LLMCall", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "summary", "name"], name="evaluationscore_unique_name"),
            models.CheckConstraint(
                condition=Q(status="ok", value__isnull=False) | (~Q(status="ok") & Q(value__isnull=True)),
                name="evaluationscore_value_iff_ok",
            ),
        ]
        ordering = ["run", "summary", "name"]

    def __str__(self) -> str:
        return f"{self.summary.key} {self.name}={self.value}"


class LLMCall(TimeStamped):
    """One HTTP attempt at the LLM endpoint (a retried call is several rows)."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(GenerationJob, on_delete=models.CASCADE, null=True, blank=True, related_name="llm_calls")
    answer_job = models.ForeignKey(AnswerJob, on_delete=models.CASCADE, null=True, blank=True, related_name="llm_calls")
    step = models.CharField(max_length=64, help_text="Pipeline step, e.g. generate, rescue:real, verify_claim.")
    attempt = models.PositiveIntegerField(default=1)
    prompt_id = models.CharField(max_length=64)
    prompt_version = models.CharField(max_length=64)
    endpoint = models.CharField(max_length=500)
    model = models.CharField(max_length=200)
    messages = models.JSONField()
    params = models.JSONField(default=dict)
    response_text = models.TextField(blank=True)
    logprobs = models.JSONField(null=True, blank=True)
    finish_reason = models.CharField(max_length=32, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency = models.FloatField(help_text="Seconds.")
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True, help_text="USD")
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    well_formed = models.BooleanField(
        null=True, blank=True, help_text="The answer had the shape asked for (empty: not judged, or no answer)."
    )
    usable = models.BooleanField(null=True, blank=True, help_text="The step that asked could use the answer.")
    problem = models.TextField(
        blank=True, help_text="Why the answer could not be used, and what was cleaned out of it, in words."
    )

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = "LLM call"

    def __str__(self) -> str:
        return f"{self.step} #{self.attempt} ({self.model})"
