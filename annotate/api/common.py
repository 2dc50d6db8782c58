"""Pieces every API module uses: the text field PostgreSQL can store, query-parameter
validation, and the small reference serializers.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from annotate.models import (
    Source,
    SourceSentence,
    Summary,
)

# Assignment.version is a PositiveIntegerField: larger numbers can never match, and
# some databases refuse to even compare them.
MAX_VERSION = 2**31 - 1


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


class TextJSONField(serializers.JSONField):
    """Any JSON value but text with NUL characters, which PostgreSQL cannot store."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if _has_nul(value):
            raise serializers.ValidationError("Text may not contain NUL characters.")
        return value


class SentenceSerializer(serializers.ModelSerializer):
    class Meta:
        model = SourceSentence
        fields = ["index", "start", "end", "text", "ref"]


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
