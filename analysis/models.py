"""Cached study reports and their plots. Derived data only: deleting a row loses nothing
but time."""

import uuid

from django.db import models
from django.db.models import Q

from core.models import TimeStamped


class AnalysisResult(TimeStamped):
    """The study report for one study and phase, valid for one state of its inputs.

    ``fingerprint`` summarises everything the report is computed from (ratings, summaries,
    sources, claims, batches, evaluator and judge runs, questions, the rubric version:
    analysis.selectors.ReportInputs) and the report version; a change to any of them gives
    a new fingerprint, so a stale report is never served. ``inputs`` counts what the worker
    read when it computed the report, ``computed_at`` says when it finished.

    A running report is held under a lease (``lease_expires_at``) that its worker renews
    while it makes progress; one whose lease ran out has lost its worker (see
    analysis.services.run_study_report).
    """

    class Phase(models.TextChoices):
        INITIAL = "initial", "Initial"
        POST_DISCUSSION = "post_discussion", "After discussion"
        ALL = "all", "Both (newest answer)"

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey("annotate.Study", on_delete=models.CASCADE, related_name="analysis_results")
    phase = models.CharField(max_length=32, choices=Phase.choices)
    fingerprint = models.CharField(max_length=200)
    n_revisions = models.PositiveIntegerField(help_text="Submitted revisions behind the report.")
    inputs = models.JSONField(
        default=dict,
        blank=True,
        help_text="How many ratings, summaries, evaluator runs, ... it was computed from.",
    )
    computed_at = models.DateTimeField(null=True, blank=True, help_text="When the worker finished computing it.")
    plots_expected = models.PositiveSmallIntegerField(
        default=0, help_text="Plots the finished report has; the worker draws them after its numbers."
    )
    plots_done_at = models.DateTimeField(null=True, blank=True, help_text="When the last of its plots was stored.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done while running.")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    claimed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the worker computing it took it (identifies that worker's claim)."
    )
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="While running: the worker counts as gone if it has not renewed by then."
    )
    requeued = models.BooleanField(
        default=False, help_text="Queued a second time because no worker took it (RUN_CLAIM_TIMEOUT)."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "phase", "fingerprint"], name="analysis_result_unique_state"),
            models.CheckConstraint(condition=Q(progress__lte=100), name="analysis_result_progress_percent"),
            models.CheckConstraint(
                condition=~Q(status="running") | Q(claimed_at__isnull=False, lease_expires_at__isnull=False),
                name="analysis_result_running_has_lease",
            ),
        ]
        ordering = ["study", "phase", "-created_at"]

    def __str__(self) -> str:
        return f"{self.study} {self.phase} ({self.status})"


class ReportPlot(models.Model):
    """One plot of a finished report in one format, drawn by the worker that computed the
    report (analysis.plots), right after its numbers, and stored with it: the web process
    only serves bytes. In the database rather than on a disk: every machine of a deployment
    reads the same rows."""

    class Format(models.TextChoices):
        PNG = "png", "PNG"
        SVG = "svg", "SVG"

    result = models.ForeignKey(AnalysisResult, on_delete=models.CASCADE, related_name="plots")
    kind = models.CharField(max_length=32)
    subject = models.CharField(max_length=300)
    format = models.CharField(max_length=8, choices=Format.choices)
    image = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["result", "kind", "subject", "format"], name="report_plot_unique_image"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject}.{self.format}"
