"""The `agreement` and `correlate` commands on CSV files, against published values.

The data sets and their published values are the ones of test_agreement_golden.py (their
sources are named there); here they go through a CSV file and the command line.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from statsmodels.stats.inter_rater import cohens_kappa

from tests.stats.test_agreement_golden import (
    ANXIETY_R2,
    ANXIETY_R3,
    FLEISS_1971,
    SAS_TABLE,
    WIKI_FLEISS,
    KRIPP_4x12,
    tidy_from_contingency,
    tidy_from_count_table,
    tidy_from_rows,
)

AGREEMENT_KEYS = {
    "n_items",
    "n_raters",
    "percent_agreement",
    "fleiss_kappa",
    "randolph_kappa",
    "krippendorff_alpha",
    "cohen_kappa",
}


def write_ratings(path: Path, frame: pd.DataFrame) -> Path:
    """item,rater,value CSV; a NaN value becomes an empty cell (a missing rating)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(list(frame.columns))
        for row in frame.itertuples(index=False):
            writer.writerow(["" if isinstance(v, float) and np.isnan(v) else _cell(v) for v in row])
    return path


def _cell(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def run_json(*args: str) -> dict:
    text = run(*args, "--json")
    assert "NaN" not in text and "Infinity" not in text
    return json.loads(text)


# --- agreement: published values through the CLI ------------------------------------------


@pytest.fixture
def kripp_csv(tmp_path) -> Path:
    # 4 observers × 12 units with missing ratings written as empty cells.
    frame = tidy_from_rows(KRIPP_4x12, raters_are_rows=True)
    path = write_ratings(tmp_path / "kripp.csv", frame)
    assert ",," in path.read_text() or ",\n" in path.read_text()  # the missing ratings really are empty cells
    return path


def test_agreement_json_shape_and_krippendorff_2011_values(kripp_csv):
    report = run_json("agreement", str(kripp_csv), "--categories", "1,2,3,4,5")
    assert AGREEMENT_KEYS <= set(report)
    assert (report["n_items"], report["n_raters"]) == (12, 4)
    # Krippendorff (2011): unit 12 has one value only, so 11 of the 12 units are pairable.
    assert report["n_items_shared"] == 11
    # Krippendorff (2011): nominal .743, ordinal .815, interval .849; irrCAC: nominal 0.74342.
    alpha = report["krippendorff_alpha"]
    assert round(alpha["nominal"], 4) == 0.7434
    assert alpha["ordinal"] == pytest.approx(0.815, abs=5e-4)
    assert alpha["interval"] == pytest.approx(0.849, abs=5e-4)
    # irrCAC pa.coeff.raw 0.8181818 and gwet.ac1.raw 0.77544 on the same data.
    assert round(report["percent_agreement"], 4) == 0.8182
    assert round(report["gwet_ac1"], 4) == 0.7754
    assert len(report["cohen_kappa"]) == 6
    assert set(report["cohen_kappa"][0]) == {"rater_a", "rater_b", "n", "unweighted", "linear", "quadratic"}
    # Randolph over the full 5-point scale on the 8 units with 4 ratings: (0.75 - 1/5) / (4/5).
    assert round(report["randolph_kappa"], 4) == 0.6875


def test_agreement_wikipedia_fleiss_table(tmp_path):
    path = write_ratings(tmp_path / "wiki.csv", tidy_from_count_table(WIKI_FLEISS, [1, 2, 3, 4, 5]))
    report = run_json("agreement", str(path), "--categories", "1,2,3,4,5")
    # Wikipedia "Fleiss' kappa" worked example: 0.210 (0.2099 by hand, see the golden tests).
    assert round(report["fleiss_kappa"], 4) == 0.2099
    assert round(report["randolph_kappa"], 4) == 0.2225
    assert (report["n_items"], report["n_raters"]) == (10, 14)


def test_agreement_fleiss_1971(tmp_path):
    path = write_ratings(tmp_path / "fleiss.csv", tidy_from_rows(FLEISS_1971, raters_are_rows=False))
    report = run_json("agreement", str(path), "--categories", "1,2,3,4,5")
    assert round(report["fleiss_kappa"], 4) == 0.4302  # R irr kappam.fleiss(diagnoses): 0.4302445


def test_agreement_cohen_kappa_sas_table(tmp_path):
    path = write_ratings(tmp_path / "sas.csv", tidy_from_contingency(SAS_TABLE, [1, 2, 3]))
    (pair,) = run_json("agreement", str(path), "--categories", "1,2,3")["cohen_kappa"]
    # SAS PROC FREQ: simple kappa 0.4842, Cicchetti-Allison (linear) weighted kappa 0.4701.
    assert (pair["rater_a"], pair["rater_b"], pair["n"]) == ("A", "B", 19)
    assert round(pair["unweighted"], 4) == 0.4842
    assert round(pair["linear"], 4) == 0.4701


def test_agreement_default_scale_is_the_observed_values_and_categories_change_weighted_kappa(tmp_path):
    # R irr's anxiety data, raters 2 and 3: nobody used 5 on the 1-6 scale.
    frame = tidy_from_rows([ANXIETY_R2, ANXIETY_R3], raters_are_rows=True)
    path = write_ratings(tmp_path / "anxiety.csv", frame)
    (observed,) = run_json("agreement", str(path))["cohen_kappa"]
    # Without --categories the scale is [1, 2, 3, 4, 6]: R irr kappa2 "equal" 0.1459075, "squared" 0.2520325.
    assert round(observed["linear"], 4) == 0.1459
    assert round(observed["quadratic"], 4) == 0.2520
    (full,) = run_json("agreement", str(path), "--categories", "1,2,3,4,5,6")["cohen_kappa"]
    table = np.zeros((6, 6))
    for a, b in zip(ANXIETY_R2, ANXIETY_R3, strict=True):
        table[a - 1, b - 1] += 1
    assert full["linear"] == pytest.approx(cohens_kappa(table, wt="linear").kappa, abs=1e-10)
    assert round(full["linear"], 4) != 0.1459


def test_agreement_randolph_counts_categories_given_but_unused(tmp_path):
    # 4 items × 3 raters, nobody used 4: (2/3 - 1/4) / (3/4) = 5/9 with the full 1-4 scale,
    # (2/3 - 1/3) / (2/3) = 1/2 on the observed 1-3 only.
    frame = tidy_from_rows([[1, 1, 1], [1, 1, 2], [2, 2, 3], [3, 3, 3]], raters_are_rows=False)
    path = write_ratings(tmp_path / "unused.csv", frame)
    assert run_json("agreement", str(path), "--categories", "1,2,3,4")["randolph_kappa"] == pytest.approx(5 / 9)
    assert run_json("agreement", str(path))["randolph_kappa"] == pytest.approx(0.5)


def test_agreement_per_question(tmp_path):
    kripp = tidy_from_rows(KRIPP_4x12, raters_are_rows=True).assign(question="clarity")
    fleiss = tidy_from_rows(FLEISS_1971, raters_are_rows=False).assign(question="accuracy")
    fleiss["item"] = "f" + fleiss["item"].astype(str)
    path = write_ratings(tmp_path / "both.csv", pd.concat([kripp, fleiss]))
    report = run_json("agreement", str(path), "--categories", "1,2,3,4,5", "--question-column", "question")
    assert list(report) == ["questions"]
    assert set(report["questions"]) == {"clarity", "accuracy"}
    assert round(report["questions"]["clarity"]["krippendorff_alpha"]["nominal"], 4) == 0.7434
    assert round(report["questions"]["accuracy"]["fleiss_kappa"], 4) == 0.4302
    assert report["questions"]["accuracy"]["n_raters"] == 6


def test_agreement_undefined_values_are_null_not_nan(tmp_path):
    frame = pd.DataFrame({"item": [1, 1, 2, 2], "rater": ["a", "b", "a", "b"], "value": [3, 3, 3, 3]})
    path = write_ratings(tmp_path / "flat.csv", frame)
    report = run_json("agreement", str(path), "--categories", "1,2,3,4,5")
    assert report["fleiss_kappa"] is None
    assert report["krippendorff_alpha"] == {"nominal": None, "ordinal": None, "interval": None}
    assert report["percent_agreement"] == 1.0


def test_agreement_prints_a_readable_table_without_json(kripp_csv):
    text = run("agreement", str(kripp_csv), "--categories", "1,2,3,4,5")
    assert re.search(r"Krippendorff's alpha \(nominal\)\s+0\.7434\n", text)
    assert "percent agreement" in text and "0.8182" in text
    assert "Cohen's kappa per rater pair" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


# --- agreement: bad files --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("item,rater,score\n1,a,1\n1,b,2\n", [], r"missing column\(s\) 'value'"),
        ("item,rater,value\n1,a,1\n1,b,three\n", [], r"line 3, column 'value': 'three' is not a number"),
        ("item,rater,value\n1,a,1\n2,a,2\n3,a,3\n", [], "at least 2 raters with ratings, found 1"),
        ("item,rater,value\n1,a,1\n1,b,\n", [], "at least 2 raters with ratings, found 1"),
        ("", [], "the file is empty"),
        ("item,rater,value\n", [], "header but no rows"),
        ("item,rater,value\n1,a,1\n1,b,7\n", ["--categories", "1,2,3"], "outside the scale"),
        ("item,rater,value\n1,a,1\n1,a,2\n1,b,2\n", [], r"Several rows for the same \(item, rater\)"),
        ("item,rater,value\n1,a,3\n1,b,3\n", [], "pass the full scale with --categories"),
        ("item,rater,value\n1,a,1\n1,b,2\n", ["--categories", "1,two"], "comma-separated numbers"),
        ("item,rater,value\n1,a,1\n,b,2\n", [], r"line 3, column 'item': the cell is empty"),
        ("item,rater,value\n1,a,1\n1,b,2\n", ["--question-column", "q"], r"missing column\(s\) 'q'"),
    ],
)
def test_agreement_refuses_bad_files_with_a_clear_message(tmp_path, content, args, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CommandError, match=message):
        run("agreement", str(path), *args, "--json")


