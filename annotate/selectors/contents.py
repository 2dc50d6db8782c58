"""Reads of a study's contents: its rubric, sources, summaries and claims, and the
summary filters batch building uses. Querysets arrive with related rows joined, so
serializers and templates never query per row; access is decided by the caller
(annotate.selectors.access / annotate.permissions)."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Count, JSONField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404

from annotate.models import (
    Assignment,
    Batch,
    Claim,
    Finding,
    Revision,
    Rubric,
    Source,
    Study,
    Summary,
)
from annotate.rubrics import RubricDefinition
from core.exceptions import ApplicationError
from core.models import JSONArrayLength


def rubric_definition(rubric: Rubric) -> RubricDefinition:
    """The rubric's parsed definition, parsed once per process and rubric version.

    A Rubric row is one immutable version (a changed definition is a new row), and the
    parsed RubricDefinition is frozen, so every request of a worker shares one. The key
    holds updated_at as well, so a row changed in place anyway (the admin, a test) is
    parsed again; an unsaved rubric is never cached."""
    if rubric.pk is None:
        return RubricDefinition.from_dict(rubric.definition)
    return _parsed_definition(rubric.pk, rubric.updated_at, rubric.definition)


_PARSED: dict[tuple[int, object], RubricDefinition] = {}
_PARSED_MAX = 256


def _parsed_definition(pk: int, updated_at, definition: dict) -> RubricDefinition:
    key = (pk, updated_at)
    parsed = _PARSED.get(key)
    if parsed is None:
        parsed = RubricDefinition.from_dict(definition)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()  # rubric versions are few; a bound keeps a long-lived worker small
        _PARSED[key] = parsed
    return parsed


def study_counts(study: Study) -> dict[str, int]:
    return {
        "sources": Source.objects.filter(study=study).count(),
        "summaries": Summary.objects.filter(study=study).count(),
        "batches": Batch.objects.filter(study=study).count(),
        "assignments": Assignment.objects.filter(study=study).exclude(state=Assignment.State.WITHDRAWN).count(),
    }


def count_of(model, field: str, *, outer: str = "pk"):
    """The number of `model` rows whose `field` is the outer row's `outer`, as a correlated
    subquery: the database counts for the rows it returns (a page), where a JOIN with
    COUNT and GROUP BY would count for every row of the study first."""
    counted = (
        model.objects.filter(**{field: OuterRef(outer)}).order_by().values(field).annotate(n=Count("pk")).values("n")
    )
    return Coalesce(Subquery(counted), 0)


def sources_for_study(study: Study, *, key: str | None = None, licence: str | None = None) -> QuerySet[Source]:
    sources = (
        Source.objects.filter(study=study)
        .annotate(n_sentences=JSONArrayLength("sentence_spans"), n_findings=count_of(Finding, "source"))
        .order_by("key")
    )
    if key:
        sources = sources.filter(key=key)
    if licence:
        sources = sources.filter(licence=licence)
    return sources


def get_source(study: Study, source_uuid) -> Source:
    findings = Prefetch("findings", queryset=Finding.objects.order_by("index"))
    source = (
        sources_for_study(study).prefetch_related(findings).filter(uuid=source_uuid).first() if source_uuid else None
    )
    if source is None:
        raise Http404("No such source.")
    return source


def summaries_for_study(study: Study, **filters: Any) -> QuerySet[Summary]:
    """The study's summaries through filter_summaries (same filters as a batch)."""
    return filter_summaries(study=study, **filters).select_related("parent")


def get_summary(study: Study, summary_uuid) -> Summary:
    summary = summaries_for_study(study).filter(uuid=summary_uuid).first()
    if summary is None:
        raise Http404("No such summary.")
    return summary


def claims_for_summary(summary: Summary) -> QuerySet[Claim]:
    return Claim.objects.filter(summary=summary).order_by("index")


def filter_summaries(
    *,
    study: Study,
    generator: str | list[str] | None = None,
    flags_any: list[str] | None = None,
    flags_none: list[str] | None = None,
    source_metadata: dict[str, str] | None = None,
    min_context: int | None = None,
    max_context: int | None = None,
    rated: bool | None = None,
    assigned: bool | None = None,
) -> QuerySet[Summary]:
    """The study's summaries (never its comparison items) matching every given filter, annotated with
    `context_sentences` (sentences in the source). `rated` is about submitted
    ratings in any batch; `assigned` about live (not withdrawn) assignments in any batch."""
    summaries = (
        # Comparison items stand for comparisons, not for a summary to rate alone.
        Summary.objects.filter(study=study, comparison__isnull=True)
        .select_related("source")
        .annotate(context_sentences=JSONArrayLength("source__sentence_spans"))
        .order_by("key")
    )
    generators = [generator] if isinstance(generator, str) else list(generator or [])
    if generators:
        summaries = summaries.filter(generator__in=generators)
    if "draft" not in (flags_any or []) and not any(g.endswith("/draft") for g in generators):
        # A pipeline's intermediate text (its draft before revision) is rated only when the
        # study asks for it: by the flag `draft` or by the draft's generator.
        # (A summary without the key is not a draft: the isnull test keeps SQL's NULL out.)
        summaries = summaries.filter(Q(metadata__draft_of_revision__isnull=True) | ~Q(metadata__draft_of_revision=True))
    for key, value in (source_metadata or {}).items():
        # The key becomes part of an ORM lookup: only a plain field name is allowed, so
        # "a__b" or "contains" cannot turn a filter into another query.
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key) or "__" in key or key in JSONField.get_lookups():
            raise ApplicationError(f"source metadata field {key!r} is not a plain field name")
        summaries = summaries.filter(**{f"source__metadata__{key}": value})
    if min_context is not None:
        summaries = summaries.filter(context_sentences__gte=min_context)
    if max_context is not None:
        summaries = summaries.filter(context_sentences__lte=max_context)
    if rated is not None:
        rated_ids = Revision.objects.filter(assignment__study=study, status=Revision.Status.SUBMITTED).values(
            "assignment__summary"
        )
        summaries = summaries.filter(pk__in=rated_ids) if rated else summaries.exclude(pk__in=rated_ids)
    if assigned is not None:
        live = Assignment.objects.filter(study=study).exclude(state=Assignment.State.WITHDRAWN).values("summary")
        summaries = summaries.filter(pk__in=live) if assigned else summaries.exclude(pk__in=live)
    if flags_any or flags_none:
        # JSON containment is not portable to SQLite: filter the (small) flag lists here.
        wanted, unwanted = set(flags_any or []), set(flags_none or [])
        keep = [s.pk for s in summaries if wanted <= set(s.flags) and not unwanted & set(s.flags)]
        summaries = summaries.filter(pk__in=keep)
    return summaries


def pipeline_flags_in(study: Study) -> list[str]:
    """Every pipeline flag some summary of the study carries, sorted (the batch builder
    offers them). The database returns each distinct flag list once."""
    lists = Summary.objects.filter(study=study).order_by().values_list("flags", flat=True).distinct()
    return sorted({str(flag) for flags in lists if isinstance(flags, list) for flag in flags})


def source_metadata_example(study: Study) -> str:
    """A `FIELD=VALUE` source filter that fits the study (its first source with text
    metadata), for the batch builder's hint; "" when its sources have none."""
    for metadata in Source.objects.filter(study=study).order_by("pk").values_list("metadata", flat=True)[:20]:
        for field, value in (metadata or {}).items():
            if isinstance(value, str) and value and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", field):
                return f"{field}={value}"
    return ""
