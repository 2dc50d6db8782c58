"""Batches and their progress (admins and viewers read), building a batch, withdrawing
and moving assignments, and the answers that count (study admins only). Writes go through
annotate.services.batches; adjudication's endpoints are annotate/api/adjudication.py.
"""

from __future__ import annotations

import json

from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import exceptions as drf_exceptions
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate import permissions
from annotate.api.common import (
    FakeViewMixin,
    SummaryRefSerializer,
    UserField,
    query_params,
)
from annotate.api.studies import SummaryQuery
from annotate.models import (
    Assignment,
    Batch,
    Revision,
    Summary,
)
from annotate.selectors.access import users_enrollable_by
from annotate.selectors.batches import (
    ANSWER_ORDER,
    answer_rows,
    batch_answer_revisions,
    batch_assignments,
    batch_progress,
    batches_for_study,
    get_batch,
    get_batch_assignment,
)
from annotate.services import adjudication, batches
from annotate.services.assignments import move_assignment, withdraw_assignment


class BatchSerializer(serializers.ModelSerializer):
    created_by = UserField(allow_null=True)
    n_assignments = serializers.IntegerField(read_only=True, help_text="Not withdrawn.")
    n_items = serializers.IntegerField(read_only=True)

    class Meta:
        model = Batch
        fields = [
            "uuid",
            "name",
            "kind",
            "design",
            "seed",
            "raters_per_item",
            "blinded",
            "training",
            "attention_every",
            "created_by",
            "created_at",
            "n_assignments",
            "n_items",
        ]


class RaterProgressSerializer(serializers.Serializer):
    rater = serializers.CharField(source="rater.username")
    assigned = serializers.IntegerField(help_text="Not withdrawn.")
    pending = serializers.IntegerField()
    in_progress = serializers.IntegerField()
    submitted = serializers.IntegerField()
    skipped = serializers.IntegerField()
    withdrawn = serializers.IntegerField()
    median_active_seconds = serializers.FloatField(allow_null=True)


class MissingItemSerializer(serializers.Serializer):
    summary = SummaryRefSerializer()
    submitted = serializers.IntegerField()
    planned = serializers.IntegerField()


class ProgressSerializer(serializers.Serializer):
    items = serializers.IntegerField()
    raters = RaterProgressSerializer(many=True)
    items_missing = MissingItemSerializer(many=True, help_text="Items with fewer submitted ratings than planned.")


class BatchDetailSerializer(BatchSerializer):
    progress = serializers.SerializerMethodField()

    class Meta(BatchSerializer.Meta):
        fields = BatchSerializer.Meta.fields + ["progress"]

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, obj: Batch) -> dict:
        progress = batch_progress(obj)
        data = {
            "items": progress.items,
            "raters": progress.raters,
            "items_missing": [
                {"summary": summary, "submitted": submitted, "planned": planned}
                for summary, submitted, planned in progress.items_missing
            ],
        }
        return ProgressSerializer(data).data


def _usernames(value: list[str]) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in value if name.strip()))


class BatchCreateSerializer(serializers.Serializer):
    """The options of `manage.py create_batch` and of the batch form (docs/batches.md)."""

    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(Batch.Kind.choices, default=Batch.Kind.MAIN)
    raters = serializers.ListField(
        child=serializers.CharField(max_length=150),
        required=False,
        default=list,
        help_text="Usernames (none for a qualification batch).",
    )
    design = serializers.ChoiceField((*batches.DESIGNS, batches.COMPARISONS), default="k_raters")
    per_source = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=100_000,
        help_text="Design comparisons: pairs of generators compared per source (default: every pair).",
    )
    k = serializers.IntegerField(default=2, min_value=1, max_value=1000, help_text="Raters per item.")
    share = serializers.FloatField(default=0.2, min_value=0, max_value=1, help_text="Share doubly rated.")
    m = serializers.IntegerField(default=1, min_value=1, max_value=100_000, help_text="Items per rater pair.")
    n = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=10_000_000, help_text="Sample size (default: all)."
    )
    stratify_by = serializers.ListField(
        child=serializers.CharField(), default=list, help_text="generator, context_length or source.FIELD"
    )
    seed = serializers.IntegerField(default=0, min_value=-(2**63), max_value=2**63 - 1)
    filters = SummaryQuery(required=False, help_text="Which summaries may be sampled, as for the summary list.")
    blinded = serializers.BooleanField(default=True)
    training = serializers.BooleanField(default=False)
    attention_every = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=32767)
    gold = serializers.ListField(
        child=serializers.CharField(), default=list, help_text="Summary keys of gold items every rater gets."
    )


