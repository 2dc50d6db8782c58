"""The dataset export of a rated demo study: tables, card, licence gate, pseudonyms,
determinism and checksums (docs/export-format.md)."""

import csv
import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotate.models import Assignment, Batch, Rating, Revision, Source, Span, Study
from annotate.services.adjudication import open_rerating, record_consensus
from annotate.services.batches import create_batch
from annotate.services.ratings import reopen_rating, submit_rating
from datasets.demo import (
    DEMO_STUDY,
    EVIDENCE_RATIONALES,
    FACTPICO_STUDY,
    factpico_demo_answers,
    litsumm_demo_answers,
)
from datasets.exporting import (
    TABLES,
    DatasetImportError,
    export_dataset,
    verify_checksums,
)

# --- a rated demo ------------------------------------------------------------------------------


def _submit(assignment: Assignment, answers: dict, rationales: dict) -> Revision:
    assignment.refresh_from_db()
    return submit_rating(
        assignment=assignment,
        rater=assignment.rater,
        answers=answers,
        rationales=rationales,
        version=assignment.version,
    )


def rate_demo() -> None:
    """Load the demo and submit every assignment of both raters in both studies; then a
    small LitSumm batch with a consensus answer and a post-discussion re-rating."""
    call_command("load_demo")
    users = {u.username: u for u in get_user_model().objects.filter(username__in=["rater1", "rater2"])}
    for index, name in enumerate(["rater1", "rater2"]):
        # The two studies it knows (the pairwise demo's answers are its own: test_pairwise_demo).
        mine = Assignment.objects.filter(rater=users[name], study__slug__in=[DEMO_STUDY, FACTPICO_STUDY])
        for assignment in mine.select_related("summary__source", "study"):
            if assignment.study.slug == FACTPICO_STUDY:
                _submit(assignment, *factpico_demo_answers(assignment, index))
            else:
                _submit(assignment, *litsumm_demo_answers(assignment.summary.key, index))
    study = Study.objects.get(slug=DEMO_STUDY)
    raters = [users["rater1"], users["rater2"]]
    batch = create_batch(
        study=study, name="double", raters=raters, design="k_raters", k=2, n=3, seed=1, filters={"assigned": False}
    )
    for index, rater in enumerate(raters):
        for assignment in Assignment.objects.filter(batch=batch, rater=rater).select_related("summary"):
            _submit(assignment, *litsumm_demo_answers(assignment.summary.key, index + 7))
    first = Assignment.objects.filter(batch=batch).order_by("summary__key").first()
    admin = get_user_model().objects.get(username="admin")
    record_consensus(
        batch=batch, summary=first.summary, question="overall", value=3, rationale="Agreed.", decided_by=admin
    )
    open_rerating(batch=batch, summaries=[first.summary])
    for assignment in Assignment.objects.filter(batch=batch, summary=first.summary):
        _submit(assignment, {"overall": 3, "failure_modes": [], "feedback": "After discussion."}, {})


@pytest.fixture
def rated_demo(db):
    rate_demo()


def export(study_slug: str, out: Path, **options):
    return export_dataset(study=Study.objects.get(slug=study_slug), out_dir=out, **options)


