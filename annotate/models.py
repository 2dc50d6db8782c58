"""The nouns of the platform: studies, sources, summaries, claims, rubrics,
assignments and the human answers (revisions, ratings, rationales).

Human work (revisions, ratings, rationales) is never deleted by a cascade: every
foreign key that leads to it is PROTECT, and a changed answer is a new revision.
"""

import secrets
import uuid
from collections.abc import Iterable
from typing import NamedTuple

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from core.models import TimeStamped
from core.text_validation import length_problem


class Rubric(TimeStamped):
    """One immutable version of a rubric definition (see docs/rubric-format.md).

    A changed definition is stored as a new version; answers keep pointing at the
    version they answered.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    key = models.SlugField(max_length=64)
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    definition = models.JSONField()
    content_hash = models.CharField(max_length=64)
    # Who may publish new versions of the key (with superusers): the account that
    # uploaded its first version, copied to every later one. None for the built-in
    # rubrics, `manage.py load_rubric` and keys stored before keys had owners.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="rubrics",
        help_text="Who may publish new versions of this key (besides superusers); none: superusers only.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["key", "version"], name="rubric_unique_key_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="rubric_version_positive"),
        ]
        ordering = ["key", "version"]

    def __str__(self) -> str:
        return f"{self.key} v{self.version}"


class Study(TimeStamped):
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True)
    guidelines = models.TextField(blank=True, help_text="Shown to raters above the rubric.")
    licence = models.CharField(max_length=100, blank=True, help_text="Licence of the ratings, e.g. CC-BY-4.0.")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="studies")
    assisted = models.BooleanField(
        default=False,
        help_text="Assisted condition: raters see the pipeline's claim-by-claim verification (never the generator).",
    )
    min_seconds_per_item = models.PositiveIntegerField(
        default=5,
        help_text="The quality monitor's absolute floor: an item submitted in less active time is too fast.",
    )
    # Empty: each rater's own choice (the switcher, else the browser's language).
    language = models.CharField(
        max_length=8,
        blank=True,
        default="",
        choices=settings.LANGUAGES,
        help_text="The language of the raters' pages for this study, unless a rater picks another (docs/languages.md).",
    )

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.title


class StudySettingChange(models.Model):
    """One change of a study's setting (title, guidelines, licence, ...), from its
    settings page, the Django admin or an import's `study` line: who, when, which field, before and after.
    A record of what raters were told, so it outlives the account that made it
    (SET_NULL) and keeps its study from being deleted (PROTECT)."""

    class Via(models.TextChoices):
        PAGE = "page", "Settings page"
        IMPORT = "import", "Import"
        ADMIN = "admin", "Django admin"
        ONBOARDING = "onboarding", "Onboarding page"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="setting_changes")
    field = models.CharField(max_length=40)
    before = models.TextField(blank=True)
    after = models.TextField(blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    via = models.CharField(max_length=10, choices=Via.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.study} {self.field} changed"


def new_order_seed() -> int:
    """A random seed for a new member's queue order (the admin and the members page never ask for one)."""
    return secrets.randbelow(2**31)


