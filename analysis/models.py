"""Cached analysis results. Derived data only: deleting a row loses nothing but time."""

import uuid

from django.db import models
from django.db.models import Q


class AnalysisResult(models.Model):
    """The study report for one study and phase, valid for one state of the ratings.

    ``fingerprint`` summarises the submitted revisions the report was computed from
    (their count and newest change) and the report version; a new or changed rating
    gives a new fingerprint, so a stale report is never served.

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
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

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
