"""Adjudication in the API (study admins): the items where raters disagree, consensus
answers and discussion notes. Writes go through annotate.services.adjudication."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response

from annotate import permissions
from annotate.api.common import FakeViewMixin, SummaryRefSerializer, TextJSONField, UserField, query_params
from annotate.api.study_batches import PHASES
from annotate.models import Batch, ConsensusAnswer, DiscussionNote, Summary
from annotate.selectors.batches import (
    consensus_answers,
    discussion_notes,
    get_batch,
    get_batch_summary,
)
from annotate.selectors.contents import rubric_definition
from annotate.selectors.disagreements import batch_disagreements
from annotate.services import adjudication


class DisagreementSerializer(serializers.Serializer):
    summary = SummaryRefSerializer()
    question = serializers.CharField()
    spread = serializers.FloatField(help_text="Scale range, or number of differing answers or sentences.")
    values = serializers.DictField(child=serializers.JSONField(), help_text="Username -> answer.")


class DisagreementQuery(serializers.Serializer):
    question = serializers.CharField(required=False, help_text="Default: the rubric's first non-text question.")
    threshold = serializers.FloatField(default=1, min_value=0, max_value=1e9)
    phase = serializers.ChoiceField(PHASES, default="initial")
    sort = serializers.ChoiceField(["spread", "item"], default="spread")


class BatchDisagreementList(FakeViewMixin, generics.GenericAPIView):
    """Study admins: items where the raters' answers to one question differ (docs/batches.md)."""

    serializer_class = DisagreementSerializer

    @extend_schema(parameters=[DisagreementQuery], responses=DisagreementSerializer(many=True))
    def get(self, request, slug, batch_uuid):
        study = permissions.study_for_admin(request, slug)
        batch = get_batch(study, batch_uuid)
        query = query_params(DisagreementQuery, request)
        choices = [q.key for q in rubric_definition(study.rubric).questions if q.comparable]
        question = query.get("question") or (choices[0] if choices else "")
        if question not in choices:
            raise serializers.ValidationError({"question": f"must be one of {', '.join(choices)}"})
        rows = batch_disagreements(
            batch, question=question, threshold=query["threshold"], phase=query["phase"], sort=query["sort"]
        )
        data = [
            {
                "summary": row.summary,
                "question": row.question,
                "spread": row.spread,
                "values": row.values,
            }
            for row in rows
        ]
        page = self.paginate_queryset(data)
        return self.get_paginated_response(DisagreementSerializer(page, many=True).data)


class ConsensusSerializer(serializers.ModelSerializer):
    summary = SummaryRefSerializer()
    decided_by = UserField()
    rubric_version = serializers.IntegerField(source="rubric.version")

    class Meta:
        model = ConsensusAnswer
        fields = ["uuid", "summary", "question", "value", "rationale", "decided_by", "rubric_version", "created_at"]


class ConsensusCreateSerializer(serializers.Serializer):
    summary = serializers.UUIDField(help_text="An item of the batch.")
    question = serializers.CharField(max_length=100)
    value = TextJSONField(allow_null=True, help_text="An answer valid for the question, as a rater gives it.")
    rationale = serializers.CharField(required=False, allow_blank=True, default="")


class BatchItemQuery(serializers.Serializer):
    summary = serializers.UUIDField(required=False)
    question = serializers.CharField(required=False)


def _batch_item(batch: Batch, summary_uuid) -> Summary:
    summary = get_batch_summary(batch, summary_uuid)
    if summary is None:
        raise serializers.ValidationError({"summary": "This summary is not in the batch."})
    return summary


class BatchConsensusList(FakeViewMixin, generics.ListAPIView):
    """Study admins: adjudicated answers. A new decision is a new record; the latest per
    (summary, question) counts. The raters' answers are never changed."""

    serializer_class = ConsensusSerializer

    @extend_schema(parameters=[BatchItemQuery])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if self.is_schema_view():
            return ConsensusAnswer.objects.none()
        study = permissions.study_for_admin(self.request, self.kwargs["slug"])
        batch = get_batch(study, self.kwargs["batch_uuid"])
        return consensus_answers(batch, **query_params(BatchItemQuery, self.request))

    @extend_schema(request=ConsensusCreateSerializer, responses={201: ConsensusSerializer})
    def post(self, request, slug, batch_uuid):
        study = permissions.study_for_admin(request, slug)
        batch = get_batch(study, batch_uuid)
        body = ConsensusCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        answer = adjudication.record_consensus(
            batch=batch,
            summary=_batch_item(batch, d["summary"]),
            question=d["question"],
            value=d["value"],
            rationale=d["rationale"],
            decided_by=request.user,
        )
        return Response(ConsensusSerializer(answer).data, status=201)


class NoteSerializer(serializers.ModelSerializer):
    summary = SummaryRefSerializer()
    author = UserField()

    class Meta:
        model = DiscussionNote
        fields = ["uuid", "summary", "question", "author", "text", "shared", "created_at"]


class NoteCreateSerializer(serializers.Serializer):
    summary = serializers.UUIDField(help_text="An item of the batch.")
    question = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    text = serializers.CharField()
    shared = serializers.BooleanField(
        default=False, help_text="Show the note (without its author) to the item's raters when they re-rate it."
    )


class BatchNoteList(FakeViewMixin, generics.ListAPIView):
    """Study admins: discussion notes on the batch's items."""

    serializer_class = NoteSerializer

    @extend_schema(parameters=[BatchItemQuery])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if self.is_schema_view():
            return DiscussionNote.objects.none()
        study = permissions.study_for_admin(self.request, self.kwargs["slug"])
        batch = get_batch(study, self.kwargs["batch_uuid"])
        return discussion_notes(batch, **query_params(BatchItemQuery, self.request))

    @extend_schema(request=NoteCreateSerializer, responses={201: NoteSerializer})
    def post(self, request, slug, batch_uuid):
        study = permissions.study_for_admin(request, slug)
        batch = get_batch(study, batch_uuid)
        body = NoteCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        note = adjudication.add_discussion_note(
            batch=batch,
            summary=_batch_item(batch, d["summary"]),
            author=request.user,
            text=d["text"],
            question=d["question"],
            shared=d["shared"],
        )
        return Response(NoteSerializer(discussion_notes(batch).get(pk=note.pk)).data, status=201)