class StudyMembership(TimeStamped):
    """A person's role in one study; raters also get their own queue-order seed."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Study admin"
        RATER = "rater", "Rater"
        VIEWER = "viewer", "Viewer"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    order_seed = models.BigIntegerField(
        default=new_order_seed, help_text="Seed of this person's randomised queue order (chosen at random)."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "user", "role"], name="membership_unique_study_user_role"),
        ]

    def __str__(self) -> str:
        return f"{self.user} as {self.role} in {self.study}"


class Sentence(NamedTuple):
    """A sentence of a source: its place, its character span of Source.text, its text
    (that span) and the reference id it came from (e.g. PMC546184; "" when none)."""

    index: int
    start: int
    end: int
    text: str
    ref: str


MAX_REF_CHARS = 100


def sentence_spans(text: str, sentences: Iterable[tuple]) -> list[list]:
    """Source.sentence_spans for `text`, from (start, end, ref) or (start, end, text, ref)
    tuples; raises ValueError naming the first sentence that is not a span of `text`
    (in order, not overlapping, not empty), whose given text is not that span, or whose
    ref is not a string of at most MAX_REF_CHARS characters."""
    spans, previous_end, size = [], 0, len(text)
    for i, sentence in enumerate(sentences):
        if len(sentence) == 4:
            start, end, said, ref = sentence
        else:
            (start, end, ref), said = sentence, None
        if type(start) is not int or type(end) is not int or not previous_end <= start < end <= size:
            raise ValueError(f"sentence {i}: {start!r}-{end!r} is not a span of the text after the one before it")
        if said is not None and text[start:end] != said:
            raise ValueError(f"sentence {i}: its text is not the text's characters {start}-{end}")
        if not isinstance(ref, str) or len(ref) > MAX_REF_CHARS:
            raise ValueError(f"sentence {i}: ref must be a string of at most {MAX_REF_CHARS} characters")
        spans.append([start, end, ref])
        previous_end = end
    return spans


class Source(TimeStamped):
    """The context a summary was written from: ordered sentences with reference ids."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # no index of its own: the unique (study, key) index starts with it (annotate 0016)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="sources", db_index=False)
    key = models.CharField(max_length=200, help_text="Import key, unique within the study.")
    title = models.CharField(max_length=1000, blank=True)
    text = models.TextField(help_text="The whole context; sentences are character spans of it.")
    # The sentences as [start, end, ref] character spans of `text`, in order (see
    # Sentence). One JSON value in the source's own row, not a row per sentence: a
    # source's sentences are written once with its text and read whole (the
    # harness's 500-task import wrote 12,000 sentence rows, a third of its time).
    sentence_spans = models.JSONField(
        default=list, blank=True, help_text="[start, end, ref] per sentence: character spans of text, in order."
    )
    external_ids = models.JSONField(default=dict, blank=True, help_text="e.g. pmcid, pmid, doi")
    licence = models.CharField(max_length=200, blank=True)
    licence_url = models.URLField(max_length=500, blank=True)
    attribution = models.TextField(blank=True)
    copyright = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="source_unique_study_key"),
        ]
        ordering = ["study", "key"]

    def __str__(self) -> str:
        return self.key

    @property
    def sentences(self) -> list["Sentence"]:
        """The sentences, in order, each with its text cut from `text`."""
        text = self.text
        return [
            Sentence(i, start, end, text[start:end], ref) for i, (start, end, ref) in enumerate(self.sentence_spans)
        ]

    def clean(self):
        super().clean()
        _check_text_length(self.text, "source")
        try:
            self.sentence_spans = sentence_spans(self.text, [tuple(s) for s in self.sentence_spans or ()])
        except (TypeError, ValueError) as exc:
            # On the text: the admin shows the sentences without a field of their own, and
            # a changed text is what makes them no longer fit.
            raise ValidationError({"text": f"the source's sentences do not fit this text: {exc}"}) from None


