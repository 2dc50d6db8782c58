"""Arriving and leaving: crowd recruitment links and the participants who arrive through
them (docs/recruitment.md). A study's onboarding (consent, instructions, questionnaire) and
each rater's answers to it are annotate's models (annotate.models.Onboarding, ...): every
rater meets them, and the rating app checks them before an item.

A participant's panel identifiers are stored as given and leave the system only as the
study's pseudonyms (datasets export)."""

import uuid
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotate.models import Batch, Study
from core.models import TimeStamped


class RecruitmentLink(TimeStamped):
    """A signed link that lets panel participants in (docs/recruitment.md). Its batch
    (made with the link) holds the participants' assignments; `batch.raters_per_item` is
    k and `batch.design["pool"]` the summaries it hands out."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="recruitment_links")
    batch = models.OneToOneField(Batch, on_delete=models.PROTECT, related_name="recruitment_link")
    name = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    max_participants = models.PositiveIntegerField(help_text="Participants the link lets in, at most.")
    items_per_participant = models.PositiveSmallIntegerField()
    time_budget_minutes = models.PositiveIntegerField(help_text="From arrival; then the session ends.")
    lease_minutes = models.PositiveIntegerField(
        default=30, help_text="An absent participant's unfinished items go back to the pool after this long."
    )
    completion_url = models.URLField(max_length=500, help_text="e.g. https://app.prolific.com/submissions/complete")
    completion_code = models.CharField(max_length=64)
    screenout_code = models.CharField(
        max_length=64,
        blank=True,
        help_text="For declined consent, a failed qualification, a full or closed link; blank: no code.",
    )
    left_code = models.CharField(
        max_length=64, blank=True, help_text="For a participant who leaves; blank: the screen-out code."
    )
    full_message = models.CharField(
        max_length=500,
        default="This study has all the participants it needs. Thank you for your interest.",
        help_text="Shown to someone turned away (full, closed) when there is no screen-out code.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(items_per_participant__gte=1), name="link_items_positive"),
            models.CheckConstraint(condition=Q(max_participants__gte=1), name="link_participants_positive"),
            models.CheckConstraint(condition=Q(time_budget_minutes__gte=1), name="link_time_budget_positive"),
            models.CheckConstraint(condition=Q(lease_minutes__gte=1), name="link_lease_positive"),
        ]
        ordering = ["study", "created_at"]

    def __str__(self) -> str:
        return f"{self.study.slug}: {self.name}"


class Participant(TimeStamped):
    """A study-only account made by a recruitment link: no password, signed in by the
    link for one session; reaches nothing outside its study (recruit/middleware.py)."""

    class Panel(models.TextChoices):
        PROLIFIC = "prolific", "Prolific"
        GENERIC = "generic", "Other panel"

    class Outcome(models.TextChoices):
        ACTIVE = "", "Taking part"
        COMPLETED = "completed", "Completed"
        DECLINED = "declined", "Declined consent"
        SCREENED_OUT = "screened_out", "Screened out"
        LEFT = "left", "Left the study"
        TIMED_OUT = "timed_out", "Ran out of time"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="participant")
    link = models.ForeignKey(RecruitmentLink, on_delete=models.PROTECT, related_name="participants")
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="participants")
    panel = models.CharField(max_length=16, choices=Panel.choices)
    external_id = models.CharField(max_length=64, help_text="The panel's participant id, as given.")
    panel_study_id = models.CharField(max_length=64, blank=True)
    panel_session_id = models.CharField(max_length=64, blank=True)
    address = models.CharField(max_length=64, blank=True, help_text="Where the account was made from.")
    last_seen_at = models.DateTimeField()
    released_at = models.DateTimeField(
        null=True, blank=True, help_text="When an absence longer than the lease gave the open items back."
    )
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.ACTIVE, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    panel_status = models.CharField(
        max_length=32, blank=True, help_text="The panel's status of the submission (Prolific: AWAITING REVIEW, ...)."
    )
    panel_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["link", "external_id"], name="participant_unique_link_external_id"),
            models.CheckConstraint(
                condition=Q(outcome="", finished_at__isnull=True) | (~Q(outcome="") & Q(finished_at__isnull=False)),
                name="participant_finished_has_time",
            ),
        ]
        ordering = ["link", "created_at"]

    def __str__(self) -> str:
        return f"participant {self.pk} of {self.link}"


class ArrivalCount(models.Model):
    """New participant accounts made from one address in the current window (a rate
    limit on account creation, settings.RECRUIT_ARRIVALS_PER_ADDRESS)."""

    address = models.CharField(max_length=64, unique=True)
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.address}: {self.count}"


class LinkChange(models.Model):
    """An edit of a running link: who, when, and each changed field's value before and
    after ({"field": [before, after]}). Append-only."""

    link = models.ForeignKey(RecruitmentLink, on_delete=models.CASCADE, related_name="changes")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    changes = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["link", "-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.link} changed {', '.join(self.changes)}"


class PanelCall(models.Model):
    """One call to the panel's API (Prolific), with its outcome: shown on the participants
    page, so that no failure is silent. `path` never carries a query string."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="panel_calls")
    participant = models.ForeignKey(
        Participant, on_delete=models.SET_NULL, null=True, blank=True, related_name="panel_calls"
    )
    action = models.CharField(max_length=40)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=300)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="None: no answer received.")
    ok = models.BooleanField()
    message = models.TextField(blank=True)
    made_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.method} {self.path}: {self.status_code or 'no answer'}"


class BonusPayment(TimeStamped):
    """A bonus for one participant, recorded before any call to the panel (the intent),
    then created as a bulk bonus payment and paid exactly once: paying is claimed with a
    compare-and-set on `status` (created -> paying), and an outcome the call cannot tell
    (a timeout, a dropped connection, a 5xx) is `unconfirmed` until the panel's own record
    says whether it was paid (recruit/prolific.py)."""

    class Status(models.TextChoices):
        INTENDED = "intended", "Recorded, not sent yet"
        CREATED = "created", "Set up on the panel, not paid"
        PAYING = "paying", "Being paid"
        UNCONFIRMED = "unconfirmed", "Payment sent, not confirmed yet"
        PAID = "paid", "Paid"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    participant = models.ForeignKey(Participant, on_delete=models.PROTECT, related_name="bonuses")
    reason = models.CharField(max_length=200)
    amount_cents = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.INTENDED)
    panel_bonus_id = models.CharField(max_length=64, blank=True, help_text="The panel's bulk bonus payment id.")
    last_error = models.TextField(blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["participant", "reason"], name="bonus_unique_participant_reason"),
            models.CheckConstraint(condition=Q(amount_cents__gte=1), name="bonus_amount_positive"),
            models.CheckConstraint(condition=~Q(status="paid") | Q(paid_at__isnull=False), name="bonus_paid_has_time"),
        ]
        ordering = ["participant", "created_at"]

    def __str__(self) -> str:
        return f"bonus {self.amount_cents} for {self.participant}: {self.status}"

    @property
    def amount(self) -> Decimal:
        """In the study's currency (Prolific's unit), e.g. Decimal("1.50")."""
        return Decimal(self.amount_cents) / 100
