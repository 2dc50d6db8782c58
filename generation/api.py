"""REST API of the generation app: the progress of an asked question (generation.asking),
which the ask page polls. Study admins only."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate import permissions
from generation.asking import ask_status, get_asked_job


class AskStatusSerializer(serializers.Serializer):
    uuid = serializers.UUIDField()
    status = serializers.CharField(help_text="pending, running, ok, skipped or failed")
    finished = serializers.BooleanField()
    question = serializers.CharField()
    engine = serializers.CharField()
    regime = serializers.CharField()
    queries = serializers.ListField(child=serializers.DictField(), help_text='[{"query", "hits"}] in the order sent')
    problems = serializers.ListField(child=serializers.CharField(), help_text="query tries that searched nothing")
    retrieved = serializers.IntegerField(allow_null=True)
    to_judge = serializers.IntegerField(allow_null=True)
    relevance = serializers.ListField(
        child=serializers.DictField(), help_text='[{"identifier", "title", "relevant", "reason"}] as decided'
    )
    relevant = serializers.IntegerField()
    rerank = serializers.DictField(allow_null=True, help_text="the BM25 re-ranking above QUESTIONS_RERANK_ABOVE")
    citations = serializers.ListField(child=serializers.DictField(), help_text='[{"number", "reference"}]')
    article_summaries = serializers.ListField(
        child=serializers.DictField(), help_text='[{"number", "reference", "text"}]'
    )
    answer = serializers.DictField(allow_null=True, help_text='{"synthesis", "tldr"} once the job is ok')
    skip_reason = serializers.CharField(allow_blank=True)
    error = serializers.CharField(allow_blank=True)
    added = serializers.BooleanField(help_text="whether the answer was added to the study for rating")
    summary = serializers.UUIDField(allow_null=True)
    steps_done = serializers.IntegerField(help_text="grows with every step: poll until finished")


class AskStatus(APIView):
    @extend_schema(
        responses={200: AskStatusSerializer},
        description="Study admins. The steps of an asked question so far (docs/questions.md, Ask a question): "
        "queries and hits, relevance decisions with reasons, article summaries, the cited answer. Poll until "
        "`finished`. Every text is model output: show it as text, never as markup.",
    )
    def get(self, request, slug, uuid):
        study = permissions.study_for_admin(request, slug)
        return Response(AskStatusSerializer(ask_status(get_asked_job(study, uuid))).data)
