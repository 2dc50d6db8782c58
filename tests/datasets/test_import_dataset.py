"""Round trip: export the rated demo, empty the database, import the folders, and get
the same answers, the same agreement and byte-identical re-exports."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotate.models import ConsensusAnswer, Rating, Source, Study
from annotate.selectors.contents import rubric_definition
from annotate.selectors.counting import latest_submitted_revisions
from annotate.selectors.frames import ratings_frame
from annotate.selectors.queue import revision_answers
from datasets.demo import DEMO_STUDY, FACTPICO_STUDY
from datasets.exporting import rater_pseudonyms, sha256sums
from stats.agreement import agreement_report
from tests.datasets.test_export import all_files, export, rate_demo

SLUGS = (DEMO_STUDY, FACTPICO_STUDY)


def normalised_answers(study: Study) -> list:
    """Every counting revision's answers, keyed by what survives a round trip."""
    names = rater_pseudonyms(study=study)
    rows = []
    for revision in latest_submitted_revisions(study=study, phase="all", include_calibration=True):
        a = revision.assignment
        answers, rationales = revision_answers(revision)
        rows.append(
            (
                a.summary.key,
                a.batch.name if a.batch_id else "",
                names[a.rater_id],
                revision.phase,
                revision.number,
                revision.rubric.key,
                revision.rubric.version,
                revision.submitted_at.isoformat(),
                json.dumps(answers, sort_keys=True),
                json.dumps(rationales, sort_keys=True),
            )
        )
    return sorted(rows)


def agreement(study: Study) -> dict:
    """The analysis app's agreement per scale question, rater ids replaced by pseudonyms."""
    names = {str(uid): name for uid, name in rater_pseudonyms(study=study).items()}
    frame = ratings_frame(study=study)
    frame = frame.assign(rater=frame["rater"].map(names))
    result = {}
    for q in rubric_definition(study.rubric).questions:
        if q.kind != "scale":
            continue
        part = (
            frame[frame["question"] == q.key]
            .sort_values(["phase", "submitted_at"], kind="stable")
            .drop_duplicates(["item", "rater"], keep="last")
        )
        data = part.assign(value=part["score"])[["item", "rater", "value"]]
        result[q.key] = agreement_report(data, [float(v) for v in q.values]).to_json_dict()
    return result


@pytest.fixture
def exported(transactional_db, tmp_path):
    rate_demo()
    before = {}
    for slug in SLUGS:
        study = Study.objects.get(slug=slug)
        export(slug, tmp_path / "first" / slug, include_calibration=True)
        before[slug] = (normalised_answers(study), agreement(study))
    return before


def test_round_trip_gives_the_same_answers_agreement_and_files(exported, tmp_path):
    assert exported[DEMO_STUDY][1]["overall"]["n_raters"] == 2
    assert ConsensusAnswer.objects.exists()
    call_command("flush", interactive=False)
    assert not Study.objects.exists() and not Rating.objects.exists()
    for slug in SLUGS:
        call_command("import_dataset", str(tmp_path / "first" / slug))
    for slug in SLUGS:
        study = Study.objects.get(slug=slug)
        answers, stats = exported[slug]
        assert normalised_answers(study) == answers
        assert agreement(study) == stats
        again = export(slug, tmp_path / "second" / slug, include_calibration=True).out_dir
        assert all_files(again) == all_files(tmp_path / "first" / slug)
    user = get_user_model().objects.get(username=f"rater-01@{DEMO_STUDY}")
    assert not user.has_usable_password()


def test_importing_into_a_database_that_has_the_study_changes_nothing(exported, tmp_path):
    counts = Rating.objects.count()
    with pytest.raises(CommandError, match="already exists"):
        call_command("import_dataset", str(tmp_path / "first" / DEMO_STUDY))
    assert Rating.objects.count() == counts


def test_a_changed_file_is_refused(exported, tmp_path):
    folder = tmp_path / "first" / DEMO_STUDY
    path = folder / "jsonl" / "ratings.jsonl"
    path.write_text(path.read_text(encoding="utf-8").replace('"value":1,', '"value":2,'), encoding="utf-8")
    call_command("flush", interactive=False)
    with pytest.raises(CommandError, match="checksum does not match"):
        call_command("import_dataset", str(folder))
    assert not Study.objects.exists()


