"""The admin's "Export dataset" action on studies. It lives here, not in annotate's
admin, so that annotate never imports datasets: the Study admin is registered by
annotate and extended with this action once both apps are loaded."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from annotate.admin import StudyAdmin
from annotate.models import Study
from datasets.export_runs import FORMATS, export_folder, start_export
from datasets.tasks import run_api_export_task


class PublishingStudyAdmin(StudyAdmin):
    actions = [*StudyAdmin.actions, "export_dataset"]

    # Publishing a study's data is a change to what the study releases: view-only staff
    # are not offered the action, and Django refuses it if they post it anyway.
    @admin.action(description="Export dataset (CC-BY)", permissions=["change"])
    def export_dataset(self, request, queryset):
        for study in queryset.select_related("rubric"):
            run = start_export(
                study=study, requested_by=request.user, formats=list(FORMATS), enqueue=run_api_export_task.delay
            )
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


admin.site.unregister(Study)
admin.site.register(Study, PublishingStudyAdmin)