class Finding(TimeStamped):
    """A result reported by a source: an evidence span of its text with the
    intervention, comparator and outcome it is about (Evidence Inference prompts)."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="findings")
    index = models.PositiveIntegerField()
    external_id = models.CharField(max_length=100, blank=True)
    intervention = models.TextField()
    comparator = models.TextField(blank=True)
    outcome = models.TextField()
    label = models.CharField(max_length=100, blank=True, help_text="The reported result.")
    start = models.PositiveIntegerField(help_text="Evidence span in Source.text.")
    end = models.PositiveIntegerField()
    evidence = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "index"], name="finding_unique_source_index"),
            models.CheckConstraint(condition=Q(start__lt=F("end")), name="finding_start_before_end"),
        ]
        ordering = ["source", "index"]

    def __str__(self) -> str:
        return f"{self.source.key} finding {self.index}"


class Summary(TimeStamped):
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # no index of its own: the unique (study, key) index starts with it (annotate 0016)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="summaries", db_index=False)
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="summaries")
    key = models.CharField(max_length=200, help_text="Import key, unique within the study.")
    text = models.TextField()
    generator = models.CharField(max_length=200, help_text="Who or what wrote it. Never shown to raters.")
    metadata = models.JSONField(default=dict, blank=True)
    flags = models.JSONField(default=list, blank=True, help_text="Flags raised by the generation pipeline.")
    parent = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="revisions",
        help_text="The summary this one revises.",
    )

    class Meta:
        verbose_name_plural = "summaries"
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="summary_unique_study_key"),
        ]
        ordering = ["study", "key"]

    def __str__(self) -> str:
        return self.key

    def clean(self):
        super().clean()
        _check_text_length(self.text, "summary")


class Comparison(TimeStamped):
    """An item that shows one source and two (or more) of its summaries side by side
    (docs/pairwise.md).

    The rating machinery (assignments, revisions, expected answers, consensus, discussion
    notes, the answer that counts) addresses an item as a Summary, so a comparison has one
    of its own, `item`: a Summary row that stands for the comparison (empty text, generator
    ITEM_GENERATOR) and is never listed with the summaries rated one at a time. The
    summaries compared are its members, in a fixed order; the order shown to each rater is
    the assignment's `shown_order`.
    """

    ITEM_GENERATOR = "(comparison)"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="comparisons")
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="comparisons")
    key = models.CharField(max_length=200, help_text="Import key, unique within the study (with the summaries').")
    item = models.OneToOneField(Summary, on_delete=models.PROTECT, related_name="comparison")
    members = models.ManyToManyField(Summary, through="ComparisonMember", related_name="compared_in")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="comparison_unique_study_key"),
        ]
        ordering = ["study", "key"]

    def __str__(self) -> str:
        return self.key


class ComparisonMember(models.Model):
    """A summary of a comparison, and its place in the comparison's own order."""

    comparison = models.ForeignKey(Comparison, on_delete=models.PROTECT, related_name="member_rows")
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="+")
    index = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["comparison", "summary"], name="comparison_member_unique_summary"),
            models.UniqueConstraint(fields=["comparison", "index"], name="comparison_member_unique_index"),
        ]
        ordering = ["comparison", "index"]

    def __str__(self) -> str:
        return f"{self.comparison.key}[{self.index}]"


def _check_text_length(text: str, kind: str) -> None:
    """The size limits of core.text_validation, for the admin's forms."""
    problem = length_problem(text or "", kind)
    if problem is not None:
        raise ValidationError({"text": problem})


class Claim(TimeStamped):
    """A statement of a summary, its character span, the references it cites and a
    verification verdict."""

    class Verdict(models.TextChoices):
        # Translated: an assisted study's rating page shows them (docs/languages.md).
        UNVERIFIED = "unverified", _("Not verified")
        SUPPORTED = "supported", _("Supported")
        NOT_SUPPORTED = "not_supported", _("Not supported")

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="claims")
    index = models.PositiveIntegerField()
    text = models.TextField()
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)
    refs = models.JSONField(default=list, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, default=Verdict.UNVERIFIED)
    explanation = models.TextField(blank=True)
    probability = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["summary", "index"], name="claim_unique_summary_index"),
            models.CheckConstraint(
                condition=Q(start__isnull=True, end__isnull=True) | Q(start__lt=F("end")),
                name="claim_span_start_before_end",
            ),
            models.CheckConstraint(
                condition=Q(probability__isnull=True) | Q(probability__gte=0, probability__lte=1),
                name="claim_probability_0_1",
            ),
        ]
        ordering = ["summary", "index"]

    def __str__(self) -> str:
        return f"{self.summary.key} claim {self.index}"


