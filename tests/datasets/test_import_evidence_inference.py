import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from annotate.models import Finding, Source
from annotate.services.rubrics import load_builtin_rubric
from tests.factories import StudyFactory, sentence_count

DATA = Path(settings.BASE_DIR) / "fixtures" / "evidence_inference" / "abstracts.jsonl"


def records(n=3):
    with DATA.open(encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(n), handle, strict=False)]


@pytest.fixture
def fp_study(db):
    return StudyFactory(slug="fp", rubric=load_builtin_rubric(key="factpico"))


def write(tmp_path, recs):
    path = tmp_path / "ei.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    return path


def test_abstracts_become_sources_and_prompts_become_findings(fp_study, tmp_path, capsys):
    recs = records()
    call_command("import_evidence_inference", str(write(tmp_path, recs)), "--study", "fp")
    assert Source.objects.filter(study=fp_study).count() == 3
    first = Source.objects.get(key=recs[0]["pmcid"])
    assert first.text == recs[0]["abstract"]
    assert first.licence == recs[0]["license"] and first.attribution == recs[0]["attribution"]
    assert first.external_ids == {
        "pmcid": recs[0]["pmcid"],
        "pmid": recs[0]["citation"]["pmid"],
        "doi": recs[0]["citation"]["doi"],
    }
    findings = list(first.findings.order_by("index"))
    assert [f.external_id for f in findings] == [str(p["prompt_id"]) for p in recs[0]["prompts"]]
    for finding, prompt in zip(findings, recs[0]["prompts"], strict=True):
        assert first.text[finding.start : finding.end] == finding.evidence == prompt["evidence"]
        assert (finding.intervention, finding.comparator, finding.outcome, finding.label) == (
            prompt["intervention"],
            prompt["comparator"],
            prompt["outcome"],
            prompt["label"],
        )
    assert all(s.ref == recs[0]["pmcid"] for s in first.sentences)
    assert "source: 3 created" in capsys.readouterr().out
    # Idempotent.
    counts = (Source.objects.count(), Finding.objects.count(), sentence_count())
    call_command("import_evidence_inference", str(write(tmp_path, recs)), "--study", "fp")
    assert (Source.objects.count(), Finding.objects.count(), sentence_count()) == counts


def test_the_whole_shipped_file_imports(fp_study):
    call_command("import_evidence_inference", str(DATA), "--study", "fp")
    assert Source.objects.count() == 150
    assert Finding.objects.count() == 388  # the data README's count of prompts


def test_bad_evidence_offsets_name_line_and_field_and_import_nothing(fp_study, tmp_path):
    recs = records()
    recs[2]["prompts"][1]["evidence_start"] += 3
    with pytest.raises(CommandError) as excinfo:
        call_command("import_evidence_inference", str(write(tmp_path, recs)), "--study", "fp")
    assert 'line 3: field "prompts[1].evidence_start": evidence offsets do not match' in str(excinfo.value)
    assert not Source.objects.exists() and not Finding.objects.exists()


def test_missing_prompt_field_is_named(fp_study, tmp_path):
    recs = records()
    del recs[1]["prompts"][0]["outcome"]
    with pytest.raises(CommandError, match='line 2: field "prompts\\[0\\].outcome": is required'):
        call_command("import_evidence_inference", str(write(tmp_path, recs)), "--study", "fp")


def test_only_selected_pmcids_and_unknown_ones_are_reported(fp_study, tmp_path):
    recs = records()
    path = write(tmp_path, recs)
    call_command("import_evidence_inference", str(path), "--study", "fp", "--pmcid", recs[1]["pmcid"])
    assert list(Source.objects.values_list("key", flat=True)) == [recs[1]["pmcid"]]
    with pytest.raises(CommandError, match="not in the file: PMC0"):
        call_command("import_evidence_inference", str(path), "--study", "fp", "--pmcid", "PMC0")


def test_unknown_study_is_a_clear_error(db, tmp_path):
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("import_evidence_inference", str(DATA), "--study", "nope")


def test_an_article_whose_statement_forbids_commercial_use_is_stored_as_restricted(fp_study, tmp_path):
    from datasets.exporting import licence_allows_text

    with DATA.open(encoding="utf-8") as handle:
        record = next(json.loads(line) for line in handle if '"PMC3664406"' in line)
    assert record["license"] == "CC BY 2.5"  # as shipped, although its statement says otherwise
    call_command("import_evidence_inference", str(write(tmp_path, [record])), "--study", "fp")
    source = Source.objects.get(key="PMC3664406")
    assert source.licence.startswith("CC BY-NC 2.5")
    assert not licence_allows_text(source.licence)


def test_the_query_count_does_not_grow_with_the_number_of_abstracts(db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from datasets.importing import import_evidence_inference

    def count(n: int, slug: str) -> int:
        study = StudyFactory(slug=slug, rubric=load_builtin_rubric(key="factpico"))
        lines = [json.dumps(r) + "\n" for r in records(n)]
        with CaptureQueriesContext(connection) as captured:
            result = import_evidence_inference(study=study, lines=lines)
        assert result.created["source"] == n
        assert Finding.objects.filter(source__study=study).count() == sum(len(r["prompts"]) for r in records(n))
        return len(captured.captured_queries)

    small, large = count(2, "ei-small"), count(20, "ei-large")
    assert small == large, (small, large)
