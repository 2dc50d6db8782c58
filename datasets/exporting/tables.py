"""The tables of a study's content and people in the export: sources, findings, summaries,
claims, batches, raters, consensus, rubrics, qualification attempts, quality events and
onboarding. The answer tables are datasets.exporting.export's."""

from __future__ import annotations

from collections import Counter
from typing import Any

from annotate.models import (
    Assignment,
    Batch,
    Claim,
    ConsensusAnswer,
    Finding,
    ItemFlag,
    QualificationAttempt,
    QualificationRetry,
    RaterExclusion,
    Rubric,
    Source,
    StudyMembership,
    StudySettingChange,
    Summary,
)
from datasets.exporting.folder import (
    ITERATOR_CHUNK,
    canonical_json,
    iso_timestamp,
)
from datasets.exporting.licences import licence_allows_text
from datasets.exporting.reading import (
    answer_chunks,
    json_column,
    uuid_text,
)
from recruit.selectors import onboarding_rows


def write_sources_and_findings(study, writers, include_restricted: bool) -> tuple[list, list[str], dict[int, bool]]:
    """The sources (a withheld source's text left out) and their findings. Returns the
    sources' card entries, the withheld sources' keys and, by source id, whether its
    text may be exported."""
    withheld: list[str] = []
    sources = []
    text_ok: dict[int, bool] = {}
    all_sources = Source.objects.filter(study=study).order_by("key")
    for source in all_sources.iterator(chunk_size=ITERATOR_CHUNK):
        allowed = include_restricted or licence_allows_text(source.licence)
        text_ok[source.pk] = allowed
        if not allowed:
            withheld.append(source.key)
        sources.append((source.key, source.title, source.attribution, source.licence, source.licence_url, allowed))
        sentences = [
            {"index": s.index, "start": s.start, "end": s.end, "text": s.text, "ref": s.ref} for s in source.sentences
        ]
        writers["sources"].write(
            (
                source.key,
                str(source.uuid),
                source.title,
                source.text if allowed else None,
                not allowed,
                source.licence,
                source.licence_url,
                source.attribution,
                source.copyright,
                canonical_json(source.external_ids),
                canonical_json(source.metadata),
                canonical_json(sentences) if allowed else None,
            )
        )
    for f in Finding.objects.filter(source__study=study).select_related("source").order_by("source__key", "index"):
        allowed = text_ok[f.source_id]
        writers["findings"].write(
            (
                f.source.key,
                f.index,
                str(f.uuid),
                f.external_id,
                f.intervention if allowed else None,
                f.comparator if allowed else None,
                f.outcome if allowed else None,
                f.label,
                f.start,
                f.end,
                f.evidence if allowed else None,
            )
        )
    return sources, withheld, text_ok


def write_summaries_and_claims(study, writers, text_ok: dict[int, bool]) -> list[str]:
    """The summaries (not a comparison's item) and their claims; returns the keys of the
    summaries written from a withheld source, flagged `source_withheld`."""
    flagged: list[str] = []
    summaries = (
        # A comparison's item stands for the comparison (the comparisons table), not a summary.
        Summary.objects.filter(study=study, comparison__isnull=True)
        .order_by("key")
        .values_list("key", "uuid", "source_id", "source__key", "text", "generator", "metadata", "flags", "parent__key")
    )
    for chunk in answer_chunks(summaries):  # raw: JSON columns as text, made canonical by orjson
        rows = []
        for key, uid, source_id, source_key, text, generator, metadata, flags, parent_key in chunk:
            from_withheld = not text_ok[source_id]
            if from_withheld:
                flagged.append(key)
            rows.append(
                (
                    key,
                    uuid_text(uid),
                    source_key,
                    text,
                    generator,
                    json_column(metadata),
                    json_column(flags),
                    parent_key,
                    from_withheld,
                )
            )
        writers["summaries"].write_many(rows)
    claims = Claim.objects.filter(summary__study=study).select_related("summary").order_by("summary__key", "index")
    for c in claims.iterator(chunk_size=ITERATOR_CHUNK):
        # An explanation is the checker's critique against the source and may quote it:
        # blanked for a withheld source like a span's quote. The claim is the summary's.
        source_ok = text_ok[c.summary.source_id]
        writers["claims"].write(
            (
                c.summary.key,
                c.index,
                str(c.uuid),
                c.text,
                c.start,
                c.end,
                canonical_json(c.refs),
                c.verdict,
                c.explanation if source_ok else None,
                c.probability,
            )
        )
    return flagged