class BatchList(FakeViewMixin, generics.ListCreateAPIView):
    """The study's batches (admins and viewers); a study admin creates one with a design."""

    serializer_class = BatchSerializer

    @extend_schema(parameters=[OpenApiParameter("kind", str, enum=Batch.Kind.values, required=False)])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if self.is_schema_view():
            return Batch.objects.none()
        study = permissions.study_for_viewer(self.request, self.kwargs["slug"])
        kind = self.request.query_params.get("kind")
        if kind and kind not in Batch.Kind.values:
            raise serializers.ValidationError({"kind": f"must be one of {', '.join(Batch.Kind.values)}"})
        return batches_for_study(study, kind=kind)

    @extend_schema(
        request=BatchCreateSerializer,
        responses={201: BatchDetailSerializer},
        description="Study admins. Same options and seed give the same batch.",
    )
    def post(self, request, slug):
        study = permissions.study_for_admin(request, slug)
        body = BatchCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        names = _usernames(d["raters"])
        # Only accounts the caller may enrol: a study admin names the study's own members
        # (annotate.selectors.access.users_enrollable_by); anyone else reads as unknown.
        users = {u.username: u for u in users_enrollable_by(request.user, study).filter(username__in=names)}
        missing = [name for name in names if name not in users]
        if missing or not (names or d.get("kind") == Batch.Kind.QUALIFICATION):
            raise serializers.ValidationError(
                {"raters": f"no such user(s) among the study's members: {', '.join(missing) or '(none given)'}"}
            )
        gold_keys = _usernames(d["gold"])
        gold = list(study.summaries.filter(key__in=gold_keys))
        if len(gold) != len(gold_keys):
            unknown = sorted(set(gold_keys) - {s.key for s in gold})
            raise serializers.ValidationError({"gold": f"no such summary key(s): {', '.join(unknown)}"})
        batch = batches.create_batch(
            study=study,
            name=d["name"],
            kind=d["kind"],
            raters=[users[name] for name in names],
            design=d["design"],
            seed=d["seed"],
            filters=d.get("filters") or {},
            n=d.get("n"),
            stratify_by=[field.strip() for field in d["stratify_by"] if field.strip()],
            k=d["k"],
            share=d["share"],
            m=d["m"],
            blinded=d["blinded"],
            created_by=request.user,
            gold=gold,
            attention_every=d.get("attention_every"),
            training=d["training"],
            per_source=d.get("per_source"),
        )
        data = BatchDetailSerializer(get_batch(study, batch.uuid, counts=True)).data
        # Pairs the design chose whose rater already had the summary (docs/batches.md).
        data["skipped_pairs"] = batch.skipped_pairs
        return Response(data, status=201)


class BatchDetail(APIView):
    @extend_schema(responses=BatchDetailSerializer, description="Study admins and viewers: the batch and its progress.")
    def get(self, request, slug, batch_uuid):
        study = permissions.study_for_viewer(request, slug)
        return Response(BatchDetailSerializer(get_batch(study, batch_uuid, counts=True)).data)


class RerateSerializer(serializers.Serializer):
    summaries = serializers.ListField(
        child=serializers.UUIDField(), required=False, help_text="Only these items (default: the whole batch)."
    )


