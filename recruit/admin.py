from django.contrib import admin

from annotate.models import ConsentDecision, ConsentVersion
from recruit.models import Participant, RecruitmentLink


@admin.register(ConsentVersion)
class ConsentVersionAdmin(admin.ModelAdmin):
    list_display = ("study", "number", "created_at")
    readonly_fields = ("study", "number", "text", "created_by")


@admin.register(ConsentDecision)
class ConsentDecisionAdmin(admin.ModelAdmin):
    list_display = ("study", "rater", "version", "accepted", "created_at")
    readonly_fields = ("study", "rater", "version", "accepted")


@admin.register(RecruitmentLink)
class RecruitmentLinkAdmin(admin.ModelAdmin):
    list_display = ("study", "name", "enabled", "max_participants", "items_per_participant")


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("study", "link", "panel", "outcome", "created_at")
    readonly_fields = ("user", "link", "study", "external_id", "panel_study_id", "panel_session_id", "address")