def write_batches(study, writers, pseudonyms: dict[int, str], include_calibration: bool):
    """The batches in the export (calibration ones only when asked); returns them."""
    batches = Batch.objects.filter(study=study)
    if not include_calibration:
        batches = batches.exclude(kind__in=Batch.OUTSIDE_ANALYSIS)
    # A design records its parameters as given, raters by username (possibly renamed
    # since): the list is rebuilt from the batch's assignments, as pseudonyms.
    batch_raters: dict[int, set[str]] = {}
    for batch_id, uid in Assignment.objects.filter(study=study, batch__isnull=False).values_list(
        "batch_id", "rater_id"
    ):
        batch_raters.setdefault(batch_id, set()).add(pseudonyms.get(uid, "rater-not-in-export"))
    for b in batches.order_by("name"):
        design = dict(b.design)
        if "raters" in design:
            design["raters"] = sorted(batch_raters.get(b.pk, ()))
        writers["batches"].write(
            (
                b.name,
                str(b.uuid),
                b.kind,
                canonical_json(design),
                b.seed,
                b.raters_per_item,
                b.blinded,
                b.training,
                b.attention_every,
            )
        )
    return batches


def write_raters(study, writers, pseudonyms: dict[int, str], per_rater: dict[int, dict[str, Any]]) -> None:
    """One row per pseudonym with their roles and what they have in the export."""
    roles: dict[int, set[str]] = {}
    for user_id, role in StudyMembership.objects.filter(study=study).values_list("user_id", "role"):
        roles.setdefault(user_id, set()).add(role)
    for uid, name in sorted(pseudonyms.items(), key=lambda kv: kv[1]):
        counts = per_rater.get(uid, {"assignments": set(), "revisions": set(), "answers": 0, "spans": 0})
        if not counts["revisions"] and name.startswith("rater-"):
            continue  # a rater whose answers are all outside this export (e.g. calibration only)
        default = "rater" if name.startswith("rater-") else "admin"
        writers["raters"].write(
            (
                name,
                ",".join(sorted(roles.get(uid) or {default})),
                len(counts["assignments"]),
                len(counts["revisions"]),
                counts["answers"],
                counts["spans"],
            )
        )


def write_consensus(writers, batches, pseudonyms: dict[int, str], rubric_versions: set[tuple[str, int]]) -> None:
    """The latest decision per (batch, summary, question) is the answer; adds the rubric
    versions the decisions were made under to `rubric_versions`."""
    # Value rows with the rubric's key and version: no rubric definition is read per decision.
    rows = (
        ConsensusAnswer.objects.filter(batch__in=batches)
        .order_by("created_at", "pk")
        .values_list(
            "batch__name",
            "summary__key",
            "question",
            "value",
            "rationale",
            "decided_by_id",
            "created_at",
            "rubric__key",
            "rubric__version",
        )
    )
    latest: dict[tuple[str, str, str], tuple] = {}
    for batch, summary, question, *rest in rows.iterator(chunk_size=ITERATOR_CHUNK):
        latest[(batch, summary, question)] = rest
    for key in sorted(latest):
        value, rationale, decided_by, created_at, *rubric = latest[key]
        rubric_versions.add(tuple(rubric))
        writers["consensus"].write(
            (
                *key,
                canonical_json(value),
                rationale or None,
                pseudonyms.get(decided_by),
                iso_timestamp(created_at),
                *rubric,
            )
        )


def write_rubrics(study, writers, rubric_versions: set[tuple[str, int]]) -> list[Rubric]:
    """Every rubric version the export's answers use, and the study's own; returns them."""
    rubric_versions.add((study.rubric.key, study.rubric.version))
    rubrics = []
    for key, version in sorted(rubric_versions):
        rubric = Rubric.objects.get(key=key, version=version)
        rubrics.append(rubric)
        writers["rubric"].write((key, version, rubric.title, rubric.content_hash, canonical_json(rubric.definition)))
    return rubrics