class Batch(TimeStamped):
    """A set of assignments made in one go with one design (see docs/batches.md)."""

    class Kind(models.TextChoices):
        CALIBRATION = "calibration", "Calibration (pilot; excluded from analysis by default)"
        MAIN = "main", "Main"
        ADJUDICATION = "adjudication", "Adjudication"
        QUALIFICATION = "qualification", "Qualification (gold items a rater must pass first)"

    # Kinds whose answers stay out of the analysis (and out of an export unless calibration
    # is asked for): a pilot, and the screening of raters against gold.
    OUTSIDE_ANALYSIS = (Kind.CALIBRATION, Kind.QUALIFICATION)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="batches")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MAIN)
    design = models.JSONField(default=dict, help_text="The design and its parameters, as given.")
    seed = models.BigIntegerField()
    raters_per_item = models.PositiveSmallIntegerField(default=1, help_text="k: ratings each item should get.")
    blinded = models.BooleanField(default=True, help_text="Raters never see generator, model or pipeline flags.")
    training = models.BooleanField(
        default=False, help_text="Training round: after submitting, raters see the expected answers and explanation."
    )
    attention_every = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="One attention check after about every N items."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        verbose_name_plural = "batches"
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="batch_unique_study_name"),
        ]
        ordering = ["study", "created_at"]

    def __str__(self) -> str:
        return f"{self.study.slug}: {self.name}"


class Assignment(TimeStamped):
    """One rater asked to rate one summary.

    `version` increases on every write (draft, submit, skip, reopen); writers must
    send the version they read, so a stale write is refused (409), never lost.
    """

    class State(models.TextChoices):
        # Translated: the rater's queue and item pages show them (docs/languages.md).
        PENDING = "pending", _("Not started")
        IN_PROGRESS = "in_progress", _("In progress")
        SUBMITTED = "submitted", _("Submitted")
        SKIPPED = "skipped", _("Skipped")
        WITHDRAWN = "withdrawn", _("Withdrawn")

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="assignments")
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, null=True, blank=True, related_name="assignments")
    moved_to = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="moved_from",
        help_text="When withdrawn to move the item to another rater: the new assignment.",
    )
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="assignments")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments")
    position = models.PositiveIntegerField(help_text="Place in the rater's randomised queue.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    version = models.PositiveIntegerField(default=1)
    skip_reason = models.TextField(blank=True)
    first_opened_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    active_seconds = models.PositiveIntegerField(default=0)
    # The rating page's last draft write: which page, its number among that page's writes
    # and the version it produced. While that is still the current version, the same page's
    # newer write may replace it (services._claim_version); any other write moves it on.
    draft_writer = models.CharField(max_length=64, blank=True, default="")
    draft_seq = models.PositiveIntegerField(default=0)
    draft_version = models.PositiveIntegerField(default=0)
    shown_order = models.JSONField(
        default=list,
        blank=True,
        help_text="A comparison's summaries (uuids) as this rater is shown them, left to right; empty otherwise.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["summary", "rater"], condition=Q(batch__isnull=True), name="assignment_unique_summary_rater"
            ),
            models.UniqueConstraint(
                fields=["batch", "summary", "rater"],
                condition=Q(batch__isnull=False),
                name="assignment_unique_batch_summary_rater",
            ),
            # A rater has one live (not withdrawn) assignment of a summary, whatever the
            # batch: a second round on it (re-rating) reopens the same assignment as a new
            # phase, and create_batch skips pairs that already exist.
            models.UniqueConstraint(
                fields=["summary", "rater"],
                condition=~Q(state="withdrawn"),
                name="assignment_one_live_per_summary_rater",
            ),
            models.CheckConstraint(
                condition=~Q(state="skipped") | ~Q(skip_reason=""), name="assignment_skip_needs_reason"
            ),
        ]
        ordering = ["rater", "position"]

    def __str__(self) -> str:
        return f"{self.rater} → {self.summary.key}"