def test_an_invalid_answer_is_refused_naming_it_and_nothing_is_imported(exported, tmp_path):
    folder = tmp_path / "first" / DEMO_STUDY
    path = folder / "jsonl" / "ratings.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    target = next(r for r in rows if r["question"] == "failure_modes")
    target["value"] = ["no_such_option"]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"]
    (folder / "SHA256SUMS").write_text(sha256sums(folder, files), encoding="utf-8")
    call_command("flush", interactive=False)
    with pytest.raises(CommandError, match=r"failure_modes: unknown option\(s\): no_such_option") as error:
        call_command("import_dataset", str(folder))
    assert target["summary_key"] in str(error.value) and target["rater"] in str(error.value)
    assert not Study.objects.exists() and not get_user_model().objects.exists()


def test_withheld_sources_need_allow_withheld(transactional_db, tmp_path):
    rate_demo()
    # A source with answers in the main batch (exported by default).
    source = (
        Source.objects.filter(study__slug=FACTPICO_STUDY, summaries__assignments__batch__name="main")
        .order_by("key")
        .first()
    )
    source.licence = "CC BY-NC 4.0"
    source.save()
    folder = export(FACTPICO_STUDY, tmp_path / "out").out_dir
    call_command("flush", interactive=False)
    with pytest.raises(CommandError, match=f"source '{source.key}': its text was withheld"):
        call_command("import_dataset", str(folder))
    assert not Study.objects.exists()
    call_command("import_dataset", str(folder), "--allow-withheld")
    imported = Source.objects.get(study__slug=FACTPICO_STUDY, key=source.key)
    assert imported.text == "" and imported.licence == "CC BY-NC 4.0"
    assert Rating.objects.filter(revision__assignment__summary__source=imported).exists()


def test_claims_judged_by_people_survive_the_round_trip(transactional_db, tmp_path):
    """Per-claim answers point at claims by uuid; the export keeps the claims' uuids, so a
    re-imported study has the same answers, rationales and claims, and re-exports the same files."""
    from pathlib import Path

    from annotate.selectors.claims import claim_units
    from annotate.services.ratings import submit_rating
    from tests.factories import AssignmentFactory, UserFactory

    call_command("import_jsonl", str(Path(__file__).resolve().parents[2] / "fixtures" / "claims-example.jsonl"))
    study = Study.objects.get(slug="claims-example")
    for n, labels in ((1, ["supported", "not_supported", "supported"]), (2, ["supported", "cannot_tell", "supported"])):
        rater = UserFactory(username=f"claims-rater{n}")
        summary = study.summaries.get(key="asthma-1")
        assignment = AssignmentFactory(summary=summary, rater=rater, position=0)
        ids = [u.id for u in claim_units(summary)]
        submit_rating(
            assignment=assignment,
            rater=rater,
            answers={"claims_supported": dict(zip(ids, labels, strict=True)), "overall": 2 + n},
            rationales={"claims_supported": {i: f"reason {n} for {i}" for i in ids}},
            version=1,
        )
    before = normalised_answers(study)
    assert len(before) == 2 and "cannot_tell" in before[1][-2] + before[0][-2]
    export("claims-example", tmp_path / "first", include_calibration=True)
    call_command("flush", interactive=False)
    call_command("import_dataset", str(tmp_path / "first"))
    study = Study.objects.get(slug="claims-example")
    assert normalised_answers(study) == before
    again = export("claims-example", tmp_path / "second", include_calibration=True).out_dir
    assert all_files(again) == all_files(tmp_path / "first")


def test_a_sentence_that_is_not_its_span_of_the_text_is_refused_and_nothing_is_imported(exported, tmp_path):
    """The sentences are stored as spans of the source's text (Source.sentence_spans): a
    file whose sentence says other words than its span would change what raters saw."""
    folder = tmp_path / "first" / DEMO_STUDY
    path = folder / "jsonl" / "sources.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    target = next(r for r in rows if r["sentences"])
    target["sentences"][1]["text"] = "Words the source never had."  # a JSON column: a list in the file
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"]
    (folder / "SHA256SUMS").write_text(sha256sums(folder, files), encoding="utf-8")
    call_command("flush", interactive=False)
    expected = f"source '{target['source_key']}': field \"sentences\": sentence 1: its text is not the text's"
    with pytest.raises(CommandError, match=expected):
        call_command("import_dataset", str(folder))
    assert not Study.objects.exists() and not Source.objects.exists()
