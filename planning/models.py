from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotate.models import Study
from core.models import TimeStamped


class Protocol(TimeStamped):
    """A frozen analysis plan (planning.protocol): never edited; an amendment is a new
    version with a note saying why."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="protocols")
    version = models.PositiveIntegerField()
    document = models.JSONField()
    sha256 = models.CharField(max_length=64)
    frozen_at = models.DateTimeField(default=timezone.now)
    frozen_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    note = models.TextField(blank=True, help_text="Why this version amends the one before.")

    class Meta:
        ordering = ["study", "version"]
        constraints = [
            models.UniqueConstraint(fields=["study", "version"], name="protocol_unique_study_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="protocol_version_positive"),
            models.CheckConstraint(condition=Q(version=1) | ~Q(note=""), name="protocol_amendment_needs_note"),
        ]

    def __str__(self) -> str:
        return f"{self.study.slug} protocol v{self.version}"


class ReportLook(models.Model):
    """A study report computed while this protocol was the study's latest: when, and how
    many items were rated then (a look at the data before a fixed-n stopping rule is a
    deviation)."""

    protocol = models.ForeignKey(Protocol, on_delete=models.PROTECT, related_name="looks")
    at = models.DateTimeField()
    n_rated = models.PositiveIntegerField()

    class Meta:
        ordering = ["protocol", "at"]

    def __str__(self) -> str:
        return f"{self.protocol} looked at {self.at:%Y-%m-%d %H:%M} with {self.n_rated} rated"
