"""The study report as files: CSV tables and JSON, derived from the report dict alone.
CSV text cells are made safe to open in a spreadsheet (core/csv_cells.py); the JSON
files keep the exact text.

``report_files(report)`` gives {file name: text}; the `analyze_study` command writes
them (plus the plots) to a folder and the report page offers each as a download. What
each file holds is documented in docs/analysis.md.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from core.csv_cells import csv_document, csv_text

__all__ = ["FILE_NAMES", "report_files"]

FILE_NAMES = (
    "report.json",
    "agreement.json",
    "agreement.csv",
    "cohen_kappa.csv",
    "histograms.csv",
    "item_means.csv",
    "by_group.csv",
    "option_counts.csv",
    "metrics.csv",
    "correlation.json",
    "correlation.csv",
    "meta_evaluation.csv",
    "by_system.csv",
    "comparisons_wins.csv",
    "comparisons_ranking.csv",
    "comparisons_position_bias.csv",
    "system_scores.csv",
    "system_pairs.csv",
    "after_adjudication.csv",
    "after_adjudication_items.csv",
    "retrieval.csv",
)

GROUP_COLUMNS = ["field", "question", "group", "n", "mean", "ci_low", "ci_high", "sd", "median", "q1", "q3", "iqr"]
PAIR_COLUMNS = ["field", "question", "a", "b", "n_sources", "mean_a", "mean_b", "mean_difference", "ci_low", "ci_high"]
PAIR_COLUMNS += ["n_nonzero", "wilcoxon_statistic", "p_value", "p_holm"]
ADJUDICATED_COLUMNS = ["question", "generator", "n_decided", "raters_n", "raters_mean", "raters_ci_low"]
ADJUDICATED_COLUMNS += [
    "raters_ci_high",
    "adjudicated_n",
    "adjudicated_mean",
    "adjudicated_ci_low",
    "adjudicated_ci_high",
]
ADJUDICATED_ITEM_COLUMNS = ["key", "generator", "question", "raters", "raters_mean", "consensus", "batch", "item"]

RETRIEVAL_COLUMNS = [
    "engine",
    "regime",
    "n_questions",
    "n_reranked",
    *(
        f"{name}{suffix}"
        for name in ("precision", "recall", "f1", "retrieved_recall", "source_included")
        for suffix in ("", "_sd", "_n")
    ),
]

_AGREEMENT_STATISTICS = (
    "percent_agreement",
    "fleiss_kappa",
    "randolph_kappa",
    "gwet_ac1",
    "pabak",
    "krippendorff_alpha.nominal",
    "krippendorff_alpha.ordinal",
    "krippendorff_alpha.interval",
)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def _csv(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """CSV text of the rows. Text cells (rater names, item keys, labels, error messages)
    go through core.csv_cells' rule so a spreadsheet never runs them as formulas;
    numbers are left as numbers, so a negative kappa stays -0.5."""
    import pandas as pd  # here, not at the top: the report page imports this module

    frame = pd.DataFrame(rows, columns=columns)
    for column in frame.columns:
        # Only the cells that change are set: mapping a whole column would let pandas
        # re-infer its type (a column of 1 and None would be written as 1.0).
        values = frame[column].tolist()
        safe = [csv_text(v) if isinstance(v, str) else v for v in values]
        changed = [a is not b for a, b in zip(values, safe, strict=True)]
        if any(changed):
            frame.loc[changed, column] = [v for v, c in zip(safe, changed, strict=True) if c]
    text = frame.to_csv(index=False, lineterminator="\n")
    if "\r" in text:  # pandas leaves a lone CR in a cell bare: quote it (core/csv_cells.py)
        crlf = frame.to_csv(index=False, lineterminator="\r\n")
        text = csv_document(csv.reader(io.StringIO(crlf, newline="")))
    return text


def statistic_value(report: dict[str, Any], name: str) -> Any:
    """A statistic of an agreement report by its flat name (``krippendorff_alpha.ordinal``)."""
    head, _, level = name.partition(".")
    value = report[head]
    return value[level] if level else value


# The figures that do not apply to answers without an order (a choice, a tickbox option):
# they would read the options' listing order as ranks or distances.
_ORDERED_ONLY = ("krippendorff_alpha.ordinal", "krippendorff_alpha.interval")


def _nominal(section: dict[str, Any]) -> bool:
    return section.get("level") == "nominal"


def agreement_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (question, option of a tickbox question, statistic) with its value and
    bootstrap interval; a nominal question (a choice, a tickbox option) has no ordinal or
    interval figure."""
    rows = []
    for section in report["agreement"]:
        result = section["report"]
        for name in _AGREEMENT_STATISTICS:
            if _nominal(section) and name in _ORDERED_ONLY:
                continue
            ci = section["ci"].get(name, {})
            rows.append(
                {
                    "question": section["question"],
                    "option": section.get("option"),
                    "statistic": name,
                    "value": statistic_value(result, name) if result else None,
                    "ci_low": ci.get("low"),
                    "ci_high": ci.get("high"),
                    "n_undefined_resamples": ci.get("n_undefined"),
                    "n_resamples": section["n_resamples"],
                    "n_items_shared": result.get("n_items_shared") if result else None,
                    "n_items": result["n_items"] if result else None,
                    "n_raters": result["n_raters"] if result else None,
                    "error": section["error"],
                }
            )
    return rows


