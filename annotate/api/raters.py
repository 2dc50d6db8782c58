"""Raters' endpoints: their assignments and the read/save/submit of their rating.

Writes carry the version the client read, either as `"version"` in the body or as
an `If-Match: "<version>"` header; responses carry the new version in both the body
and the `ETag` header. A stale version is answered 409 and nothing is written.
Raters only ever see their own assignments; the generator and pipeline metadata of a
summary are never serialised here (blinding).
"""

from __future__ import annotations

from django.utils.decorators import method_decorator
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.api.common import (
    MAX_VERSION,
    SentenceSerializer,
    TextJSONField,
)
from annotate.decorators import ParticipantAccess, participant_may_use
from annotate.languages import activate_study_language
from annotate.models import (
    Assignment,
    ItemFlag,
    Revision,
)
from annotate.selectors.monitor import item_flags
from annotate.selectors.queue import (
    assignments_for_rater,
    get_assignment_for_rater,
    latest_revision,
    revision_answers,
    shown_summaries,
)
from annotate.services import ratings
from annotate.services.monitoring import raise_flag


class AssignmentListSerializer(serializers.ModelSerializer):
    study = serializers.CharField(source="study.slug")
    url = serializers.HyperlinkedIdentityField(
        view_name="api:assignment-detail", lookup_field="uuid", lookup_url_kwarg="assignment_uuid"
    )

    class Meta:
        model = Assignment
        fields = ["uuid", "url", "study", "position", "state", "version", "first_opened_at", "submitted_at"]


class AssignmentDetailSerializer(AssignmentListSerializer):
    summary = serializers.SerializerMethodField()
    source = serializers.SerializerMethodField()
    rubric = serializers.SerializerMethodField()

    class Meta(AssignmentListSerializer.Meta):
        fields = AssignmentListSerializer.Meta.fields + ["skip_reason", "active_seconds", "summary", "source", "rubric"]

    def get_summary(self, obj: Assignment) -> dict:
        # Only the text: generator, metadata and flags stay on the server. A comparison
        # item adds its summaries as this rater is shown them (A on the left).
        data = {"uuid": str(obj.summary.uuid), "text": obj.summary.text}
        compared = shown_summaries(obj)
        if compared is not None:
            data["compared"] = [{"label": c.label, "uuid": c.uuid, "text": c.text} for c in compared]
        return data

    def get_source(self, obj: Assignment) -> dict:
        source = obj.summary.source
        return {
            "uuid": str(source.uuid),
            "title": source.title,
            "licence": source.licence,
            "attribution": source.attribution,
            "sentences": SentenceSerializer(source.sentences, many=True).data,
        }

    def get_rubric(self, obj: Assignment) -> dict:
        rubric = obj.study.rubric
        return {"key": rubric.key, "version": rubric.version, "definition": rubric.definition}


class RatingWriteSerializer(serializers.Serializer):
    version = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_VERSION, help_text="The version you read (or send If-Match)."
    )
    answers = serializers.DictField(child=TextJSONField(allow_null=True), required=False, default=dict)
    rationales = serializers.DictField(
        child=TextJSONField(allow_null=True),
        required=False,
        default=dict,
        help_text="Question key -> text; for per-finding questions, finding id -> text.",
    )
    active_seconds = serializers.IntegerField(required=False, default=0, min_value=0)


class DraftWriteSerializer(RatingWriteSerializer):
    writer = serializers.RegexField(
        r"^[A-Za-z0-9_-]{8,64}$",
        required=False,
        help_text="The page that writes: a random id it made when it opened. With `seq`, a newer write of the "
        "same page replaces the page's own earlier one, even one sent with the same version (docs/api.md).",
    )
    seq = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_VERSION, help_text="This write's number among the page's writes."
    )

    def validate(self, attrs):
        if ("writer" in attrs) != ("seq" in attrs):
            raise serializers.ValidationError({"seq": "writer and seq are sent together."})
        return attrs


