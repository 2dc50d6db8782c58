"""Django admin for staff. Human work (revisions, ratings, rationales) is read-only
here and cannot be deleted; the revision history of every assignment is visible."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from annotate.api_exports import FORMATS, export_folder, start_export
from annotate.models import (
    Assignment,
    Claim,
    Rating,
    Rationale,
    Revision,
    Rubric,
    Source,
    SourceSentence,
    Study,
    StudyMembership,
    Summary,
)


class ReadOnlyMixin:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Rubric)
class RubricAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["key", "version", "title", "created_at"]
    readonly_fields = ["uuid", "key", "version", "title", "definition", "content_hash", "created_at"]


class MembershipInline(admin.TabularInline):
    model = StudyMembership
    extra = 0
    fields = ["user", "role", "order_seed"]
    autocomplete_fields = ["user"]


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "rubric", "licence"]
    readonly_fields = ["uuid", "created_at", "updated_at"]
    inlines = [MembershipInline]
    actions = ["export_dataset"]

    # Publishing a study's data is a change to what the study releases: view-only staff
    # are not offered the action, and Django refuses it if they post it anyway.
    @admin.action(description="Export dataset (CC-BY)", permissions=["change"])
    def export_dataset(self, request, queryset):
        for study in queryset.select_related("rubric"):
            run = start_export(study=study, requested_by=request.user, formats=list(FORMATS))
            where = {"slug": study.slug, "export_id": run.id}
            self.message_user(
                request,
                format_html(
                    "Export {} of {} is {} (every format, restricted sources withheld) in {}: "
                    '<a href="{}">status</a>, <a href="{}">download (zip)</a> once it has finished.',
                    run.id,
                    study.slug,
                    run.status,
                    export_folder(study_slug=study.slug, export_id=run.id),
                    reverse("api:export-detail", kwargs=where),
                    reverse("api:export-download", kwargs=where),
                ),
            )


class SentenceInline(admin.TabularInline):
    model = SourceSentence
    extra = 0
    fields = ["index", "ref", "text", "start", "end"]
    readonly_fields = fields
    can_delete = False


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ["key", "study", "title", "licence"]
    list_filter = ["study", "licence"]
    search_fields = ["key", "title"]
    readonly_fields = ["uuid", "created_at", "updated_at"]
    inlines = [SentenceInline]


class ClaimInline(admin.TabularInline):
    model = Claim
    extra = 0
    fields = ["index", "text", "refs", "verdict", "explanation", "probability"]
    readonly_fields = fields
    can_delete = False


@admin.register(Summary)
class SummaryAdmin(admin.ModelAdmin):
    list_display = ["key", "study", "source", "generator", "created_at"]
    list_filter = ["study", "generator"]
    search_fields = ["key", "text"]
    readonly_fields = ["uuid", "created_at", "updated_at"]
    raw_id_fields = ["source", "parent"]
    inlines = [ClaimInline]


@admin.register(Claim)
class ClaimAdmin(admin.ModelAdmin):
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


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["summary", "rater", "study", "position", "state", "submitted_at", "active_seconds"]
    list_filter = ["study", "state", "rater"]
    list_select_related = ["summary", "rater", "study"]
    raw_id_fields = ["summary", "rater"]
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

    def has_view_permission(self, request, obj=None):
        return request.user.is_staff


@admin.register(Rationale)
class RationaleAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["rating", "text"]

    def has_view_permission(self, request, obj=None):
        return request.user.is_staff