class OpenedSerializer(serializers.Serializer):
    opened = serializers.IntegerField(help_text="Assignments that got a post-discussion draft.")


class BatchRerating(APIView):
    @extend_schema(
        request=RerateSerializer,
        responses=OpenedSerializer,
        description="Study admins: open the re-rating round (phase post_discussion) for submitted assignments.",
    )
    def post(self, request, slug, batch_uuid):
        study = permissions.study_for_admin(request, slug)
        batch = get_batch(study, batch_uuid)
        body = RerateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        summaries = None
        if "summaries" in body.validated_data:
            summaries = list(Summary.objects.filter(study=study, uuid__in=body.validated_data["summaries"]))
        return Response({"opened": adjudication.open_rerating(batch=batch, summaries=summaries)})


class AdminAssignmentSerializer(serializers.ModelSerializer):
    rater = UserField()
    summary = SummaryRefSerializer()
    moved_to = serializers.UUIDField(source="moved_to.uuid", allow_null=True, default=None)

    class Meta:
        model = Assignment
        fields = [
            "uuid",
            "rater",
            "summary",
            "position",
            "state",
            "version",
            "skip_reason",
            "first_opened_at",
            "submitted_at",
            "withdrawn_at",
            "active_seconds",
            "moved_to",
        ]


class AssignmentQuery(serializers.Serializer):
    rater = serializers.CharField(required=False, help_text="Username.")
    state = serializers.ChoiceField(Assignment.State.choices, required=False)
    summary = serializers.UUIDField(required=False)


class BatchAssignmentList(FakeViewMixin, generics.ListAPIView):
    """Study admins: every assignment of the batch, filtered by rater, state or summary."""

    serializer_class = AdminAssignmentSerializer
    cursor_ordering = ("summary_id", "rater_id")

    @extend_schema(parameters=[AssignmentQuery])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if self.is_schema_view():
            return Assignment.objects.none()
        study = permissions.study_for_admin(self.request, self.kwargs["slug"])
        batch = get_batch(study, self.kwargs["batch_uuid"])
        return batch_assignments(batch, **query_params(AssignmentQuery, self.request))


class AssignmentWithdraw(APIView):
    @extend_schema(
        request=None,
        responses=AdminAssignmentSerializer,
        description="Study admins: take the item off the rater's queue; their answers are kept.",
    )
    def post(self, request, slug, batch_uuid, assignment_uuid):
        study = permissions.study_for_admin(request, slug)
        assignment = get_batch_assignment(get_batch(study, batch_uuid), assignment_uuid)
        return Response(AdminAssignmentSerializer(withdraw_assignment(assignment=assignment)).data)


class MoveSerializer(serializers.Serializer):
    to = serializers.CharField(max_length=150, help_text="Username of the new rater.")


class AssignmentMove(APIView):
    @extend_schema(
        request=MoveSerializer,
        responses={201: AdminAssignmentSerializer},
        description="Study admins: give the item to another rater. Answers the new assignment; the old one is "
        "withdrawn (answers kept) and its moved_to points at the new one.",
    )
    def post(self, request, slug, batch_uuid, assignment_uuid):
        study = permissions.study_for_admin(request, slug)
        assignment = get_batch_assignment(get_batch(study, batch_uuid), assignment_uuid)
        body = MoveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        target = users_enrollable_by(request.user, study).filter(username=body.validated_data["to"]).first()
        if target is None:
            raise serializers.ValidationError({"to": "No such user among the study's members."})
        new = move_assignment(assignment=assignment, to_rater=target)
        new = get_batch_assignment(assignment.batch, new.uuid)
        return Response(AdminAssignmentSerializer(new).data, status=201)


# --- answers, disagreements, consensus, discussion (study admins only) -----------------------

PHASES = [("initial", "Initial"), ("post_discussion", "After discussion")]


