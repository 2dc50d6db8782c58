"""Dataset exports and JSON Lines imports over the API (study admins): start, poll,
download. The runs are kept by datasets.export_runs and datasets.import_runs; their
status is answered as every run's is (core.run_views).
"""

from __future__ import annotations

import json

from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.views import APIView

from annotate import permissions
from annotate.api.common import (
    FakeViewMixin,
)
from core.run_views import RunKind, RunViews
from datasets import export_runs, import_runs
from datasets.tasks import run_api_export_task, run_api_import_task


class ExportSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(export_runs.STATUSES)
    formats = serializers.ListField(child=serializers.ChoiceField(export_runs.FORMATS))
    phase = serializers.CharField(help_text="initial, post_discussion or all")
    include_calibration = serializers.BooleanField()
    include_restricted = serializers.BooleanField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per table.")
    withheld_sources = serializers.ListField(
        child=serializers.CharField(), help_text="Sources exported as identifiers only (licence)."
    )
    progress = serializers.IntegerField(help_text="Files of the dataset folder stored so far.")
    download = serializers.SerializerMethodField()

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_download(self, obj: export_runs.ExportStatus) -> str | None:
        if obj.status != "done":
            return None
        url = reverse("api:export-download", kwargs={"slug": obj.study, "export_id": obj.id})
        return self.context["request"].build_absolute_uri(url)


class ExportCreateSerializer(serializers.Serializer):
    formats = serializers.ListField(
        child=serializers.ChoiceField(export_runs.FORMATS), default=list(export_runs.FORMATS), min_length=1
    )
    phase = serializers.ChoiceField(export_runs.PHASES, default="all")
    include_calibration = serializers.BooleanField(default=False)
    include_restricted = serializers.BooleanField(
        default=False, help_text="Also export the text of sources whose licence does not allow a CC BY release."
    )


EXPORT_RUNS = RunKind(serializer=ExportSerializer, location="api:export-detail", id_kwarg="export_id")


class ExportList(RunViews, FakeViewMixin, generics.GenericAPIView):
    """Study admins: the study's dataset exports (newest first), and starting one."""

    serializer_class = ExportSerializer
    run_kind = EXPORT_RUNS

    @extend_schema(responses=ExportSerializer(many=True))
    def get(self, request, slug):
        study = permissions.study_for_admin(request, slug)
        page = self.paginate_queryset(export_runs.list_exports(study=study))
        return self.get_paginated_response(ExportSerializer(page, many=True, context={"request": request}).data)

    @extend_schema(
        request=ExportCreateSerializer,
        responses={202: ExportSerializer},
        description="Start an export (docs/api.md). Answers 202 with its status and a Location to poll; "
        "download it once `status` is done.",
    )
    def post(self, request, slug):
        study = permissions.study_for_admin(request, slug)
        body = ExportCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        status = export_runs.start_export(
            study=study, requested_by=request.user, enqueue=run_api_export_task.delay, **body.validated_data
        )
        return self.run_started(request, status, slug=study.slug)


class ExportDetail(RunViews, APIView):
    run_kind = EXPORT_RUNS

    @extend_schema(responses=ExportSerializer, description="Study admins: poll an export.")
    def get(self, request, slug, export_id):
        study = permissions.study_for_admin(request, slug)
        return self.run_status(request, export_runs.get_export(study=study, export_id=export_id))


class ExportRetry(RunViews, APIView):
    run_kind = EXPORT_RUNS

    @extend_schema(
        request=None,
        responses={202: ExportSerializer},
        description="Study admins: start a new export with the options of a failed one (its worker died, "
        "the task queue was unavailable). 409 unless the export failed.",
    )
    def post(self, request, slug, export_id):
        study = permissions.study_for_admin(request, slug)
        status = export_runs.retry_export(
            study=study, export_id=export_id, requested_by=request.user, enqueue=run_api_export_task.delay
        )
        return self.run_started(request, status, slug=study.slug)


class ZipRenderer(BaseRenderer):
    """Lets clients ask for application/zip; errors still go out as JSON text."""

    media_type = "application/zip"
    format = "zip"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, bytes) else json.dumps(data).encode()


