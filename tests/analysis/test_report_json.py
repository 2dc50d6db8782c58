"""The report's one JSON form (analysis.report_json): the stored payload reads back into
the dataclasses (analysis.sections) and writes out as the same JSON, and the API's report
is the text of report.json."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from analysis import services
from analysis.report_files import report_files
from analysis.report_json import report_from_payload, report_json, report_payload
from analysis.sections import AgreementSection, Interval, StudyReport
from tests.analysis.reports import open_computed, rated_study


@pytest.fixture(autouse=True)
def few_resamples(monkeypatch):
    monkeypatch.setattr(services, "BOOTSTRAP_RESAMPLES", 20)


@pytest.fixture
def rated(db):
    return rated_study(n_summaries=8)


def file_text(value) -> str:
    """How report.json is written (indented, UTF-8 kept, a final newline)."""
    return json.dumps(value, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def test_a_stored_payload_reads_back_into_dataclasses_and_writes_the_same_json(rated):
    study, _admin = rated
    payload = json.loads(json.dumps(services.compute_study_report(study=study, n_resamples=20)))
    report = report_from_payload(payload)
    assert isinstance(report, StudyReport)
    assert isinstance(report.agreement[0], AgreementSection)
    assert isinstance(report.agreement[0].ci["fleiss_kappa"], Interval)
    assert report.histograms[0].raters[0].counts == tuple(payload["histograms"][0]["raters"][0]["counts"])
    assert report_payload(report) == payload
    # Same keys in the same order, so the same text.
    assert report_json(report) == file_text(payload)


def test_a_key_the_report_does_not_know_is_refused_not_dropped(rated):
    study, _admin = rated
    payload = services.compute_study_report(study=study, n_resamples=20)
    payload["compare"] = {**payload["compare"], "surprise": 1}
    with pytest.raises(ValueError, match="surprise"):
        report_from_payload(payload)


def test_keys_the_report_leaves_out_stay_out():
    """Correlations without a human question have no "mean" or "per_rater" key at all."""
    payload = {"human_question": None, "metric_columns": ["rouge1"]}
    from analysis.report_json import from_payload, to_payload
    from analysis.sections import Correlation

    assert to_payload(from_payload(Correlation, payload)) == payload
    assert to_payload(Correlation(human_question="overall", metric_columns=(), mean={})) == {
        "human_question": "overall",
        "metric_columns": [],
        "mean": {},
    }


def test_not_a_number_is_written_as_null():
    interval = Interval(low=float("nan"), high=float("inf"), n_undefined=3)
    assert report_json(interval) == file_text({"low": None, "high": None, "n_undefined": 3})


def test_the_api_report_is_report_json_byte_for_byte(client, rated):
    study, admin = rated
    client.force_login(admin)
    api = open_computed(client, reverse("api:study-analysis", args=[study.slug]))
    assert api.status_code == 200 and api.json()["status"] == "done"
    download = client.get(reverse("analysis:download", args=[study.slug, "report.json"]))
    assert download.status_code == 200
    text = download.content.decode()
    # The API's `result`, written as report.json is, is report.json: same keys, same order, same values.
    assert file_text(api.json()["result"]) == text
    # And both are what the one writer gives for the stored report.
    from analysis.models import AnalysisResult

    stored = AnalysisResult.objects.get(study=study, phase="all").result
    assert report_json(report_from_payload(stored)) == text == report_files(stored)["report.json"]


def test_the_api_keeps_a_finished_report_rendered_and_renders_anew_when_its_row_changes(client, rated):
    """The second request answers the same bytes without reading the stored payload; a change
    to any other field of the row (here its error text, set without touching the payload)
    gives a new answer."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from analysis.models import AnalysisResult

    study, admin = rated
    client.force_login(admin)
    url = reverse("api:study-analysis", args=[study.slug])
    first = open_computed(client, url)
    assert first.status_code == 200 and first.json()["status"] == "done"
    payload_column = '"analysis_analysisresult"."result"'
    with CaptureQueriesContext(connection) as queries:
        again = client.get(url)
    assert again.status_code == 200 and again["Content-Type"] == "application/json"
    assert again.content == first.content
    assert not [q["sql"] for q in queries.captured_queries if payload_column in q["sql"]]

    AnalysisResult.objects.filter(study=study, phase="all").update(error="a note")
    with CaptureQueriesContext(connection) as queries:
        changed = client.get(url)
    assert changed.json()["error"] == "a note"
    assert changed.json()["result"] == first.json()["result"]
    assert [q["sql"] for q in queries.captured_queries if payload_column in q["sql"]]
    # An indented answer asked for is kept apart from the compact one.
    indented = client.get(url, HTTP_ACCEPT="application/json; indent=2")
    assert indented.content.startswith(b'{\n  "uuid"') and indented.json() == changed.json()
    assert client.get(url).content == changed.content
