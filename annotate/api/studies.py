"""Studies, sources, summaries and claims: study admins and viewers (generator,
metadata and flags included: never reachable by a rater).
"""

from __future__ import annotations

from django.db.models import JSONField
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import exceptions as drf_exceptions
from rest_framework import generics, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate import permissions
from annotate.api.common import (
    MAX_VERSION,
    FakeViewMixin,
    SentenceSerializer,
    SourceRefSerializer,
    query_params,
)
from annotate.models import (
    Claim,
    Finding,
    Rubric,
    Source,
    Study,
    StudyMembership,
    Summary,
)
from annotate.selectors.access import studies_for_user, study_access
from annotate.selectors.contents import (
    claims_for_summary,
    get_source,
    get_summary,
    sources_for_study,
    study_counts,
    summaries_for_study,
)
from annotate.services.members import may_create_studies
from annotate.services.studies import create_study


class RubricSerializer(serializers.ModelSerializer):
    class Meta:
        model = Rubric
        fields = ["key", "version", "title", "definition"]


class StudySerializer(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField(help_text="Your memberships in the study.")
    description = serializers.SerializerMethodField(
        help_text="The study team's note on the study: study admins and viewers only (null for raters)."
    )
    access = serializers.SerializerMethodField(
        help_text="What you may do: admin (manage), viewer (read dashboards) or rater (rate your items)."
    )

    class Meta:
        model = Study
        fields = ["uuid", "slug", "title", "description", "licence", "roles", "access"]

    # Plain strings (admin, rater, viewer): one enum per choice set keeps the schema tidy.
    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_roles(self, obj: Study) -> list[str]:
        return sorted(m.role for m in getattr(obj, "my_memberships", []))

    @extend_schema_field(serializers.ChoiceField(StudyMembership.Role.choices))
    def get_access(self, obj: Study) -> str:
        return study_access(self.context["request"].user, self.get_roles(obj))

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_description(self, obj: Study) -> str | None:
        # The description is the study team's own note (docs/import-format.md: "for
        # admins"); raters get the guidelines on their rating page and nothing else.
        if self.get_access(obj) == StudyMembership.Role.RATER:
            return None
        return obj.description


class StudyCountsSerializer(serializers.Serializer):
    sources = serializers.IntegerField()
    summaries = serializers.IntegerField()
    batches = serializers.IntegerField()
    assignments = serializers.IntegerField(help_text="Not withdrawn.")


class StudyDetailSerializer(StudySerializer):
    rubric = RubricSerializer()
    counts = serializers.SerializerMethodField()

    class Meta(StudySerializer.Meta):
        fields = StudySerializer.Meta.fields + ["guidelines", "assisted", "rubric", "counts", "created_at"]

    @extend_schema_field(StudyCountsSerializer)
    def get_counts(self, obj: Study) -> dict:
        return study_counts(obj)


class StudyQuery(serializers.Serializer):
    role = serializers.ChoiceField(
        StudyMembership.Role.choices, required=False, help_text="Only studies where you have this role."
    )


class StudyCreateSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=100)
    title = serializers.CharField(max_length=300)
    rubric = serializers.CharField(
        max_length=64, help_text="A rubric key: a built-in rubric or any stored one (the newest version is pinned)."
    )
    licence = serializers.CharField(max_length=100, required=False, default="", allow_blank=True)
    guidelines = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False)
    description = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False)
    assisted = serializers.BooleanField(required=False, default=False)


class StudyList(FakeViewMixin, generics.ListAPIView):
    """The studies you have a role in (staff: every study), with your roles."""

    serializer_class = StudySerializer

    @extend_schema(parameters=[StudyQuery])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=StudyCreateSerializer,
        responses={201: StudyDetailSerializer},
        description="Create a study; you become its study admin. Superusers and accounts with the permission "
        "annotate.add_study only (403 otherwise); a taken slug is 409 (docs/api.md).",
    )
    def post(self, request, *args, **kwargs):
        if not may_create_studies(request.user):
            raise drf_exceptions.PermissionDenied(
                "Creating studies needs a superuser or the permission annotate.add_study (docs/accounts.md)."
            )
        body = StudyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        study = create_study(
            slug=d["slug"],
            title=d["title"],
            rubric_key=d["rubric"],
            licence=d["licence"],
            guidelines=d["guidelines"],
            description=d["description"],
            assisted=d["assisted"],
            created_by=request.user,
        )
        study = studies_for_user(request.user).get(pk=study.pk)
        location = reverse("api:study-detail", kwargs={"slug": study.slug})
        return Response(
            StudyDetailSerializer(study, context={"request": request}).data,
            status=201,
            headers={"Location": request.build_absolute_uri(location)},
        )

    def get_queryset(self):
        if self.is_schema_view():
            return Study.objects.none()
        return studies_for_user(self.request.user, **query_params(StudyQuery, self.request))


class StudyDetail(APIView):
    @extend_schema(responses=StudyDetailSerializer, description="Study admins and viewers.")
    def get(self, request, slug):
        study = permissions.study_for_viewer(request, slug)
        study = studies_for_user(request.user).filter(pk=study.pk).first() or study
        return Response(StudyDetailSerializer(study, context={"request": request}).data)


class FindingSerializer(serializers.ModelSerializer):
    class Meta:
        model = Finding
        fields = [
            "uuid",
            "index",
            "external_id",
            "intervention",
            "comparator",
            "outcome",
            "label",
            "start",
            "end",
            "evidence",
        ]