class Revision(TimeStamped):
    """One version of a rater's answers to an assignment.

    A draft is edited in place until it is submitted; a submitted revision is never
    changed again. Changing a submitted rating opens a new draft revision.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    class Phase(models.TextChoices):
        INITIAL = "initial", "Initial"
        POST_DISCUSSION = "post_discussion", "After discussion"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    assignment = models.ForeignKey(Assignment, on_delete=models.PROTECT, related_name="revisions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    phase = models.CharField(max_length=32, choices=Phase.choices, default=Phase.INITIAL)
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="revisions")
    assisted = models.BooleanField(default=False, help_text="The rater was shown the automatic claim checks.")
    submitted_at = models.DateTimeField(null=True, blank=True)
    shown_order = models.JSONField(
        default=list,
        blank=True,
        help_text="For a comparison: its summaries (uuids) left to right as shown when these answers were given.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "number"], name="revision_unique_assignment_number"),
            models.CheckConstraint(condition=Q(number__gte=1), name="revision_number_positive"),
            models.CheckConstraint(
                condition=Q(status="draft", submitted_at__isnull=True)
                | Q(status="submitted", submitted_at__isnull=False),
                name="revision_submitted_has_time",
            ),
        ]
        ordering = ["assignment", "number"]

    def __str__(self) -> str:
        return f"{self.assignment} r{self.number} ({self.status})"


class Rating(TimeStamped):
    """The answer to one rubric question within one revision.

    Scale answers are stored in `score` with the scale's bounds beside them, so the
    database itself refuses a score outside its scale; other kinds use `value`.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    revision = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="ratings")
    question = models.CharField(max_length=100)
    finding = models.ForeignKey(
        Finding,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="ratings",
        help_text="For per-finding questions: the finding this answer is about.",
    )
    score = models.IntegerField(null=True, blank=True)
    scale_min = models.IntegerField(null=True, blank=True)
    scale_max = models.IntegerField(null=True, blank=True)
    value = models.JSONField(null=True, blank=True, help_text="Non-scale answers (choices, text).")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["revision", "question"],
                condition=Q(finding__isnull=True),
                name="rating_unique_revision_question",
            ),
            models.UniqueConstraint(
                fields=["revision", "question", "finding"],
                condition=Q(finding__isnull=False),
                name="rating_unique_revision_question_finding",
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=F("scale_min"), score__lte=F("scale_max")),
                name="rating_score_within_scale",
            ),
        ]
        ordering = ["revision", "question"]

    def __str__(self) -> str:
        return f"{self.revision}: {self.question}"

    @property
    def answer(self):
        return self.score if self.score is not None else self.value


class Rationale(TimeStamped):
    """The rater's reason for one rating."""

    rating = models.OneToOneField(Rating, on_delete=models.PROTECT, related_name="rationale")
    text = models.TextField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(text=""), name="rationale_not_empty"),
        ]

    def __str__(self) -> str:
        return f"Rationale for {self.rating}"


class Span(TimeStamped):
    """A highlighted span answering a span question: character offsets (code points)
    into the summary or source text, the quoted text, answers to the span's own
    sub-questions and a rationale. A linked span (e.g. a contradiction) also points
    at a span of the source."""

    class Target(models.TextChoices):
        SUMMARY = "summary", "Summary"
        SOURCE = "source", "Source"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    revision = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="spans")
    question = models.CharField(max_length=100)
    index = models.PositiveIntegerField()
    target = models.CharField(max_length=16, choices=Target.choices)
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    text = models.TextField()
    link_start = models.PositiveIntegerField(null=True, blank=True)
    link_end = models.PositiveIntegerField(null=True, blank=True)
    link_text = models.TextField(blank=True)
    answers = models.JSONField(default=dict, blank=True)
    rationale = models.TextField(blank=True)
    summary_uuid = models.UUIDField(
        null=True, blank=True, help_text="In a comparison: the compared summary the offsets point into."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["revision", "question", "index"], name="span_unique_revision_question_index"
            ),
            models.CheckConstraint(condition=Q(start__lt=F("end")), name="span_start_before_end"),
            models.CheckConstraint(
                condition=Q(link_start__isnull=True, link_end__isnull=True) | Q(link_start__lt=F("link_end")),
                name="span_link_start_before_end",
            ),
        ]
        ordering = ["revision", "question", "index"]

    def __str__(self) -> str:
        return f"{self.revision}: {self.question} span {self.index}"

    # The columns an answer is made of: values(*ANSWER_FIELDS) rows give answer_from() what
    # it needs without building Span objects (the answers list and stream).
    ANSWER_FIELDS = (
        "target",
        "start",
        "end",
        "text",
        "answers",
        "rationale",
        "link_start",
        "link_end",
        "link_text",
        "summary_uuid",
    )

    def as_answer(self) -> dict:
        return Span.answer_from(vars(self))

    @staticmethod
    def answer_from(row) -> dict:
        """The span as the rubric takes it, from a mapping of ANSWER_FIELDS."""
        answer = {
            "target": row["target"],
            "start": row["start"],
            "end": row["end"],
            "text": row["text"],
            "answers": row["answers"],
            "rationale": row["rationale"],
        }
        if row.get("summary_uuid") is not None:
            answer["summary"] = str(row["summary_uuid"])
        if row["link_start"] is not None:
            answer["link"] = {
                "target": "source",
                "start": row["link_start"],
                "end": row["link_end"],
                "text": row["link_text"],
            }
        return answer


