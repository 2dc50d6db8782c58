from django.contrib import admin

from planning.models import Protocol


@admin.register(Protocol)
class ProtocolAdmin(admin.ModelAdmin):
    """Read only: a frozen protocol is never edited (an amendment is a new version)."""

    list_display = ("study", "version", "frozen_at", "frozen_by", "sha256")
    readonly_fields = ("study", "version", "document", "sha256", "frozen_at", "frozen_by", "note")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