def test_agreement_refuses_a_missing_file(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run("agreement", str(tmp_path / "nope.csv"))


def _manage(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    return subprocess.run(
        [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=settings.BASE_DIR,
        check=False,
    )


def test_commands_exit_non_zero_on_a_bad_file_and_zero_on_a_good_one(tmp_path, kripp_csv):
    bad = tmp_path / "bad.csv"
    bad.write_text("item,rater,value\n1,a,1\n1,b,x\n", encoding="utf-8")
    failed = _manage("agreement", str(bad), "--json")
    assert failed.returncode != 0
    assert "'x' is not a number" in failed.stderr
    assert failed.stdout == ""
    ok = _manage("agreement", str(kripp_csv), "--categories", "1,2,3,4,5", "--json")
    assert ok.returncode == 0, ok.stderr
    assert round(json.loads(ok.stdout)["krippendorff_alpha"]["nominal"], 4) == 0.7434
    failed = _manage("correlate", str(kripp_csv), "--human", "value", "--metric", "nope", "--json")
    assert failed.returncode != 0
    assert "missing column(s) 'nope'" in failed.stderr


# --- correlate --------------------------------------------------------------------------------


def write_scores(path: Path, columns: dict[str, list]) -> Path:
    frame = pd.DataFrame(columns)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(list(frame.columns))
        for row in frame.itertuples(index=False):
            writer.writerow(["" if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in row])
    return path


def test_correlate_json_shape_and_hand_worked_values(tmp_path):
    # human 1..5 vs metric 2,1,4,3,5: rho = 1 - 6*4/(5*24) = 0.8; tau = (8 - 2)/10 = 0.6 with the
    # exact two-sided p = 2 * 14/120 (permutations of 5 with <= 2 inversions: 1 + 4 + 9).
    # The sixth row has no human score and is dropped.
    path = write_scores(
        tmp_path / "scores.csv",
        {"human": [1, 2, 3, 4, 5, None], "rouge": [2, 1, 4, 3, 5, 9]},
    )
    report = run_json("correlate", str(path), "--human", "human", "--metric", "rouge")
    assert list(report) == ["metrics"]
    rouge = report["metrics"]["rouge"]
    assert {"n", "spearman", "kendall_tau_b", "acc_eq"} <= set(rouge)
    assert (rouge["n"], rouge["dropped"]) == (5, 1)
    assert rouge["spearman"]["rho"] == pytest.approx(0.8)
    assert {"rho", "p"} <= set(rouge["spearman"])
    assert rouge["kendall_tau_b"]["tau"] == pytest.approx(0.6)
    assert rouge["kendall_tau_b"]["p"] == pytest.approx(28 / 120)
    assert set(rouge["acc_eq"]) == {"at_zero", "value", "epsilon"}


def test_correlate_acc_eq_tie_calibration_by_hand(tmp_path):
    # h = 1,1,1,2 and m = 0,1,2,10: at eps 0 only the 3 concordant pairs are right (3/6); at
    # eps 2 the three human ties are metric ties too (6/6). See test_metaeval for every eps.
    path = write_scores(tmp_path / "ties.csv", {"h": [1, 1, 1, 2], "m": [0, 1, 2, 10]})
    acc = run_json("correlate", str(path), "--human", "h", "--metric", "m")["metrics"]["m"]["acc_eq"]
    assert acc == {"at_zero": pytest.approx(0.5), "value": pytest.approx(1.0), "epsilon": 2.0}


def test_correlate_several_metrics_groups_and_holm(tmp_path):
    # Groups x (the example above) and y (h = m = 1,2,3): one shared eps; eps = 0 gives
    # (1/2 + 1)/2 = 3/4, eps = 2 gives (1 + 0)/2 = 1/2, so eps = 0 wins (see test_metaeval).
    path = write_scores(
        tmp_path / "grouped.csv",
        {
            "h": [1, 1, 1, 2, 1, 2, 3],
            "m": [0, 1, 2, 10, 1, 2, 3],
            "flat": [1, 1, 1, 1, 1, 1, 1],
            "doc": ["x", "x", "x", "x", "y", "y", "y"],
        },
    )
    report = run_json("correlate", str(path), "--human", "h", "--metric", "m", "--metric", "flat", "--group", "doc")
    m = report["metrics"]["m"]
    assert m["acc_eq"] == {"at_zero": pytest.approx(0.75), "value": pytest.approx(0.75), "epsilon": 0.0}
    # A constant metric has no ranking: undefined, so null, and not part of Holm's family,
    # which leaves m's p-value unadjusted.
    flat = report["metrics"]["flat"]
    assert flat["spearman"]["rho"] is None and flat["kendall_tau_b"]["tau"] is None
    assert m["spearman"]["p_holm"] == pytest.approx(m["spearman"]["p"])


def test_correlate_prints_a_readable_table(tmp_path):
    path = write_scores(tmp_path / "s.csv", {"human": [1, 2, 3, 4, 5], "rouge": [2, 1, 4, 3, 5]})
    text = run("correlate", str(path), "--human", "human", "--metric", "rouge")
    assert "against human" in text
    row = next(line for line in text.splitlines() if line.startswith("rouge"))
    assert "0.8000" in row and "0.6000" in row


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("human,rouge\n1,2\n2,3\n", ["--metric", "bleu"], r"missing column\(s\) 'bleu'"),
        ("human,rouge\n1,2\n2,high\n", ["--metric", "rouge"], r"line 3, column 'rouge': 'high' is not a number"),
        ("human,rouge\n1,2\nnan,3\n", ["--metric", "rouge"], r"line 3, column 'human': 'nan' is not a number"),
        ("", ["--metric", "rouge"], "the file is empty"),
        ("human,rouge,doc\n1,2,a\n2,3,\n", ["--metric", "rouge", "--group", "doc"], "column 'doc': the cell is empty"),
        ("human,rouge\n1,2\n2,3\n", ["--metric", "human"], "must not include the human column"),
    ],
)
def test_correlate_refuses_bad_files_with_a_clear_message(tmp_path, content, args, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CommandError, match=message):
        run("correlate", str(path), "--human", "human", *args, "--json")