class DiscussionNote(TimeStamped):
    """A study admin's note on a disagreement about one item of a batch."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="notes")
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="discussion_notes")
    question = models.CharField(max_length=100, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    shared = models.BooleanField(
        default=False,
        help_text="Shown (without its author) to the item's raters when it is reopened for the re-rating round.",
    )

    class Meta:
        ordering = ["batch", "summary", "created_at"]

    def __str__(self) -> str:
        return f"Note on {self.summary.key}"


class ConsensusAnswer(TimeStamped):
    """The adjudicated answer to one question for one item, stored as its own record;
    a new decision is a new row, the latest counts."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="consensus_answers")
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="consensus_answers")
    question = models.CharField(max_length=100)
    value = models.JSONField(null=True)
    rationale = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["batch", "summary", "question", "created_at"]

    def __str__(self) -> str:
        return f"Consensus on {self.summary.key}: {self.question}"


class ExpectedAnswer(TimeStamped):
    """An admin's expected answers for one summary: a gold item (accuracy tracked),
    an attention check (mixed into queues), or a training item (shown after submit)."""

    class Purpose(models.TextChoices):
        GOLD = "gold", "Gold item"
        ATTENTION = "attention", "Attention check"
        TRAINING = "training", "Training item"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="expected_answers")
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="expected_answers")
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.GOLD)
    answers = models.JSONField(help_text="Question key -> expected answer (a subset of the rubric).")
    explanation = models.TextField(blank=True, help_text="Shown to raters in a training round.")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "summary"], name="expected_answer_unique_study_summary"),
        ]
        ordering = ["study", "summary"]

    def __str__(self) -> str:
        return f"{self.get_purpose_display()}: {self.summary.key}"


class QualificationRule(TimeStamped):
    """One version of a study's pass rule for its qualification batches
    (annotate/services/qualification.py, docs/qualification.md). A changed rule is a new row with
    the next version; attempts keep pointing at the version they were scored under. A study
    with a rule gates its raters: until they pass, only qualification and training items
    reach them."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="qualification_rules")
    version = models.PositiveIntegerField()
    threshold = models.FloatField(help_text="Share of (item, question) pairs that must match the gold answer, 0–1.")
    questions = models.JSONField(default=list, help_text="The question keys scored.")
    tolerances = models.JSONField(
        default=dict, blank=True, help_text="Scale question key -> how far from gold still counts as a match."
    )
    attempts_allowed = models.PositiveSmallIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "version"], name="qualification_rule_unique_study_version"),
            models.CheckConstraint(
                condition=Q(threshold__gte=0, threshold__lte=1), name="qualification_rule_threshold_0_1"
            ),
            models.CheckConstraint(condition=Q(attempts_allowed__gte=1), name="qualification_rule_attempts_positive"),
        ]
        ordering = ["study", "version"]

    def __str__(self) -> str:
        return f"{self.study.slug} qualification rule v{self.version}"


class QualificationAttempt(TimeStamped):
    """One scored attempt of a rater at a study's qualification: made when the rater has
    finished (submitted or skipped) every item of the study's qualification batches."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="qualification_attempts")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    number = models.PositiveIntegerField()
    rule = models.ForeignKey(QualificationRule, on_delete=models.PROTECT, related_name="attempts")
    matched = models.PositiveIntegerField()
    compared = models.PositiveIntegerField()
    score = models.FloatField(help_text="matched / compared (0 when nothing was compared).")
    passed = models.BooleanField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "rater", "number"], name="qualification_attempt_unique_study_rater_number"
            ),
            models.CheckConstraint(condition=Q(matched__lte=F("compared")), name="qualification_attempt_matched_le"),
        ]
        ordering = ["study", "rater", "number"]

    def __str__(self) -> str:
        return f"{self.rater} attempt {self.number} at {self.study.slug}"