class ExportDownload(APIView):
    renderer_classes = [JSONRenderer, ZipRenderer]

    @extend_schema(
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
        description="Study admins: the dataset folder as a zip (409 until the export is done).",
    )
    def get(self, request, slug, export_id):
        study = permissions.study_for_admin(request, slug)
        archive = export_runs.export_archive(study=study, export_id=export_id)  # after the permission check
        name = f"{study.slug}-dataset-{export_id}.zip"
        return FileResponse(archive, as_attachment=True, filename=name, content_type="application/zip")


# --- imports ------------------------------------------------------------------------


class ImportCountsField(serializers.DictField):
    child = serializers.DictField(child=serializers.IntegerField())


class ImportSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(import_runs.STATUSES)
    file_name = serializers.CharField()
    size_bytes = serializers.IntegerField()
    requested_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True, help_text="Why it failed; nothing was imported then.")
    error_line = serializers.IntegerField(allow_null=True, help_text="The line of the file that failed.")
    error_field = serializers.CharField(allow_null=True, help_text="The field of that line that failed.")
    counts = ImportCountsField(help_text='Per record type: {"created": n, "updated": n, "unchanged": n}.')
    settings_changed = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField(allow_blank=True)),
        help_text='Every study setting the file\'s study line changed: {"study", "field", "before", "after"}.',
    )
    progress = serializers.IntegerField(help_text="Lines of the file read so far.")


class ImportUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="JSON Lines (docs/import-format.md): sources, summaries, claims and findings."
    )


IMPORT_RUNS = RunKind(serializer=ImportSerializer, location="api:import-detail", id_kwarg="import_id")


class ImportList(RunViews, FakeViewMixin, generics.GenericAPIView):
    """Study admins: the study's imports (newest first), and uploading one."""

    serializer_class = ImportSerializer
    run_kind = IMPORT_RUNS

    @extend_schema(responses=ImportSerializer(many=True))
    def get(self, request, slug):
        study = permissions.study_for_admin(request, slug)
        page = self.paginate_queryset(import_runs.list_imports(study=study))
        return self.get_paginated_response(ImportSerializer(page, many=True).data)

    @extend_schema(
        request={"multipart/form-data": ImportUploadSerializer},
        responses={202: ImportSerializer},
        description="Import a JSON Lines file into this study (docs/import-format.md): every record must "
        "name this study, and the file may not hold study records. All or nothing. Answers 202 with the "
        "run's status and a Location to poll; without a Celery broker the run is already finished.",
    )
    def post(self, request, slug):
        study = permissions.study_for_admin(request, slug)
        limit = import_runs.max_import_bytes()
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if declared.isdigit() and int(declared) > limit + 64 * 1024:  # the file plus its multipart headers
            raise import_runs.ImportTooLargeError(
                f"The file is larger than the import limit of {limit:,} bytes (MAX_IMPORT_BYTES)."
            )
        body = ImportUploadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["file"]
        status = import_runs.start_import(
            study=study,
            requested_by=request.user,
            upload=upload,
            file_name=upload.name,
            enqueue=run_api_import_task.delay,
        )
        return self.run_started(request, status, slug=study.slug)


class ImportDetail(RunViews, APIView):
    run_kind = IMPORT_RUNS

    @extend_schema(responses=ImportSerializer, description="Study admins: poll an import.")
    def get(self, request, slug, import_id):
        study = permissions.study_for_admin(request, slug)
        return self.run_status(request, import_runs.get_import(study=study, import_id=import_id))


class ImportRetry(RunViews, APIView):
    run_kind = IMPORT_RUNS

    @extend_schema(
        request=None,
        responses={202: ImportSerializer},
        description="Study admins: run a failed import again from the file as uploaded (kept for "
        "FILE_RETENTION_DAYS). 409 unless the import failed.",
    )
    def post(self, request, slug, import_id):
        study = permissions.study_for_admin(request, slug)
        status = import_runs.retry_import(study=study, import_id=import_id, enqueue=run_api_import_task.delay)
        return self.run_started(request, status, slug=study.slug)
