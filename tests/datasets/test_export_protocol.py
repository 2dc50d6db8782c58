"""A study's frozen protocols travel with its dataset: protocol.json, checked by
SHA256SUMS, each document hashing to its recorded SHA-256, and the card citing it."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

from datasets.exporting import export_dataset
from planning.protocol import canonical_json
from planning.services import freeze_protocol
from tests.analysis.reports import rated_study
from tests.planning.plans import pointwise_plan

pytestmark = pytest.mark.django_db

PLAN = pointwise_plan(planned_n=6, exclusion_rules=["Attention check"])


def test_the_export_holds_every_protocol_version_and_the_card_cites_the_latest(tmp_path):
    study, admin = rated_study(n_summaries=6, raters=("ra", "rb"))
    first = freeze_protocol(study=study, by=admin, plan=dict(PLAN))
    second = freeze_protocol(study=study, by=admin, plan=dict(PLAN, planned_n=8), note="Two more sources.")
    out = export_dataset(study=study, out_dir=tmp_path / "out").out_dir
    records = json.loads((out / "protocol.json").read_text(encoding="utf-8"))["protocols"]
    assert [r["version"] for r in records] == [1, 2]
    for record, protocol in zip(records, (first, second), strict=True):
        assert record["sha256"] == protocol.sha256
        # Anyone can check the hash from the file alone.
        assert hashlib.sha256(canonical_json(record["document"]).encode()).hexdigest() == record["sha256"]
    assert records[1]["note"] == "Two more sources."
    assert admin.username not in (out / "protocol.json").read_text(encoding="utf-8")
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "## Pre-registered analysis plan" in card and second.sha256 in card
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert checked.returncode == 0 and "protocol.json: OK" in checked.stdout


def test_a_study_without_a_protocol_exports_no_protocol_file(tmp_path):
    study, _admin = rated_study(n_summaries=3, raters=("ra",))
    out = export_dataset(study=study, out_dir=tmp_path / "out").out_dir
    assert not (out / "protocol.json").exists()
    assert "Pre-registered" not in (out / "README.md").read_text(encoding="utf-8")


def test_the_protocol_records_batch_designs_without_raters_accounts(tmp_path):
    from annotate.services.batches import create_batch
    from tests.factories import UserFactory

    study, admin = rated_study(n_summaries=4, raters=("ra",))
    secret = UserFactory(username="secret-panel-id-5f3a")
    create_batch(study=study, name="main", raters=[secret], design="k_raters", k=1, seed=4)
    protocol = freeze_protocol(study=study, by=admin, plan=dict(PLAN, planned_n=4))
    (batch,) = protocol.document["batches"]
    assert batch["design"]["design"] == "k_raters" and "raters" not in batch["design"]
    out = export_dataset(study=study, out_dir=tmp_path / "out").out_dir
    assert "secret-panel-id-5f3a" not in (out / "protocol.json").read_text(encoding="utf-8")
