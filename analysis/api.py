"""REST API of the analysis app: the cached study report, for study admins and viewers.

The report is the one the report page shows (analysis.services.request_study_report):
never computed in the request, but by a Celery worker (or, with no broker, a background
thread), and cached for the ratings as they are. Access follows annotate.permissions (viewers read dashboards).
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from analysis import services, tasks
from analysis.models import AnalysisResult
from analysis.report_json import report_from_payload, report_payload
from annotate import permissions
from core.run_views import RunKind, RunViews


class ReportField(serializers.JSONField):
    """The stored report as ``report.json`` holds it: written by analysis.report_json alone.
    Read back through the dataclasses, which also restores their key order (PostgreSQL's
    jsonb keeps its own)."""

    def to_representation(self, value):
        return None if value is None else report_payload(report_from_payload(value))


# The row's fields before and after its report, in the order the API answers them.
_RUN_FIELDS = ["uuid", "phase", "status", "progress", "n_revisions", "inputs", "computed_at", "error"]
_STAMPS = ["created_at", "updated_at"]


class AnalysisStatusSerializer(serializers.ModelSerializer):
    """Every field of the row but the report itself."""

    class Meta:
        model = AnalysisResult
        fields = [*_RUN_FIELDS, *_STAMPS]


class AnalysisResultSerializer(AnalysisStatusSerializer):
    result = ReportField(allow_null=True, help_text="The report (docs/analysis.md) once status is done.")

    class Meta(AnalysisStatusSerializer.Meta):
        fields = [*_RUN_FIELDS, "result", *_STAMPS]


class AnalysisQuery(serializers.Serializer):
    phase = serializers.ChoiceField(services.PHASES, default="all")


def _waiting(result: AnalysisResult) -> bool:
    return result.status in (AnalysisResult.Status.PENDING, AnalysisResult.Status.RUNNING)


# How long a finished report's rendered JSON is kept (per process, Django's cache).
ANSWER_CACHE_SECONDS = 3600


class StudyAnalysis(RunViews, APIView):
    run_kind = RunKind(serializer=AnalysisResultSerializer, waiting=_waiting)

    def run_status(self, request, status):
        """A finished report's JSON is rendered once and kept (megabytes for a large study),
        under a digest of every other field of its row: a recomputed report, a plot drawn or
        any change to the row gives a new key (and so does the media type asked for)."""
        if status.status != AnalysisResult.Status.DONE:
            return super().run_status(request, status)
        row = JSONRenderer().render(AnalysisStatusSerializer(status).data)
        digest = hashlib.sha256(row + request.accepted_media_type.encode()).hexdigest()
        key = f"report-api:{status.pk}:{digest}"

        def render() -> bytes:
            data = self.run_data(request, status)
            return request.accepted_renderer.render(data, request.accepted_media_type, self.get_renderer_context())

        body = cache.get_or_set(key, render, ANSWER_CACHE_SECONDS)
        return HttpResponse(body, content_type=request.accepted_renderer.media_type)

    @extend_schema(
        parameters=[AnalysisQuery],
        responses={200: AnalysisResultSerializer, 202: AnalysisResultSerializer},
        description="Study admins and viewers. 200 with the report when it is done (or with `error` when it "
        "failed: asking again computes it anew, except after its worker died: `error` then starts with "
        "'Stopped: the worker died' and a POST resumes it); 503 when the task queue is unavailable; "
        "202 while the report is still being computed "
        "(always the case on the first request for its inputs as they are): poll again. "
        "A report whose worker stopped is answered as failed, not as running for ever.",
    )
    def get(self, request, slug):
        study = permissions.study_for_viewer(request, slug)
        query = AnalysisQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        result = services.request_study_report(
            study=study, phase=query.validated_data["phase"], enqueue=tasks.enqueue_study_report
        )
        return self.run_status(request, result)

    @extend_schema(
        request=AnalysisQuery,
        responses={202: AnalysisResultSerializer},
        description="Study admins. Compute the report again even though it is cached (as the report page's "
        "Recompute button), or resume one whose worker died; a report already waiting or being computed is "
        "left to finish. 202: poll GET.",
    )
    def post(self, request, slug):
        study = permissions.study_for_admin(request, slug)
        query = AnalysisQuery(data=request.data)
        query.is_valid(raise_exception=True)
        result = services.recompute_study_report(
            study=study, phase=query.validated_data["phase"], enqueue=tasks.enqueue_study_report
        )
        return self.run_status(request, result)