def write_qualification_attempts(study, writers, pseudonyms) -> None:
    """Every scored qualification attempt, by pseudonym (a rater who skipped every item
    has no answers, hence no pseudonym: `rater-not-in-export`)."""
    retries = Counter(QualificationRetry.objects.filter(study=study).values_list("rater_id", flat=True))
    attempts = QualificationAttempt.objects.filter(study=study).select_related("rule")
    rows = [
        (
            pseudonyms.get(a.rater_id, "rater-not-in-export"),
            a.number,
            iso_timestamp(a.created_at),
            a.matched,
            a.compared,
            a.score,
            a.passed,
            a.rule.version,
            canonical_json(
                {
                    "threshold": a.rule.threshold,
                    "questions": a.rule.questions,
                    "tolerances": a.rule.tolerances,
                    "attempts_allowed": a.rule.attempts_allowed,
                }
            ),
            retries[a.rater_id],
        )
        for a in attempts
    ]
    writers["qualification_attempts"].write_many(sorted(rows, key=lambda row: (row[0], row[1])))


def write_quality_tables(study, writers, pseudonyms: dict[int, str]) -> None:
    """The exclusions and the raters' questions (docs/monitoring.md), with pseudonymous
    ids: a rater who flagged an item before answering anything has no `rater-NN` and is
    `flagger-NN` by their first flag; an admin who never rated is `study-admin`."""
    flaggers: dict[int, str] = {}
    flags = list(
        ItemFlag.objects.filter(study=study)
        .select_related("assignment__summary", "assignment__batch")
        .order_by("created_at", "pk")
    )
    for flag in flags:
        if flag.raised_by_id not in pseudonyms and flag.raised_by_id not in flaggers:
            flaggers[flag.raised_by_id] = f"flagger-{len(flaggers) + 1:02d}"

    def name(user_id: int | None) -> str | None:
        if user_id is None:
            return None
        return pseudonyms.get(user_id) or flaggers.get(user_id) or "study-admin"

    exclusions = RaterExclusion.objects.filter(batch__study=study).select_related("batch").order_by("created_at", "pk")
    for exclusion in exclusions:
        left_out = Assignment.objects.filter(
            batch=exclusion.batch_id, rater=exclusion.rater_id, state=Assignment.State.SUBMITTED
        ).count()
        writers["exclusions"].write(
            (
                exclusion.batch.name,
                name(exclusion.rater_id),
                exclusion.reason,
                name(exclusion.excluded_by_id),
                iso_timestamp(exclusion.created_at),
                left_out,
            )
        )
    for change in StudySettingChange.objects.filter(study=study).order_by("created_at", "pk"):
        writers["settings_changes"].write(
            (
                change.field,
                change.before,
                change.after,
                name(change.changed_by_id),
                change.via,
                iso_timestamp(change.created_at),
            )
        )
    for flag in flags:
        batch = flag.assignment.batch
        writers["flags"].write(
            (
                flag.assignment.summary.key,
                batch.name if batch is not None else None,
                name(flag.raised_by_id),
                flag.kind,
                flag.note,
                iso_timestamp(flag.created_at),
                flag.answer or None,
                name(flag.answered_by_id),
                iso_timestamp(flag.answered_at),
                flag.shared,
            )
        )


def write_onboarding(study, writer, pseudonyms: dict[int, str]) -> None:
    """The onboarding table (recruit.selectors.onboarding_rows): raters by their export
    pseudonym; someone with an onboarding trace and no answer in the study (a participant who
    declined, say) is `onboarded-NN`, numbered in the order of their first trace."""
    rows = onboarding_rows(study=study)
    others = [r["user_id"] for r in rows if r["user_id"] not in pseudonyms]
    width = max(2, len(str(len(others))))
    names = dict(pseudonyms) | {uid: f"onboarded-{i:0{width}d}" for i, uid in enumerate(others, start=1)}
    for r in sorted(rows, key=lambda r: names[r["user_id"]]):
        consent = [
            {"version": c["version"], "accepted": c["accepted"], "at": iso_timestamp(c["at"])} for c in r["consent"]
        ]
        writer.write(
            (
                names[r["user_id"]],
                r["panel"],
                r["outcome"],
                canonical_json(consent),
                iso_timestamp(r["instructions_opened_at"]),
                iso_timestamp(r["instructions_acknowledged_at"]),
                canonical_json(r["questionnaire"]) if r["questionnaire"] is not None else None,
                iso_timestamp(r["answered_at"]),
            )
        )
