"""The run state of dataset imports and exports, one row per run: what the API
and pages answer, which worker holds the run and until when (its lease), and why it failed.

A worker claims a run with one conditional UPDATE (pending, or running with its lease run
out) and renews its lease from a heartbeat thread (core.background.heartbeat); a run whose
lease ran out is queued again by the sweep and taken over by whichever worker claims it,
as the report and generation jobs do. The files (the upload, the export's folder and zip)
live in the storages of core.storage under <study slug>/<run id>/.
"""

import uuid

from django.db import models

from annotate.models import Study
from core.models import TimeStamped


class DatasetRun(TimeStamped):
    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for a worker"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    requested_by = models.CharField(max_length=150, help_text="The user name of who started it.")
    error = models.TextField(blank=True)
    counts = models.JSONField(default=dict, blank=True)
    progress = models.PositiveIntegerField(
        default=0, help_text="While running: lines read (imports) or files stored (exports) so far."
    )
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When it was last handed to the broker.")
    requeued = models.BooleanField(
        default=False, help_text="Queued a second time because no worker took it (RUN_CLAIM_TIMEOUT)."
    )
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the worker that last claimed it.")
    tries = models.PositiveIntegerField(default=0, help_text="How many times a worker claimed it.")
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="While running: renewed every third of RUN_LEASE by the worker."
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


class ExportRun(DatasetRun):
    formats = models.JSONField(default=list)
    phase = models.CharField(max_length=20, default="all")
    include_calibration = models.BooleanField(default=False)
    include_restricted = models.BooleanField(default=False)
    withheld_sources = models.JSONField(default=list, blank=True)

    class Meta(DatasetRun.Meta):
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="exportrun_status_heartbeat")]

    def __str__(self) -> str:
        return f"export {self.uuid} of {self.study_id} ({self.status})"


class ImportRun(DatasetRun):
    file_name = models.CharField(max_length=200)
    size_bytes = models.PositiveBigIntegerField()
    error_line = models.PositiveIntegerField(null=True, blank=True)
    error_field = models.CharField(max_length=200, blank=True)

    class Meta(DatasetRun.Meta):
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="importrun_status_heartbeat")]

    def __str__(self) -> str:
        return f"import {self.uuid} of {self.study_id} ({self.status})"


class Release(TimeStamped):
    """A numbered release of a finished export, kept with the study: the export's
    checksums, a changelog line and what changed since the release before; and where it
    was deposited (Zenodo: the deposition, the DOI). Never deleted while its export lives."""

    class Zenodo(models.TextChoices):
        NONE = "", "Not deposited"
        DRAFT = "draft", "Deposition started"
        PUBLISHED = "published", "Published"

    class Hub(models.TextChoices):
        NONE = "", "Not pushed"
        COMMITTED = "committed", "Committed, not yet tagged"
        TAGGED = "tagged", "Pushed and tagged"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="releases")
    export = models.ForeignKey(ExportRun, on_delete=models.PROTECT, related_name="releases")
    version = models.CharField(max_length=20)
    changelog = models.TextField()
    sha256sums = models.TextField(help_text="The export's SHA256SUMS, as released.")
    changes = models.JSONField(default=dict, blank=True, help_text="What changed since the release before.")
    created_by = models.CharField(max_length=150, help_text="The user name of who made it.")
    creators = models.JSONField(
        default=list, blank=True, help_text="Who the deposit names as creators: [{name, affiliation}], as entered."
    )
    zenodo_state = models.CharField(max_length=10, choices=Zenodo.choices, default=Zenodo.NONE, blank=True)
    zenodo_deposition = models.PositiveBigIntegerField(null=True, blank=True)
    zenodo_bucket = models.URLField(max_length=500, blank=True)
    zenodo_concept = models.CharField(max_length=40, blank=True)
    doi = models.CharField(max_length=200, blank=True)
    zenodo_error = models.TextField(blank=True)
    hub_repo = models.CharField(max_length=200, blank=True, help_text="owner/name of the Hub dataset repository.")
    hub_private = models.BooleanField(default=False)
    hub_state = models.CharField(max_length=10, choices=Hub.choices, default=Hub.NONE, blank=True)
    hub_commit = models.CharField(max_length=64, blank=True, help_text="The release's commit, once verified.")
    hub_url = models.URLField(max_length=500, blank=True)
    hub_error = models.TextField(blank=True)

    class Meta:
        ordering = ["study", "created_at"]
        constraints = [
            models.UniqueConstraint(fields=["study", "version"], name="release_unique_study_version"),
            models.CheckConstraint(condition=~models.Q(changelog=""), name="release_needs_changelog"),
        ]

    def __str__(self) -> str:
        return f"{self.study_id} release {self.version}"


class RemoteCall(models.Model):
    """One call to an outside service on a release's behalf, with its outcome."""

    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="calls")
    service = models.CharField(max_length=20)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=500)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    outcome = models.TextField()
    attempts = models.PositiveSmallIntegerField(default=1)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["release", "at", "pk"]

    def __str__(self) -> str:
        return f"{self.service} {self.method} {self.path}: {self.status or '-'} {self.outcome}"


class PublishRun(DatasetRun):
    """A push of a release to the Hub or its deposit on Zenodo, started from the releases
    page and run by a worker (datasets.publish_runs), never inside the web request."""

    class Target(models.TextChoices):
        HUB = "hub", "Hugging Face Hub"
        ZENODO = "zenodo", "Zenodo"

    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="runs")
    target = models.CharField(max_length=10, choices=Target.choices)
    options = models.JSONField(default=dict, blank=True, help_text="The repository or the creators, as entered.")

    class Meta(DatasetRun.Meta):
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="publishrun_status_heartbeat")]

    def __str__(self) -> str:
        return f"{self.target} run {self.uuid} of release {self.release_id} ({self.status})"