class QualificationRetry(TimeStamped):
    """A study admin's decision to give a rater one more qualification attempt."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="qualification_retries")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["study", "rater", "created_at"]

    def __str__(self) -> str:
        return f"Retry for {self.rater} at {self.study.slug}"


class RaterPause(TimeStamped):
    """A study admin paused a rater (docs/monitoring.md): while the pause holds
    (`resumed_at` empty), the rater gets no new items in the study, cannot write answers
    there and sees a message instead. A resumed pause stays as the record of who paused
    whom, when and why."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="rater_pauses")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="pauses")
    reason = models.TextField(blank=True)
    paused_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    resumed_at = models.DateTimeField(null=True, blank=True)
    resumed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "rater"], condition=Q(resumed_at__isnull=True), name="rater_pause_one_open"
            ),
        ]
        ordering = ["study", "created_at"]

    def __str__(self) -> str:
        return f"{self.rater} paused in {self.study}"


class RaterExclusion(TimeStamped):
    """A study admin excluded a rater's answers in one batch from the analysis (the
    report and the export's answer tables), with the reason; the export keeps this
    record (docs/monitoring.md). Human work is never deleted: the answers stay stored."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="exclusions")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="exclusions")
    reason = models.TextField()
    excluded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "rater"], name="rater_exclusion_unique_batch_rater"),
            models.CheckConstraint(condition=~Q(reason=""), name="rater_exclusion_needs_reason"),
        ]
        ordering = ["batch", "created_at"]

    def __str__(self) -> str:
        return f"{self.rater} excluded from {self.batch}"


class ItemFlag(TimeStamped):
    """A rater's question to the study admins about one item (docs/monitoring.md), and
    the admin's answer. The answer shows to that rater on the item; when `shared`, it
    also shows to every rater of the study as a guideline note."""

    class Kind(models.TextChoices):
        # Translated: the rater's flag form shows them (docs/languages.md).
        GUIDELINE = "guideline", _("Question about the guidelines")
        BROKEN_SOURCE = "broken_source", _("Broken or unreadable source")
        OTHER = "other", _("Something else")

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="item_flags")
    assignment = models.ForeignKey(Assignment, on_delete=models.PROTECT, related_name="flags")
    raised_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="item_flags")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    note = models.TextField()
    answer = models.TextField(blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    shared = models.BooleanField(
        default=False, help_text="The answer is shown to every rater of the study as a guideline note."
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(note=""), name="item_flag_needs_note"),
            models.CheckConstraint(
                condition=Q(answered_at__isnull=True) | ~Q(answer=""), name="item_flag_answered_has_answer"
            ),
        ]
        ordering = ["study", "created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on {self.assignment_id}"


class ApiToken(models.Model):
    """An API token (`Authorization: Token <token>`), stored as the SHA-256 of the secret:
    the secret is shown once, when it is made, and cannot be read back from the database.
    The token dies with the password it was made under (`password_fingerprint` is the
    account's session hash then, which every password change alters), when it expires
    (API_TOKEN_TTL_HOURS after `created_at`) and when it is revoked (the row is deleted).
    annotate/services/accounts.py makes, checks and revokes them."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="What the owner called it (a client, a script).")
    prefix = models.CharField(max_length=12, help_text="The first characters of the token, to recognise it.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex.")
    password_fingerprint = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class LoginThrottle(models.Model):
    """Failed logins counted for one scope (annotate/throttling.py, docs/security.md):
    a (username, address) pair, an address, or a username. `locked_until` is when the
    pair or address lock, or the username's delay, ends; deleting the row lifts it."""

    class Scope(models.TextChoices):
        PAIR = "pair", "Username from one address"
        ADDRESS = "address", "Address"
        USERNAME = "username", "Username"

    scope = models.CharField(max_length=16, choices=Scope.choices)
    username = models.CharField(max_length=150, blank=True)
    address = models.CharField(max_length=64, blank=True)
    failures = models.PositiveIntegerField(default=0)
    window_start = models.DateTimeField()
    last_failure_at = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "username", "address"], name="login_throttle_unique_scope"),
        ]
        ordering = ["-last_failure_at"]
        verbose_name = "login lock"

    def __str__(self) -> str:
        who = " from ".join(part for part in (self.username, self.address) if part)
        return f"{self.get_scope_display()}: {who or '(none)'}"


