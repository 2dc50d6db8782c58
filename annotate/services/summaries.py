"""Writes of a study's items: summaries and their claims from pipelines, and comparisons."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from annotate.models import Comparison, ComparisonMember, Study, Summary
from core.exceptions import ApplicationError
from core.text_validation import check_length, check_text


@transaction.atomic
def create_summary(
    *,
    study: Study,
    source,
    key: str,
    text: str,
    generator: str,
    metadata: dict | None = None,
    flags: Sequence[str] | None = None,
    parent: Summary | None = None,
) -> Summary:
    """Add a summary to a study, idempotent by key: the same key and text return the
    stored summary; the same key with another text is refused (use a new key)."""
    if source.study_id != study.pk or (parent is not None and parent.study_id != study.pk):
        raise ApplicationError("The source and parent must belong to the study.")
    check_length(text, "summary")
    existing = Summary.objects.filter(study=study, key=key).first()
    if existing is not None:
        if existing.text != text or existing.source_id != source.pk:
            raise ApplicationError(f"Summary {key!r} already exists with another text or source.")
        return existing
    return Summary.objects.create(
        study=study,
        source=source,
        key=key,
        text=text,
        generator=generator,
        metadata=metadata or {},
        flags=list(flags or []),
        parent=parent,
    )


@transaction.atomic
def record_claims(*, summary: Summary, claims: Sequence[dict]) -> list:
    """Store a summary's claims (index, text, start, end, refs, verdict, explanation,
    probability), updating any stored claim with the same index. Writers of the same
    summary's claims take turns (a lock on the summary row); new claims are inserted
    in one statement."""
    from annotate.models import Claim

    fields = ["text", "start", "end", "refs", "verdict", "explanation", "probability"]
    wanted: dict[int, dict] = {}
    for index, raw in enumerate(claims):
        start, end = raw.get("start"), raw.get("end")
        if (start is None) != (end is None) or (start is not None and not 0 <= start < end <= len(summary.text)):
            raise ApplicationError(f"claim {index}: span {start}-{end} is not inside the summary text")
        wanted[raw.get("index", index)] = {
            "text": raw["text"],
            "start": start,
            "end": end,
            "refs": list(raw.get("refs", [])),
            "verdict": raw.get("verdict", Claim.Verdict.UNVERIFIED),
            "explanation": raw.get("explanation", ""),
            "probability": raw.get("probability"),
        }
    list(Summary.objects.select_for_update().filter(pk=summary.pk).values_list("pk"))
    stored = {c.index: c for c in Claim.objects.filter(summary=summary, index__in=list(wanted))}
    new = []
    for index, values in wanted.items():
        claim = stored.get(index)
        if claim is None:
            new.append(Claim(summary=summary, index=index, **values))
        elif any(getattr(claim, name) != value for name, value in values.items()):
            for name, value in values.items():
                setattr(claim, name, value)
            claim.save(update_fields=[*fields, "updated_at"])
    for claim in Claim.objects.bulk_create(new):
        stored[claim.index] = claim
    return [stored[index] for index in wanted]


# --- comparisons ------------------------------------------------------------------------


def comparison_item_text(count: int) -> str:
    return f"Comparison of {count} summaries of the same source."


@transaction.atomic
def create_comparison(*, study: Study, key: str, summaries: Sequence[Summary]) -> Comparison:
    """A comparison item of `summaries` (two or more, of one source of the study, from
    different generators), with the Summary row that stands for it in assignments (see
    Comparison). Its key shares the summaries' key space, so it must not name a summary."""
    check_text(key, "key")
    key = (key or "").strip()
    if not key:
        raise ApplicationError("key: a comparison needs a key", extra={"fields": {"key": "required"}})
    summaries = list(summaries)
    if len(summaries) < 2:
        raise ApplicationError("summaries: a comparison needs at least two summaries")
    if len({s.pk for s in summaries}) != len(summaries):
        raise ApplicationError("summaries: a summary appears twice in the comparison")
    sources = {s.source_id for s in summaries}
    if len(sources) != 1:
        raise ApplicationError("summaries: the summaries compared must be of one source")
    if any(s.study_id != study.pk for s in summaries):
        raise ApplicationError("summaries: every summary must be in the study")
    if any(s.generator == Comparison.ITEM_GENERATOR for s in summaries):
        raise ApplicationError("summaries: a comparison cannot compare comparisons")
    generators = [s.generator for s in summaries]
    if len(set(generators)) != len(generators):
        raise ApplicationError("summaries: the summaries compared must come from different generators")
    if Summary.objects.filter(study=study, key=key).exists():
        raise ApplicationError(
            f"key: {key!r} is already a summary or comparison of the study", extra={"fields": {"key": "taken"}}
        )
    source = summaries[0].source
    item = Summary.objects.create(
        study=study,
        source=source,
        key=key,
        text=comparison_item_text(len(summaries)),
        generator=Comparison.ITEM_GENERATOR,
        metadata={"comparison": True},
    )
    comparison = Comparison.objects.create(study=study, source=source, key=key, item=item)
    ComparisonMember.objects.bulk_create(
        ComparisonMember(comparison=comparison, summary=s, index=i) for i, s in enumerate(summaries)
    )
    return comparison
