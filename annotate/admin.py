"""Django admin for staff. Human work (revisions, ratings, rationales) is read-only
here and cannot be deleted; the revision history of every assignment is visible.

Every model admin keeps Django's own permission checks: a staff user sees a model only
with its view (or change) permission, as the study pages and the API give study access
to staff only through annotate.view_study / annotate.change_study
(annotate.selectors.access). Being staff alone shows nothing here either."""

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from annotate import study_settings
from annotate.forms import CheckedTextAdminForm
from annotate.models import (
    ApiToken,
    Assignment,
    Batch,
    Claim,
    ItemFlag,
    LoginThrottle,
    QualificationAttempt,
    QualificationRetry,
    QualificationRule,
    RaterExclusion,
    RaterPause,
    Rating,
    Rationale,
    Revision,
    Rubric,
    Source,
    Study,
    StudyMembership,
    StudySettingChange,
    Summary,
)
from annotate.services.rubrics import builtin_rubric_keys, load_builtin_rubric


class ReadOnlyMixin:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Rubric)
class RubricAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["key", "version", "title", "owner", "created_at"]
    list_select_related = ["owner"]
    readonly_fields = ["uuid", "key", "version", "title", "owner", "definition", "content_hash", "created_at"]


class MembershipInline(admin.TabularInline):
    """A study's members are part of the study: whoever may change studies
    (annotate.change_study, the permission that makes a staff user admin of every study)
    may enrol and remove them; whoever may view studies sees them. Searching accounts in
    the user field also takes auth.view_user (Django's autocomplete asks the User admin)."""

    model = StudyMembership
    extra = 0
    # The queue-order seed is drawn at random when the membership is made (the
    # form demanded an unexplained number); it is shown, not asked for.
    fields = ["user", "role", "order_seed"]
    readonly_fields = ["order_seed"]
    autocomplete_fields = ["user"]

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("annotate.view_study") or request.user.has_perm("annotate.change_study")

    def has_add_permission(self, request, obj=None):
        return request.user.has_perm("annotate.change_study")

    def has_change_permission(self, request, obj=None):
        return request.user.has_perm("annotate.change_study")

    def has_delete_permission(self, request, obj=None):
        return request.user.has_perm("annotate.change_study")


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    form = CheckedTextAdminForm
    list_display = ["slug", "title", "rubric", "licence"]
    # The monitor's floor is edited on the study's settings page only.
    readonly_fields = ["uuid", "created_at", "updated_at", "min_seconds_per_item"]
    inlines = [MembershipInline]
    actions: list[str] = []  # datasets.admin adds "Export dataset"

    def save_model(self, request, obj, form, change):
        if change:
            # A setting changed here is recorded as on the settings page (who, before, after).
            given = {f: form.cleaned_data[f] for f in form.changed_data if f in study_settings.SETTINGS}
            study_settings.update_study_settings(
                study=obj, values=given, changed_by=request.user, via=StudySettingChange.Via.ADMIN
            )
        super().save_model(request, obj, form, change)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "rubric" and self.has_add_permission(request):
            # The built-in rubrics are offered before any has been loaded from the command
            # line ("Add study" had an empty rubric list). Loading is idempotent:
            # an unchanged file is the stored version.
            for key in builtin_rubric_keys():
                load_builtin_rubric(key=key)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    form = CheckedTextAdminForm
    list_display = ["key", "study", "title", "licence"]
    list_filter = ["study", "licence"]
    search_fields = ["key", "title"]
    # The sentences are spans of the text, set by the importers: shown, not edited here
    # (Source.clean refuses a text they no longer fit).
    exclude = ["sentence_spans"]
    readonly_fields = ["uuid", "created_at", "updated_at", "sentence_list"]

    @admin.display(description="Sentences")
    def sentence_list(self, source: Source) -> str:
        return format_html(
            "<ol>{}</ol>",
            format_html_join(
                "",
                '<li value="{}">{} <span class="quiet">[{}] {}-{}</span></li>',
                ((s.index, s.text, s.ref, s.start, s.end) for s in source.sentences),
            ),
        )


class ClaimInline(admin.TabularInline):
    model = Claim
    extra = 0
    fields = ["index", "text", "refs", "verdict", "explanation", "probability"]
    readonly_fields = fields
    can_delete = False


@admin.register(Summary)
class SummaryAdmin(admin.ModelAdmin):
    form = CheckedTextAdminForm
    list_display = ["key", "study", "source", "generator", "created_at"]
    list_filter = ["study", "generator"]
    search_fields = ["key", "text"]
    readonly_fields = ["uuid", "created_at", "updated_at"]
    raw_id_fields = ["source", "parent"]
    inlines = [ClaimInline]


@admin.register(Claim)
class ClaimAdmin(admin.ModelAdmin):
    form = CheckedTextAdminForm
    list_display = ["summary", "index", "verdict", "probability"]
    list_filter = ["verdict"]
    raw_id_fields = ["summary"]


class RevisionInline(ReadOnlyMixin, admin.TabularInline):
    model = Revision
    extra = 0
    fields = ["number", "status", "phase", "rubric", "created_at", "submitted_at", "answers"]
    readonly_fields = fields
    show_change_link = True

    @admin.display(description="Answers")
    def answers(self, obj):
        rows = [
            (r.question, r.answer, getattr(getattr(r, "rationale", None), "text", ""))
            for r in obj.ratings.select_related("rationale")
        ]
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{}: {} {}</li>", rows))