class SourceSerializer(serializers.ModelSerializer):
    n_sentences = serializers.IntegerField(read_only=True)
    n_findings = serializers.IntegerField(read_only=True)

    class Meta:
        model = Source
        fields = [
            "uuid",
            "key",
            "title",
            "external_ids",
            "licence",
            "licence_url",
            "attribution",
            "copyright",
            "metadata",
            "n_sentences",
            "n_findings",
        ]


class SourceDetailSerializer(SourceSerializer):
    sentences = SentenceSerializer(many=True)
    findings = FindingSerializer(many=True)

    class Meta(SourceSerializer.Meta):
        fields = SourceSerializer.Meta.fields + ["text", "sentences", "findings"]


class SourceQuery(serializers.Serializer):
    key = serializers.CharField(required=False, help_text="Only the source with this import key.")
    licence = serializers.CharField(required=False, help_text="Only sources with exactly this licence.")


class SourceList(FakeViewMixin, generics.ListAPIView):
    """The study's sources (study admins and viewers); sentences and findings are on the detail."""

    serializer_class = SourceSerializer
    cursor_ordering = ("key",)

    @extend_schema(parameters=[SourceQuery])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if self.is_schema_view():
            return Source.objects.none()
        study = permissions.study_for_viewer(self.request, self.kwargs["slug"])
        return sources_for_study(study, **query_params(SourceQuery, self.request))


class SourceDetail(APIView):
    @extend_schema(responses=SourceDetailSerializer, description="Study admins and viewers.")
    def get(self, request, slug, source_uuid):
        study = permissions.study_for_viewer(request, slug)
        return Response(SourceDetailSerializer(get_source(study, source_uuid)).data)


class SummarySerializer(serializers.ModelSerializer):
    """For study admins and viewers only: it names the generator and pipeline flags."""

    source = SourceRefSerializer()
    parent = serializers.UUIDField(source="parent.uuid", allow_null=True, default=None)
    context_sentences = serializers.IntegerField(read_only=True, help_text="Sentences in the source.")

    class Meta:
        model = Summary
        fields = [
            "uuid",
            "key",
            "source",
            "text",
            "generator",
            "metadata",
            "flags",
            "parent",
            "context_sentences",
            "created_at",
        ]


class SummaryQuery(serializers.Serializer):
    generator = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Only these generators (repeatable)."
    )
    flag = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Only summaries with this pipeline flag (repeatable)."
    )
    no_flag = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Only summaries without this flag (repeatable)."
    )
    source = serializers.ListField(
        child=serializers.RegexField(r"^[A-Za-z0-9_]+=.*$"),
        required=False,
        help_text="Source metadata FIELD=VALUE (repeatable), e.g. rna_type=lncRNA.",
    )

    def validate_source(self, pairs: list[str]) -> list[str]:
        # selectors.filter_summaries builds `source__metadata__<FIELD>`: a FIELD that is a
        # lookup (contains, isnull, ...) or a path (a__b) would become a query operator.
        for pair in pairs:
            field = pair.split("=", 1)[0]
            if "__" in field or field in JSONField.get_lookups():
                raise serializers.ValidationError(f"{field!r} cannot be used as a metadata field name.")
        return pairs

    min_context = serializers.IntegerField(required=False, min_value=0, max_value=MAX_VERSION)
    max_context = serializers.IntegerField(required=False, min_value=0, max_value=MAX_VERSION)
    rated = serializers.ChoiceField(["yes", "no"], required=False, help_text="Submitted ratings in any batch.")
    assigned = serializers.ChoiceField(
        ["yes", "no"], required=False, help_text="Live (not withdrawn) assignments in any batch."
    )

    def validate(self, attrs):
        filters = {
            "generator": attrs.get("generator"),
            "flags_any": attrs.get("flag"),
            "flags_none": attrs.get("no_flag"),
            "source_metadata": dict(pair.split("=", 1) for pair in attrs.get("source", [])),
            "min_context": attrs.get("min_context"),
            "max_context": attrs.get("max_context"),
            "rated": None if attrs.get("rated") is None else attrs["rated"] == "yes",
            "assigned": None if attrs.get("assigned") is None else attrs["assigned"] == "yes",
        }
        return {k: v for k, v in filters.items() if v not in (None, [], {})}


class SummaryList(FakeViewMixin, generics.ListAPIView):
    """The study's summaries with generator, metadata and flags (study admins and viewers).
    The filters are those of a batch (docs/batches.md)."""

    serializer_class = SummarySerializer
    cursor_ordering = ("key",)

    @extend_schema(parameters=[SummaryQuery])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if self.is_schema_view():
            return Summary.objects.none()
        study = permissions.study_for_viewer(self.request, self.kwargs["slug"])
        return summaries_for_study(study, **query_params(SummaryQuery, self.request))


class SummaryDetail(APIView):
    @extend_schema(responses=SummarySerializer, description="Study admins and viewers.")
    def get(self, request, slug, summary_uuid):
        study = permissions.study_for_viewer(request, slug)
        return Response(SummarySerializer(get_summary(study, summary_uuid)).data)


class ClaimSerializer(serializers.ModelSerializer):
    class Meta:
        model = Claim
        fields = ["uuid", "index", "text", "start", "end", "refs", "verdict", "explanation", "probability"]


class ClaimList(FakeViewMixin, generics.ListAPIView):
    """The claims of one summary with their verification verdicts (study admins and viewers)."""

    serializer_class = ClaimSerializer

    def get_queryset(self):
        if self.is_schema_view():
            return Claim.objects.none()
        study = permissions.study_for_viewer(self.request, self.kwargs["slug"])
        return claims_for_summary(get_summary(study, self.kwargs["summary_uuid"]))