def cohen_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for section in report["agreement"]:
        for pair in (section["report"] or {}).get("cohen_kappa", []):
            row = {"question": section["question"], "option": section.get("option"), **pair}
            for weighting in ("unweighted", "linear", "quadratic"):
                ci = section["ci"].get(f"cohen_kappa.{pair['rater_a']}|{pair['rater_b']}.{weighting}", {})
                row[f"{weighting}_ci_low"] = ci.get("low")
                row[f"{weighting}_ci_high"] = ci.get("high")
                if _nominal(section) and weighting != "unweighted":
                    # Weights need ordered answers; options have none.
                    row[weighting] = row[f"{weighting}_ci_low"] = row[f"{weighting}_ci_high"] = None
            rows.append(row)
    return rows


def correlation_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (scope, metric): scope "mean" (mean human score) or "rater:<name>"."""
    correlation = report["correlation"]
    scopes = [("mean", correlation.get("mean", {}))]
    scopes += [(f"rater:{r}", m) for r, m in correlation.get("per_rater", {}).items()]
    rows = []
    for scope, metrics in scopes:
        for metric, m in metrics.items():
            rows.append(
                {
                    "scope": scope,
                    "human_question": correlation["human_question"],
                    "metric": metric,
                    "n": m["n"],
                    "dropped": m["dropped"],
                    "spearman_rho": m["spearman"]["rho"],
                    "spearman_p": m["spearman"]["p"],
                    "spearman_p_holm": m["spearman"]["p_holm"],
                    "kendall_tau_b": m["kendall_tau_b"]["tau"],
                    "kendall_p": m["kendall_tau_b"]["p"],
                    "kendall_p_holm": m["kendall_tau_b"]["p_holm"],
                    "acc_eq_at_zero": m["acc_eq"]["at_zero"],
                    "acc_eq": m["acc_eq"]["value"],
                    "acc_eq_epsilon": m["acc_eq"]["epsilon"],
                    "kl_divergence": m.get("kl_divergence"),
                }
            )
    return rows


META_COLUMNS = ["level", "metric", "question", "n", "kendall_tau_b", "kendall_p", "spearman_rho", "spearman_p"]
META_COLUMNS += ["acc_eq", "acc_eq_epsilon", "kl_divergence", "ci_low", "ci_high", "n_undefined_resamples"]


def meta_evaluation_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (level, metric, human question or "avg"): stats.metaeval_questions."""
    section = report.get("meta_evaluation") or {}
    return [
        {"level": level.removesuffix("_level"), "metric": metric, "question": question, **values}
        for level in ("summary_level", "system_level")
        for metric, by_question in section.get(level, {}).items()
        for question, values in by_question.items()
    ]