@admin.register(Batch)
class BatchAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Batches are built and changed on the study pages (annotate.services.batches); here they are
    listed, so that an assignment's batch can be looked up (and found by name)."""

    list_display = ["name", "study", "kind", "blinded", "created_at"]
    list_filter = ["study", "kind"]
    list_select_related = ["study"]
    search_fields = ["name", "study__slug"]


@admin.register(QualificationRule, QualificationRetry)
class QualificationRecordAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Pass rules and retries are set on the study's Qualification page; listed here."""

    list_display = ["__str__", "study", "created_at"]
    list_filter = ["study"]


@admin.register(QualificationAttempt)
class QualificationAttemptAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Scored attempts (annotate/services/qualification.py): a record, never edited."""

    list_display = ["rater", "study", "number", "matched", "compared", "score", "passed", "created_at"]
    list_filter = ["study", "passed"]
    list_select_related = ["rater", "study"]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["summary", "rater", "study", "position", "state", "submitted_at", "active_seconds"]
    list_filter = ["study", "state", "rater"]
    list_select_related = ["summary", "rater", "study"]
    # An assignment's public uuid (what the API and the pages show), its summary's key or
    # its rater's username.
    search_fields = ["=uuid", "summary__key", "rater__username"]
    # Ids, not selects: a select of every assignment ("Moved to") or every batch of every
    # study grows with the data.
    raw_id_fields = ["summary", "rater", "batch", "moved_to"]
    readonly_fields = [
        "uuid",
        "version",
        "first_opened_at",
        "submitted_at",
        "active_seconds",
        "created_at",
        "updated_at",
    ]
    inlines = [RevisionInline]

    def has_delete_permission(self, request, obj=None):
        return False


class RatingInline(ReadOnlyMixin, admin.TabularInline):
    model = Rating
    extra = 0
    fields = ["question", "score", "value", "rationale_text", "created_at", "updated_at"]
    readonly_fields = fields

    @admin.display(description="Rationale")
    def rationale_text(self, obj):
        return getattr(getattr(obj, "rationale", None), "text", "")


@admin.register(Revision)
class RevisionAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["assignment", "number", "status", "phase", "submitted_at"]
    list_filter = ["status", "phase"]
    list_select_related = ["assignment__summary", "assignment__rater"]
    readonly_fields = [
        "uuid",
        "assignment",
        "number",
        "status",
        "phase",
        "rubric",
        "created_at",
        "updated_at",
        "submitted_at",
    ]
    inlines = [RatingInline]


@admin.register(Rationale)
class RationaleAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["rating", "text"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens: who has one, when it was made and last used. Only a digest is stored, so
    nothing here can be used to sign in; deleting a row revokes the token."""

    list_display = ["user", "name", "prefix", "created_at", "last_used_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "name", "prefix"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False  # made by POST /api/auth/token/, the account page or manage.py create_api_token

    def has_change_permission(self, request, obj=None):
        return False


class LockedNowFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "locked"

    def lookups(self, request, model_admin):
        return [("yes", "Locked or delayed now"), ("no", "Counting only")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "yes":
            return queryset.filter(locked_until__gt=now)
        if self.value() == "no":
            return queryset.exclude(locked_until__gt=now)
        return queryset


@admin.register(LoginThrottle)
class LoginThrottleAdmin(admin.ModelAdmin):
    """Login locks (annotate/throttling.py): every counter of failed logins, and whether it
    locks (a pair or an address) or delays (a username) now. "Lift" deletes the counter:
    the lock ends and its count starts again."""

    list_display = ["scope", "username", "address", "failures", "last_failure_at", "locked_until", "locked_now"]
    list_filter = [LockedNowFilter, "scope"]
    search_fields = ["username", "address"]
    readonly_fields = list_display[:-1]
    fields = readonly_fields
    actions = ["lift"]

    @admin.display(boolean=True, description="Locked now")
    def locked_now(self, obj):
        return bool(obj.locked_until and obj.locked_until > timezone.now())

    @admin.action(description="Lift the selected locks", permissions=["delete"])
    def lift(self, request, queryset):
        deleted, _ = queryset.delete()
        self.message_user(request, f"Lifted {deleted} lock(s).")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class RecordOnlyMixin(ReadOnlyMixin):
    """Records of a decision (docs/monitoring.md): read here, made on the study's pages.
    An exclusion recorded by mistake may be deleted here (the answers count again)."""


@admin.register(RaterPause)
class RaterPauseAdmin(RecordOnlyMixin, admin.ModelAdmin):
    list_display = ["rater", "study", "paused_by", "created_at", "resumed_at"]
    list_select_related = ["rater", "study", "paused_by"]


@admin.register(RaterExclusion)
class RaterExclusionAdmin(RecordOnlyMixin, admin.ModelAdmin):
    list_display = ["rater", "batch", "excluded_by", "created_at", "reason"]
    list_select_related = ["rater", "batch__study", "excluded_by"]

    def has_delete_permission(self, request, obj=None):
        return request.user.has_perm("annotate.delete_raterexclusion")


@admin.register(ItemFlag)
class ItemFlagAdmin(RecordOnlyMixin, admin.ModelAdmin):
    list_display = ["kind", "study", "raised_by", "created_at", "answered_at", "shared"]
    list_select_related = ["study", "raised_by"]
