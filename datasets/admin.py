"""The admin's "Export dataset" action on studies. It lives here, not in annotate's
admin, so that annotate never imports datasets: the Study admin is registered by
annotate and extended with this action once both apps are loaded."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from annotate.admin import StudyAdmin
from annotate.models import Study
from datasets.export_runs import FORMATS, start_export
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
            status = reverse("datasets:export", kwargs=where)  # a page, not the API's JSON
            download = reverse("api:export-download", kwargs=where)
            # Without a broker the export has run by now; with one it has only started:
            # the message says which, in the words of that state.
            if run.status == "done":
                text = format_html(
                    "Export {} of {} is done (every format, restricted sources withheld): "
                    '<a href="{}">download (zip)</a>, <a href="{}">status</a>.',
                    run.id,
                    study.slug,
                    download,
                    status,
                )
                level = messages.SUCCESS
            elif run.status == "failed":
                text = format_html(
                    'Export {} of {} failed: {} (<a href="{}">status</a>).', run.id, study.slug, run.error, status
                )
                level = messages.ERROR
            else:
                text = format_html(
                    "Export {} of {} has started (every format, restricted sources withheld): "
                    '<a href="{}">its status</a>; <a href="{}">download (zip)</a> once it has finished.',
                    run.id,
                    study.slug,
                    status,
                    download,
                )
                level = messages.INFO
            self.message_user(request, text, level=level)


admin.site.unregister(Study)
admin.site.register(Study, PublishingStudyAdmin)