def system_rows(report: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per generator (FactPICO Table 3/12 shape, stats.systems) and the columns:
    each question's mean, the average, the text metrics, and per span question its count
    and share of summaries (and of those not factual, where asked)."""
    section = report.get("by_system") or {}
    questions = section.get("questions", [])
    columns = ["generator", "n_summaries", "n_rated", *questions, "average", "n_words", "delta_fk", "rougeL"]
    rows = []
    for row in section.get("rows", []):
        flat = {k: row[k] for k in ("generator", "n_summaries", "n_rated", "average", "n_words", "delta_fk", "rougeL")}
        flat.update(row["scores"])
        for question, counts in row["spans"].items():
            for name, value in counts.items():
                column = f"{question}.{name}"
                flat[column] = value
                if column not in columns:
                    columns.append(column)
        rows.append(flat)
    return rows, columns


def comparison_rows(report: dict[str, Any], part: str) -> list[dict[str, Any]]:
    """One table of the comparisons section, every preference question's rows with it."""
    rows = []
    for section in report.get("comparisons") or []:
        if part == "ranking":
            ranking = section.get("ranking") or {}
            rows += [
                {"question": section["question"], "n_resamples": ranking.get("n_resamples"), **row}
                for row in ranking.get("systems") or []
            ]
        else:
            rows += [{"question": section["question"], **row} for row in section.get(part) or []]
    return rows


def compare_group_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (field, question, group): stats.compare.describe of its summaries' scores."""
    section = report.get("compare") or {}
    return [
        {"field": g["field"], "question": g["question"], **row} for g in section.get("groups", []) for row in g["rows"]
    ]


def compare_pair_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (field, question, pair of systems): stats.compare.paired_comparisons."""
    section = report.get("compare") or {}
    return [
        {"field": p["field"], "question": p["question"], **row} for p in section.get("pairs", []) for row in p["rows"]
    ]


def report_files(report: dict[str, Any]) -> dict[str, str]:
    """Every downloadable file of the report, name -> text (CSV or JSON)."""
    histograms = [
        {"question": h["question"], "rater": r["rater"], "value": value, "count": count}
        for h in report["histograms"]
        for r in h["raters"]
        for value, count in zip(h["scale"], r["counts"], strict=True)
    ]
    means = [{"question": m["question"], **row} for m in report["item_means"] for row in m["rows"]]
    groups = [{"field": g["field"], "question": g["question"], **row} for g in report["by_group"] for row in g["rows"]]
    options = [
        {"question": o["question"], "rater": row["rater"], "n_rated": row["n_rated"], "option": option["value"],
         "label": option["label"], "count": row[option["value"]]}
        for o in report["option_counts"]
        for row in o["rows"]
        for option in o["options"]
    ]  # fmt: skip
    metric_columns = ["item", "key", "source", "human_mean"]
    metric_columns += [c for c in (report["metrics"][0] if report["metrics"] else {}) if c not in metric_columns]
    group_columns = ["field", "question"] + ([k for k in groups[0] if k not in ("field", "question")] if groups else [])
    return {
        "report.json": _json(report),
        "agreement.json": _json(report["agreement"]),
        "agreement.csv": _csv(
            agreement_rows(report),
            [
                "question",
                "option",
                "statistic",
                "value",
                "ci_low",
                "ci_high",
                "n_undefined_resamples",
                "n_resamples",
                "n_items_shared",
                "n_items",
                "n_raters",
                "error",
            ],
        ),  # fmt: skip
        "cohen_kappa.csv": _csv(
            cohen_rows(report),
            [
                "question",
                "option",
                "rater_a",
                "rater_b",
                "n",
                "unweighted",
                "unweighted_ci_low",
                "unweighted_ci_high",
                "linear",
                "linear_ci_low",
                "linear_ci_high",
                "quadratic",
                "quadratic_ci_low",
                "quadratic_ci_high",
            ],
        ),  # fmt: skip
        "histograms.csv": _csv(histograms, ["question", "rater", "value", "count"]),
        "item_means.csv": _csv(means, ["question", "item", "key", "n_ratings", "mean", "min", "max"]),
        "by_group.csv": _csv(groups, group_columns),
        "option_counts.csv": _csv(options, ["question", "rater", "n_rated", "option", "label", "count"]),
        "metrics.csv": _csv(report["metrics"], metric_columns),
        "correlation.json": _json(report["correlation"]),
        "correlation.csv": _csv(
            correlation_rows(report),
            [
                "scope",
                "human_question",
                "metric",
                "n",
                "dropped",
                "spearman_rho",
                "spearman_p",
                "spearman_p_holm",
                "kendall_tau_b",
                "kendall_p",
                "kendall_p_holm",
                "acc_eq_at_zero",
                "acc_eq",
                "acc_eq_epsilon",
                "kl_divergence",
            ],
        ),  # fmt: skip
        "meta_evaluation.csv": _csv(meta_evaluation_rows(report), META_COLUMNS),
        "by_system.csv": _csv(*system_rows(report)),
        "comparisons_wins.csv": _csv(
            comparison_rows(report, "win_tie_loss"),
            ["question", "a", "b", "n", "wins_a", "ties", "wins_b", "win_rate_a", "ci_low", "ci_high"],
        ),
        "comparisons_ranking.csv": _csv(
            comparison_rows(report, "ranking"),
            [
                "question",
                "system",
                "strength",
                "probability",
                "ci_low",
                "ci_high",
                "place",
                "place_kept",
                "n_resamples",
            ],
        ),
        "comparisons_position_bias.csv": _csv(
            comparison_rows(report, "position_bias"),
            ["question", "rater", "n", "left", "left_share", "ci_low", "ci_high", "p_value"],
        ),
        "system_scores.csv": _csv(compare_group_rows(report), GROUP_COLUMNS),
        "system_pairs.csv": _csv(compare_pair_rows(report), PAIR_COLUMNS),
        "after_adjudication.csv": _csv(
            (report.get("after_adjudication") or {}).get("by_system", []), ADJUDICATED_COLUMNS
        ),
        "after_adjudication_items.csv": _csv(
            (report.get("after_adjudication") or {}).get("items", []), ADJUDICATED_ITEM_COLUMNS
        ),
        "retrieval.csv": _csv(report.get("retrieval") or [], RETRIEVAL_COLUMNS),
    }