# --- Onboarding: what a study asks of every rater (members and participants alike) before
# the first item, and each rater's answers (docs/recruitment.md). The rating app owns them
# because its assignment selector refuses items before the onboarding is through
# (annotate/selectors/onboarding.py); recruit's pages ask the steps. The tables keep the
# names they had in recruit, where they were made. Consent decisions are never
# overwritten: each is a row of its own (the version read, the decision, the time).


class Onboarding(TimeStamped):
    """What a study asks of a rater before the first item. Consent texts are versions of
    their own (ConsentVersion); `questionnaire` is a list of rubric question mappings
    (annotate/rubrics/), built on the onboarding page, never typed as JSON."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="onboarding")
    instructions = models.TextField(blank=True, help_text="Opened and acknowledged before the first item.")
    questionnaire = models.JSONField(default=list, blank=True)

    class Meta:
        db_table = "recruit_onboarding"

    def __str__(self) -> str:
        return f"Onboarding of {self.study}"


class ConsentVersion(TimeStamped):
    """One version of a study's consent text; an edit makes the next version."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="consent_versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="consent_version_unique_study_number"),
            models.CheckConstraint(condition=Q(number__gte=1), name="consent_version_number_positive"),
        ]
        ordering = ["study", "number"]
        db_table = "recruit_consentversion"

    def __str__(self) -> str:
        return f"{self.study.slug} consent v{self.number}"


class ConsentDecision(TimeStamped):
    """A rater accepted or declined one consent version, at `created_at`. Append-only."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="consent_decisions")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="consent_decisions")
    version = models.ForeignKey(ConsentVersion, on_delete=models.PROTECT, related_name="decisions")
    accepted = models.BooleanField()

    class Meta:
        ordering = ["study", "rater", "created_at", "pk"]
        db_table = "recruit_consentdecision"

    def __str__(self) -> str:
        return f"{self.rater} {'accepted' if self.accepted else 'declined'} {self.version}"


class OnboardingRecord(TimeStamped):
    """One rater's way through a study's onboarding: instructions opened and acknowledged,
    and the answers to the background questionnaire."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="onboarding_records")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="onboarding_records")
    instructions_opened_at = models.DateTimeField(null=True, blank=True)
    instructions_acknowledged_at = models.DateTimeField(null=True, blank=True)
    answers = models.JSONField(null=True, blank=True, help_text="Questionnaire key -> answer.")
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "rater"], name="onboarding_record_unique_study_rater"),
            models.CheckConstraint(
                condition=Q(instructions_acknowledged_at__isnull=True) | Q(instructions_opened_at__isnull=False),
                name="onboarding_acknowledged_after_opened",
            ),
        ]
        ordering = ["study", "created_at"]
        db_table = "recruit_onboardingrecord"

    def __str__(self) -> str:
        return f"{self.rater} in {self.study}"