class SkipSerializer(serializers.Serializer):
    version = serializers.IntegerField(required=False, min_value=0, max_value=MAX_VERSION)
    reason = serializers.CharField()


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(required=False, min_value=0, max_value=MAX_VERSION)


class RatingStateSerializer(serializers.Serializer):
    assignment = serializers.UUIDField()
    state = serializers.CharField()
    version = serializers.IntegerField()
    revision = serializers.IntegerField(allow_null=True)
    status = serializers.CharField(allow_null=True)
    rubric_version = serializers.IntegerField(allow_null=True)
    answers = serializers.DictField(child=serializers.JSONField())
    rationales = serializers.DictField(child=serializers.JSONField())
    hints = serializers.DictField(
        child=serializers.CharField(),
        help_text="Rubric rules the draft breaks, {question key: message}: shown while drafting, refused on submit.",
    )


def _version(request: Request, body: dict):
    """The version the client read: body field first, then If-Match."""
    if body.get("version") is not None:
        return body["version"]
    header = request.headers.get("If-Match", "").strip()
    if header.startswith("W/"):
        header = header[2:]
    value = header.strip('"') or None
    try:
        number = int(value) if value is not None else None
    except ValueError:
        return value  # not a number: the service answers "version is required"
    if number is not None and not 0 <= number <= MAX_VERSION:
        raise serializers.ValidationError({"If-Match": "This is not a version this API gave out."})
    return value


def _rating_state(assignment: Assignment, *, refresh: bool = True) -> Response:
    """The stored rating as the rater's pages read it. `refresh=False` when a service
    has just written the assignment (it refreshes what it changed)."""
    if refresh:
        assignment.refresh_from_db()
    revision = latest_revision(assignment)
    answers, rationales = revision_answers(revision)
    data = {
        "assignment": assignment.uuid,
        "state": assignment.state,
        "version": assignment.version,
        "revision": revision.number if revision else None,
        "status": revision.status if revision else None,
        "rubric_version": revision.rubric.version if revision else None,
        "answers": answers,
        "rationales": rationales,
        "hints": (
            ratings.draft_hints(assignment=assignment, answers=answers, rationales=rationales)
            if revision is not None and revision.status == Revision.Status.DRAFT
            else {}
        ),
    }
    return Response(RatingStateSerializer(data).data, headers={"ETag": f'"{assignment.version}"'})


# The item calls a participant's rating page makes (recruit.middleware reads the mark).
FOR_PARTICIPANTS = method_decorator(participant_may_use(ParticipantAccess.ITEM), name="dispatch")

IF_MATCH = OpenApiParameter(
    "If-Match",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description='The version you read, as an ETag: "3". Alternative to "version".',
)


def _own_item(request, assignment_uuid) -> Assignment:
    """The rater's own assignment (else 404), for a session or a token alike; before the
    study's onboarding is through, a 403 onboarding_required naming the step's page (the
    selector's OnboardingRequired, annotate.selectors.onboarding). Its other messages are
    in the language of the item's page (annotate.languages)."""
    assignment = get_assignment_for_rater(request.user, assignment_uuid)
    activate_study_language(request, assignment.study)
    return assignment


def _write_rating(request, assignment_uuid, write, serializer=RatingWriteSerializer) -> Response:
    """Save a draft or submit (`write` is the service): the same body, version and answer.
    A draft may name its writer (DraftWriteSerializer), passed on as `writer`."""
    assignment = _own_item(request, assignment_uuid)
    body = serializer(data=request.data)
    body.is_valid(raise_exception=True)
    extra = {}
    if "writer" in body.validated_data:
        extra["writer"] = (body.validated_data["writer"], body.validated_data["seq"])
    write(
        assignment=assignment,
        rater=request.user,
        answers=body.validated_data["answers"],
        rationales=body.validated_data["rationales"],
        version=_version(request, body.validated_data),
        active_seconds=body.validated_data["active_seconds"],
        **extra,
    )
    return _rating_state(assignment, refresh=False)