class AnswerRowSerializer(serializers.Serializer):
    summary = SummaryRefSerializer()
    rater = serializers.CharField(help_text="Username.")
    assignment = serializers.UUIDField()
    revision = serializers.IntegerField()
    phase = serializers.CharField(help_text="initial or post_discussion")
    submitted_at = serializers.DateTimeField(allow_null=True)
    rubric_version = serializers.IntegerField()
    answers = serializers.DictField(
        child=serializers.JSONField(), help_text="Question key -> answer; span questions hold their spans."
    )
    rationales = serializers.DictField(child=serializers.JSONField())


class AnswerQuery(serializers.Serializer):
    phase = serializers.ChoiceField(PHASES, default="initial")
    summary = serializers.UUIDField(required=False, help_text="Only this summary (its uuid).")
    summary_key = serializers.CharField(required=False, max_length=200, help_text="Only this summary (its import key).")
    rater = serializers.CharField(
        required=False, max_length=150, help_text="Username; 400 if nobody of that name has work in the batch."
    )


def _requested_answers(request, slug, batch_uuid):
    """(study, batch, the answers that count as the query asks): a queryset of revisions,
    none when it names a summary the study does not have."""
    study = permissions.study_for_admin(request, slug)
    batch = get_batch(study, batch_uuid)
    query = query_params(AnswerQuery, request)
    if "rater" in query and not batch.assignments.filter(rater__username=query["rater"]).exists():
        raise drf_exceptions.ValidationError({"rater": f"no rater {query['rater']!r} has work in this batch"})
    summary = None
    if "summary" in query or "summary_key" in query:
        summaries = Summary.objects.filter(study=study)
        if "summary" in query:
            summaries = summaries.filter(uuid=query["summary"])
        if "summary_key" in query:
            summaries = summaries.filter(key=query["summary_key"])
        summary = summaries.first()
        if summary is None:
            return study, batch, Revision.objects.none()
    revisions = batch_answer_revisions(batch, phase=query["phase"], summary=summary, rater=query.get("rater"))
    return study, batch, revisions


class BatchAnswerList(FakeViewMixin, generics.GenericAPIView):
    """Study admins: the answers that count (each assignment's newest submitted revision in
    the phase), with rationales and spans; withdrawn assignments are left out."""

    serializer_class = AnswerRowSerializer
    cursor_ordering = ANSWER_ORDER

    @extend_schema(parameters=[AnswerQuery], responses=AnswerRowSerializer(many=True))
    def get(self, request, slug, batch_uuid):
        _, _, revisions = _requested_answers(request, slug, batch_uuid)
        # The database counts and slices; only the page's rows are built.
        page = self.paginate_queryset(revisions.only("pk"))
        rows = answer_rows([revision.pk for revision in page])
        return self.get_paginated_response(AnswerRowSerializer(rows, many=True).data)


# Rows built per chunk of the stream: the memory of a download stays flat in the batch's size.
STREAM_CHUNK = 500


class BatchAnswerStream(FakeViewMixin, APIView):
    """Study admins: every answer that counts in the batch as JSON Lines, one row per line
    (the rows of the paginated list), streamed in the same order without pages."""

    @extend_schema(
        parameters=[AnswerQuery],
        responses={(200, "application/jsonl"): OpenApiTypes.STR},
        description="All rows of `answers/` as JSON Lines, streamed: one read for any batch size.",
    )
    def get(self, request, slug, batch_uuid):
        study, batch, revisions = _requested_answers(request, slug, batch_uuid)
        ids = list(revisions.values_list("pk", flat=True))
        response = StreamingHttpResponse(_answer_lines(ids), content_type="application/jsonl; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-{batch.uuid}-answers.jsonl"'
        return response


def _answer_lines(ids):
    for start in range(0, len(ids), STREAM_CHUNK):
        for row in AnswerRowSerializer(answer_rows(ids[start : start + STREAM_CHUNK]), many=True).data:
            yield json.dumps(row, ensure_ascii=False, cls=DjangoJSONEncoder) + "\n"
