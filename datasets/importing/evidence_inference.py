"""The import of Evidence Inference abstracts (sources with their findings, the prompts)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from annotate.models import (
    Finding,
    Source,
    Study,
)
from core.exceptions import ApplicationError
from datasets.exporting.licences import licence_allows_text
from datasets.importing.records import NON_COMMERCIAL, clean_source
from datasets.importing.writing import FINDING_FIELDS, RecordWriter, refuse_rated_findings
from datasets.pipeline import (
    Fields,
    ImportLineError,
    ImportResult,
    RowWriter,
    batches,
    json_objects,
    set_changed,
)


def _clean_findings(line: int, record: dict, text: str) -> list[dict]:
    prompts = record.get("prompts")
    if not isinstance(prompts, list):
        raise ImportLineError(line, "prompts", "must be a list")
    findings = []
    for i, prompt in enumerate(prompts):
        f = Fields(line, prompt if isinstance(prompt, dict) else {})
        where = f"prompts[{i}]"
        try:
            start, end = f.integer("evidence_start"), f.integer("evidence_end")
            evidence = f.string("evidence")
            values = {
                "external_id": str(prompt.get("prompt_id", "")),
                "intervention": f.string("intervention"),
                "comparator": f.string("comparator", required=False),
                "outcome": f.string("outcome"),
                "label": f.string("label", required=False, max_length=100),
            }
        except ImportLineError as exc:
            raise ImportLineError(line, f"{where}.{exc.field}", exc.message.split(": ", 2)[-1]) from None
        if not start < end <= len(text) or text[start:end] != evidence:
            raise ImportLineError(line, f"{where}.evidence_start", "evidence offsets do not match the abstract text")
        findings.append({"start": start, "end": end, "evidence": evidence, **values})
    return findings


def _evidence_inference_source(study: Study, record: dict) -> dict:
    """The source record an Evidence Inference abstract makes (before cleaning)."""
    citation = record.get("citation") if isinstance(record.get("citation"), dict) else {}
    licence = record.get("license")
    statement = record.get("license_statement") or ""
    if isinstance(licence, str) and NON_COMMERCIAL.search(statement) and licence_allows_text(licence):
        # The corpus's filter missed articles whose own statement forbids commercial
        # use (e.g. PMC3664406); the stored licence says so, and exports withhold them.
        # Whatever the recorded form ("Public Domain", a URL, ...), the appended note
        # alone takes it out of the gate's allow-list, which matches whole statements.
        licence = licence.replace("CC BY", "CC BY-NC", 1) + " (the article's statement forbids commercial use)"
    ids = (("pmcid", record.get("pmcid")), ("pmid", citation.get("pmid")), ("doi", citation.get("doi")))
    return {
        "study": study.slug,
        "key": record.get("pmcid"),
        "title": record.get("title"),
        "licence": licence,
        "licence_url": record.get("license_url"),
        "attribution": record.get("attribution"),
        "copyright": record.get("copyright_statement"),
        "external_ids": {k: v for k, v in ids if v},
        "metadata": {
            "journal": citation.get("journal"),
            "year": citation.get("year"),
            "origin": record.get("source") or "Evidence Inference 2.0",
        },
        "text": record.get("abstract"),
        "ref": record.get("pmcid"),
    }


def import_evidence_inference(*, study: Study, lines: Iterable[str], only: set[str] | None = None) -> ImportResult:
    """Import Evidence Inference 2.0 records (fixtures/evidence_inference/README.md):
    each abstract becomes a Source of `study` (sentences split from the abstract, each
    with the PMCID as reference) and each prompt a Finding with its evidence span.
    All or nothing; idempotent by PMCID and prompt order."""
    writer = RecordWriter()
    writer.studies[study.slug] = study
    cleaned = []
    for number, record in json_objects(lines):
        if only is not None and record.get("pmcid") not in only:
            continue
        d = clean_source(Fields(number, _evidence_inference_source(study, record)))
        cleaned.append((number, d, _clean_findings(number, record, d["text"])))
    if only is not None:
        missing = sorted(only - {d["key"] for _, d, _ in cleaned})
        if missing:
            raise ApplicationError(f"not in the file: {', '.join(missing)}")
    with transaction.atomic():
        for chunk in batches(cleaned):
            for number, d, _ in chunk:
                writer.add("source", number, d)
            writer.flush()
            _write_prompt_findings(writer.rows, study, chunk)
    return writer.result


def _write_prompt_findings(rows: RowWriter, study: Study, chunk: list[tuple[int, dict, list[dict]]]) -> None:
    """The findings of a chunk of sources, in a fixed number of queries: existing ones
    looked up at once, new ones created, changed ones updated unless rated."""
    keys = [d["key"] for _, d, _ in chunk]
    source_ids = dict(Source.objects.filter(study=study, key__in=keys).values_list("key", "pk"))
    existing = {(f.source_id, f.index): f for f in Finding.objects.filter(source__in=source_ids.values())}
    created, changed = [], []
    for number, d, findings in chunk:
        source_id = source_ids[d["key"]]
        for index, values in enumerate(findings):
            finding = existing.get((source_id, index))
            if finding is None:
                created.append(Finding(source_id=source_id, index=index, **values))
            elif set_changed(finding, values):
                changed.append((number, f"prompts[{index}]", finding))
    refuse_rated_findings(changed)
    rows.update([f for _, _, f in changed], FINDING_FIELDS)
    rows.create(created)