def all_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def jsonl_rows(folder: Path, table: str) -> list[dict]:
    with (folder / "jsonl" / f"{table}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


# --- tests -------------------------------------------------------------------------------------


def test_every_table_is_written_in_every_format_with_the_same_rows(rated_demo, tmp_path):
    result = export(FACTPICO_STUDY, tmp_path / "out")
    out = tmp_path / "out"
    for table in TABLES:
        lines = (out / "jsonl" / f"{table}.jsonl").read_text(encoding="utf-8").splitlines()
        with (out / "csv" / f"{table}.csv").open(encoding="utf-8", newline="") as handle:
            csv_rows = list(csv.reader(handle))
        parquet = pq.read_table(out / "parquet" / f"{table}.parquet")
        assert csv_rows[0] == [name for name, _ in TABLES[table]]
        assert parquet.column_names == csv_rows[0]
        assert len(lines) == len(csv_rows) - 1 == parquet.num_rows == result.counts[table], table
    for table in ("sources", "summaries", "findings", "ratings", "spans", "raters", "rubric"):
        assert result.counts[table] > 0, table
    assert (out / "README.md").exists() and (out / "LICENSE").exists() and (out / "study.json").exists()


def test_ratings_table_holds_every_counting_answer_with_its_rationale(rated_demo, tmp_path):
    export(FACTPICO_STUDY, tmp_path / "out")
    rows = jsonl_rows(tmp_path / "out", "ratings")
    study = Study.objects.get(slug=FACTPICO_STUDY)
    stored = Rating.objects.filter(revision__assignment__study=study, revision__status="submitted").exclude(
        revision__assignment__batch__kind="calibration"  # left out unless include_calibration
    )
    assert len(rows) == stored.count()
    evidence = [r for r in rows if r["question"] == "evidence"]
    # The demo's rationale for each evidence score (datasets.demo), with the finding it is about.
    assert evidence and all(r["finding"] and r["rationale"] == EVIDENCE_RATIONALES[r["score"]] for r in evidence)
    na = [r for r in rows if r["value"] == "na"]
    assert na and all(r["score"] is None and r["question"] == "comparator" for r in na)
    assert {r["rater"] for r in rows} == {"rater-01", "rater-02"}
    spans = jsonl_rows(tmp_path / "out", "spans")
    assert (
        len(spans)
        == Span.objects.filter(revision__assignment__study=study)
        .exclude(revision__assignment__batch__kind="calibration")
        .count()
    )
    linked = [s for s in spans if s["link_start"] is not None]
    assert linked and all(s["question"] == "contradictions" and s["link_text"] for s in linked)


def test_answer_rows_come_in_the_documented_order(rated_demo, tmp_path):
    """Summary key, batch (none first), rater pseudonym, phase, question, then the
    finding's index (ratings) or the span's index (spans), in every answer table."""
    out = export(FACTPICO_STUDY, tmp_path / "f", formats=["jsonl"]).out_dir
    finding_index = {f["uuid"]: f["index"] for f in jsonl_rows(out, "findings")}

    def revision_key(row):
        return (row["summary_key"], row["batch"] is not None, row["batch"] or "", row["rater"], row["phase"])

    ratings = jsonl_rows(out, "ratings")
    keys = [
        (*revision_key(r), r["question"], -1 if r["finding"] is None else finding_index[r["finding"]]) for r in ratings
    ]
    assert len(set(keys)) == len(keys) and keys == sorted(keys)
    spans = jsonl_rows(out, "spans")
    keys = [(*revision_key(s), s["question"], s["index"]) for s in spans]
    assert len(spans) > 1 and len(set(keys)) == len(keys) and keys == sorted(keys)
    # The LitSumm demo has answers in two batches (its calibration batch is left out), in both phases.
    rows = jsonl_rows(export(DEMO_STUDY, tmp_path / "d", formats=["jsonl"]).out_dir, "ratings")
    keys = [(*revision_key(r), r["question"]) for r in rows]
    assert {r["batch"] for r in rows} == {"main", "double"} and {r["phase"] for r in rows} == {
        "initial",
        "post_discussion",
    }
    assert keys == sorted(keys)


def test_a_reopened_and_resubmitted_rating_exports_only_its_newest_revision(rated_demo, tmp_path):
    assignment = Assignment.objects.filter(study__slug=DEMO_STUDY, batch__name="main").order_by("summary__key").first()
    first = Rating.objects.get(revision__assignment=assignment, revision__number=1, question="feedback").value
    reopen_rating(assignment=assignment, rater=assignment.rater, version=assignment.version)
    _submit(assignment, {"overall": 5, "failure_modes": [], "feedback": "Second thoughts."}, {})
    rows = jsonl_rows(export(DEMO_STUDY, tmp_path / "out", formats=["jsonl"]).out_dir, "ratings")
    feedback = [
        (r["rater"], r["revision_number"], r["value"])
        for r in rows
        if r["summary_key"] == assignment.summary.key and r["batch"] == "main" and r["question"] == "feedback"
    ]
    # One answer per rater of the double-rated item: this rater's revision 2; revision 1 is not exported.
    assert len(feedback) == 2 and (2, "Second thoughts.") in [(n, text) for _, n, text in feedback]
    assert first != "Second thoughts." and first not in [text for _, _, text in feedback]


def test_card_front_matter_parses_and_says_cc_by_4_0(rated_demo, tmp_path):
    out = tmp_path / "out"
    export(DEMO_STUDY, out)
    card = (out / "README.md").read_text(encoding="utf-8")
    header = front_matter(card)
    assert header["license"] == "cc-by-4.0"
    assert header["language"] == ["en"]
    assert header["size_categories"] == ["n<1K"]
    assert header["pretty_name"] == Study.objects.get(slug=DEMO_STUDY).title
    for config in header["configs"]:
        for data_file in config["data_files"]:
            assert (out / data_file["path"]).is_file()
    assert "## Agreement" in card and "| `overall` |" in card
    assert "## Attribution" in card and "## Citation" in card
    for source in Source.objects.filter(study__slug=DEMO_STUDY):
        assert f"`{source.key}`: " in card and source.licence in card


def test_a_non_commercial_source_is_withheld_and_listed(rated_demo, tmp_path):
    source = Source.objects.filter(study__slug=FACTPICO_STUDY).order_by("key").first()
    source.licence = "CC BY-NC 4.0"
    source.save()
    longest = max(source.sentences, key=lambda s: len(s.text)).text
    out = tmp_path / "out"
    result = export(FACTPICO_STUDY, out)
    assert result.withheld_sources == (source.key,)
    for name, data in all_files(out).items():
        if not name.endswith(".parquet"):
            assert longest.encode() not in data, name
    for table in ("sources", "findings", "spans"):
        for row in pq.read_table(out / "parquet" / f"{table}.parquet").to_pylist():
            assert longest not in json.dumps(row, ensure_ascii=False), table
    row = next(r for r in jsonl_rows(out, "sources") if r["source_key"] == source.key)
    assert row["text"] is None and row["sentences"] is None and row["text_withheld"] is True
    summaries = [r for r in jsonl_rows(out, "summaries") if r["source_key"] == source.key]
    assert summaries and all(r["source_withheld"] for r in summaries)
    card = (out / "README.md").read_text(encoding="utf-8")
    withheld_section = card.split("**Withheld sources (1).**", 1)[1].split("##", 1)[0]
    assert f"- `{source.key}`" in withheld_section
    assert json.loads((out / "study.json").read_text())["withheld_sources"] == [source.key]


def test_include_restricted_exports_the_text_and_the_card_says_other(rated_demo, tmp_path):
    source = Source.objects.filter(study__slug=FACTPICO_STUDY).order_by("key").first()
    source.licence = "CC BY-NC 4.0"
    source.save()
    out = tmp_path / "out"
    export(FACTPICO_STUDY, out, include_restricted=True)
    row = next(r for r in jsonl_rows(out, "sources") if r["source_key"] == source.key)
    assert row["text"] == source.text
    assert front_matter((out / "README.md").read_text(encoding="utf-8"))["license"] == "other"


def test_no_username_name_or_email_appears_in_any_file(rated_demo, tmp_path):
    users = get_user_model().objects.all()
    secrets = []
    for n, user in enumerate(users):
        user.username = f"who-{n}-x7q"
        user.first_name, user.last_name, user.email = f"Firstname{n}q", f"Lastname{n}q", f"person{n}@example.org"
        user.save()
        secrets += [user.username, user.first_name, user.last_name, user.email]
    for slug in (DEMO_STUDY, FACTPICO_STUDY):
        out = tmp_path / slug
        export(slug, out)
        for name, data in all_files(out).items():
            if name.endswith(".parquet"):
                data = json.dumps(pq.read_table(out / name).to_pylist(), ensure_ascii=False).encode()
            for secret in secrets + ["rater1", "rater2"]:
                assert secret.encode() not in data, (name, secret)


def test_two_exports_are_byte_identical(rated_demo, tmp_path):
    for slug in (DEMO_STUDY, FACTPICO_STUDY):
        first = all_files(export(slug, tmp_path / slug / "a").out_dir)
        second = all_files(export(slug, tmp_path / slug / "b").out_dir)
        assert list(first) == list(second)
        assert first == second


def test_sha256sums_lists_and_verifies_every_file(rated_demo, tmp_path):
    out = tmp_path / "out"
    export(DEMO_STUDY, out)
    listed = {}
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split("  ", 1)
        listed[path] = digest
    files = {name for name in all_files(out) if name != "SHA256SUMS"}
    assert set(listed) == files
    for path, digest in listed.items():
        assert hashlib.sha256((out / path).read_bytes()).hexdigest() == digest
    verify_checksums(out)
    with (out / "jsonl" / "ratings.jsonl").open("a") as handle:
        handle.write("\n")
    with pytest.raises(DatasetImportError, match="ratings.jsonl: checksum"):
        verify_checksums(out)


def test_phase_and_calibration_choose_the_answers_that_count(rated_demo, tmp_path):
    Batch.objects.filter(name="double").update(kind=Batch.Kind.CALIBRATION)
    default = jsonl_rows(export(DEMO_STUDY, tmp_path / "a").out_dir, "ratings")
    assert all(r["batch"] == "main" for r in default)
    with_pilot = jsonl_rows(export(DEMO_STUDY, tmp_path / "b", include_calibration=True).out_dir, "ratings")
    assert {r["phase"] for r in with_pilot if r["batch"] == "double"} == {"initial", "post_discussion"}
    later = export(DEMO_STUDY, tmp_path / "c", include_calibration=True, phase="post_discussion").out_dir
    rows = jsonl_rows(later, "ratings")
    assert rows and {r["phase"] for r in rows} == {"post_discussion"}
    assert {r["value"] for r in rows if r["question"] == "overall"} == {3}


def test_a_non_empty_folder_or_unknown_format_is_refused(rated_demo, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(Exception, match="not empty"):
        call_command("export_dataset", "--study", DEMO_STUDY, "--out", str(tmp_path / "full"))
    with pytest.raises(Exception, match="formats must be some of"):
        call_command("export_dataset", "--study", DEMO_STUDY, "--out", str(tmp_path / "new"), "--format", "xml")


def test_export_command_writes_only_the_requested_formats(rated_demo, tmp_path, capsys):
    call_command("export_dataset", "--study", DEMO_STUDY, "--out", str(tmp_path / "out"), "--format", "jsonl")
    assert "Exported to" in capsys.readouterr().out
    assert (tmp_path / "out" / "jsonl").is_dir()
    assert not (tmp_path / "out" / "csv").exists() and not (tmp_path / "out" / "parquet").exists()
    header = front_matter((tmp_path / "out" / "README.md").read_text(encoding="utf-8"))
    assert all(f["path"].startswith("jsonl/") for c in header["configs"] for f in c["data_files"])


def test_claim_explanations_of_a_withheld_source_are_blanked_like_its_quotes(db, tmp_path):
    from annotate.services.summaries import record_claims
    from tests.factories import SourceFactory, StudyFactory, SummaryFactory

    study = StudyFactory()
    quotes = {"open": "Drug A lowered blood pressure.", "closed": "Drug B raised the heart rate."}
    for key, licence in (("open", "CC BY 4.0"), ("closed", "CC BY-NC 4.0")):
        source = SourceFactory(study=study, key=key, licence=licence, text=f"{quotes[key]} It was well tolerated.")
        summary = SummaryFactory(source=source, key=f"summary-{key}", text=f"Summary of {key}.")
        record_claims(
            summary=summary,
            claims=[{"text": f"Summary of {key}.", "verdict": "supported", "explanation": f'Source: "{quotes[key]}"'}],
        )
    result = export(study.slug, tmp_path / "out", formats=["jsonl", "csv", "parquet"])
    assert result.withheld_sources == ("closed",)
    claims = {row["summary_key"]: row for row in jsonl_rows(result.out_dir, "claims")}
    assert claims["summary-open"]["explanation"] == f'Source: "{quotes["open"]}"'
    assert claims["summary-closed"]["explanation"] is None
    assert claims["summary-closed"]["text"] == "Summary of closed."  # the summary's own words stay
    parquet = pq.read_table(result.out_dir / "parquet" / "claims.parquet").to_pylist()
    assert [row["explanation"] for row in parquet] == [None, f'Source: "{quotes["open"]}"']
    for path in result.out_dir.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".csv", ".md"):
            assert quotes["closed"] not in path.read_text(encoding="utf-8"), path
    card = (result.out_dir / "README.md").read_text(encoding="utf-8")
    assert "`explanation` of claims" in card
    # The re-import stores a blanked explanation as empty, and exports the same again.
    from annotate.models import Claim, Summary
    from datasets.exporting import import_dataset

    for model in (Claim, Summary, Source, Study):  # an empty instance (human work protects nothing here)
        model.objects.all().delete()
    import_dataset(folder=result.out_dir, allow_withheld=True)
    stored = dict(Claim.objects.values_list("summary__key", "explanation"))
    assert stored == {"summary-closed": "", "summary-open": f'Source: "{quotes["open"]}"'}
    again = export(study.slug, tmp_path / "again", formats=["jsonl", "csv", "parquet"])
    assert all_files(again.out_dir) == all_files(result.out_dir)
