"""Pieces every API module uses: the text field PostgreSQL can store, query-parameter
validation, and the small reference serializers.
"""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request

from annotate.models import (
    Source,
    Summary,
)
from core.text_validation import problem_message

# Assignment.version is a PositiveIntegerField: larger numbers can never match, and
# some databases refuse to even compare them.
MAX_VERSION = 2**31 - 1


class TextJSONField(serializers.JSONField):
    """Any JSON value whose text (keys included) can be stored: no NUL, which PostgreSQL
    refuses, and no lone surrogate, which is not Unicode (core.text_validation).
    The JSON parser checks JSON bodies already; this covers form-encoded ones."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        message = problem_message(value)
        if message is not None:
            raise serializers.ValidationError(message)
        return value


class SentenceSerializer(serializers.Serializer):
    """A source's sentence (annotate.models.Sentence)."""

    index = serializers.IntegerField()
    start = serializers.IntegerField(help_text="Character offset into the source's text.")
    end = serializers.IntegerField()
    text = serializers.CharField()
    ref = serializers.CharField(help_text='Reference id, e.g. PMC546184; "" when none.')


class FakeViewMixin:
    """drf-spectacular builds the schema with a request-less view: no data then."""

    def is_schema_view(self) -> bool:
        return getattr(self, "swagger_fake_view", False)


def query_params(serializer_class: type[serializers.Serializer], request: Request) -> dict:
    """The validated query parameters (400 in the one error shape if they are not valid)."""
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return {k: v for k, v in query.validated_data.items() if v not in (None, "", [])}


class SourceRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Source
        fields = ["uuid", "key"]


class SummaryRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Summary
        fields = ["uuid", "key"]


class UserField(serializers.SlugRelatedField):
    """A user named by username (read-only)."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="username", read_only=True, **kwargs)