class AssignmentList(generics.ListAPIView):
    serializer_class = AssignmentListSerializer

    def get_queryset(self):
        return assignments_for_rater(self.request.user)


@FOR_PARTICIPANTS
class AssignmentDetail(APIView):
    @extend_schema(responses=AssignmentDetailSerializer)
    def get(self, request, assignment_uuid):
        assignment = _own_item(request, assignment_uuid)
        data = AssignmentDetailSerializer(assignment, context={"request": request}).data
        return Response(data, headers={"ETag": f'"{assignment.version}"'})


@FOR_PARTICIPANTS
class AssignmentRating(APIView):
    @extend_schema(responses=RatingStateSerializer)
    def get(self, request, assignment_uuid):
        assignment = _own_item(request, assignment_uuid)
        return _rating_state(assignment)

    @extend_schema(
        request=DraftWriteSerializer,
        responses=RatingStateSerializer,
        parameters=[IF_MATCH],
        description="Save a draft. Values must be valid; completeness is not required.",
    )
    def put(self, request, assignment_uuid):
        return _write_rating(request, assignment_uuid, ratings.save_draft, DraftWriteSerializer)


@FOR_PARTICIPANTS
class AssignmentSubmit(APIView):
    @extend_schema(
        request=RatingWriteSerializer,
        responses=RatingStateSerializer,
        parameters=[IF_MATCH],
        description="Submit the rating; it must answer every required question.",
    )
    def post(self, request, assignment_uuid):
        return _write_rating(request, assignment_uuid, ratings.submit_rating)


@FOR_PARTICIPANTS
class AssignmentSkip(APIView):
    @extend_schema(request=SkipSerializer, responses=RatingStateSerializer, parameters=[IF_MATCH])
    def post(self, request, assignment_uuid):
        assignment = _own_item(request, assignment_uuid)
        body = SkipSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ratings.skip_assignment(
            assignment=assignment,
            rater=request.user,
            reason=body.validated_data["reason"],
            version=_version(request, body.validated_data),
        )
        return _rating_state(assignment)


@FOR_PARTICIPANTS
class AssignmentReopen(APIView):
    @extend_schema(
        request=VersionSerializer,
        responses=RatingStateSerializer,
        parameters=[IF_MATCH],
        description="Reopen a submitted or skipped item; a submitted rating becomes a new draft "
        "revision and the submitted one stays in the history.",
    )
    def post(self, request, assignment_uuid):
        assignment = _own_item(request, assignment_uuid)
        body = VersionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ratings.reopen_rating(assignment=assignment, rater=request.user, version=_version(request, body.validated_data))
        return _rating_state(assignment)


class FlagSerializer(serializers.Serializer):
    """A rater's question about the item and the admin's answer (docs/monitoring.md)."""

    uuid = serializers.UUIDField(read_only=True)
    kind = serializers.ChoiceField(choices=ItemFlag.Kind.choices)
    note = serializers.CharField(trim_whitespace=False)
    created_at = serializers.DateTimeField(read_only=True)
    answer = serializers.CharField(read_only=True)
    answered_at = serializers.DateTimeField(read_only=True)


class AssignmentFlagList(APIView):
    @extend_schema(responses=FlagSerializer(many=True), description="Your questions about this item, with answers.")
    def get(self, request, assignment_uuid):
        assignment = _own_item(request, assignment_uuid)
        own, _shared = item_flags(assignment)
        return Response(FlagSerializer(own, many=True).data)

    @extend_schema(
        request=FlagSerializer,
        responses={201: FlagSerializer},
        description="Ask the study admins about this item: kind is guideline, broken_source or other.",
    )
    def post(self, request, assignment_uuid):
        assignment = _own_item(request, assignment_uuid)
        body = FlagSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        flag = raise_flag(
            assignment=assignment,
            rater=request.user,
            kind=body.validated_data["kind"],
            note=body.validated_data["note"],
        )
        return Response(FlagSerializer(flag).data, status=201)
