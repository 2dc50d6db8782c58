"""The study report as files: CSV tables and JSON, derived from the report alone
(analysis.sections; the JSON files through analysis.report_json).
CSV text cells are made safe to open in a spreadsheet (core/csv_cells.py); the JSON
files keep the exact text.

``report_files(report)`` gives {file name: text}; the `analyze_study` command writes
them (plus the plots) to a folder and the report page offers each as a download. What
each file holds is documented in docs/analysis.md.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from analysis.report_json import json_text, report_from_payload, report_json, to_payload
from analysis.sections import AgreementSection, StudyReport
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
    "severity.csv",
    "drift.csv",
    "protocol_deviations.csv",
    "methods.md",
    "methods.tex",
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


def statistic_value(report: Mapping[str, Any], name: str) -> Any:
    """A statistic of an agreement report by its flat name (``krippendorff_alpha.ordinal``)."""
    head, _, level = name.partition(".")
    value = report[head]
    return value[level] if level else value


# The figures that do not apply to answers without an order (a choice, a tickbox option):
# they would read the options' listing order as ranks or distances.
_ORDERED_ONLY = ("krippendorff_alpha.ordinal", "krippendorff_alpha.interval")

AGREEMENT_COLUMNS = ["question", "option", "statistic", "value", "ci_low", "ci_high", "n_undefined_resamples"]
AGREEMENT_COLUMNS += ["n_resamples", "n_items_shared", "n_items", "n_raters", "error"]
_WEIGHTED = [f"{w}{suffix}" for w in ("unweighted", "linear", "quadratic") for suffix in ("", "_ci_low", "_ci_high")]
COHEN_COLUMNS = ["question", "option", "rater_a", "rater_b", "n", *_WEIGHTED]
CORRELATION_COLUMNS = ["scope", "human_question", "metric", "n", "dropped", "spearman_rho", "spearman_p"]
CORRELATION_COLUMNS += ["spearman_p_holm", "kendall_tau_b", "kendall_p", "kendall_p_holm", "acc_eq_at_zero", "acc_eq"]
CORRELATION_COLUMNS += ["acc_eq_epsilon", "kl_divergence"]
WIN_COLUMNS = ["question", "a", "b", "n", "wins_a", "ties", "wins_b", "win_rate_a", "ci_low", "ci_high"]
RANKING_COLUMNS = ["question", "system", "strength", "probability", "ci_low", "ci_high", "place", "place_kept"]
RANKING_COLUMNS += ["n_resamples"]
POSITION_COLUMNS = ["question", "rater", "n", "left", "left_share", "ci_low", "ci_high", "p_value"]


def _agreement_row(section: AgreementSection, name: str) -> dict[str, Any]:
    result = section.report
    ci = section.ci.get(name)
    return {
        "question": section.question,
        "option": section.option,
        "statistic": name,
        "value": statistic_value(result, name) if result else None,
        "ci_low": ci.low if ci else None,
        "ci_high": ci.high if ci else None,
        "n_undefined_resamples": ci.n_undefined if ci else None,
        "n_resamples": section.n_resamples,
        "n_items_shared": result.get("n_items_shared") if result else None,
        "n_items": result["n_items"] if result else None,
        "n_raters": result["n_raters"] if result else None,
        "error": section.error,
    }


def agreement_rows(report: StudyReport) -> list[dict[str, Any]]:
    """One row per (question, option of a tickbox question, statistic) with its value and
    bootstrap interval; a nominal question (a choice, a tickbox option) has no ordinal or
    interval figure."""
    return [
        _agreement_row(section, name)
        for section in report.agreement
        for name in _AGREEMENT_STATISTICS
        if not (section.nominal and name in _ORDERED_ONLY)
    ]


def cohen_rows(report: StudyReport) -> list[dict[str, Any]]:
    rows = []
    for section in report.agreement:
        for pair in (section.report or {}).get("cohen_kappa", []):
            row = {"question": section.question, "option": section.option, **pair}
            for weighting in ("unweighted", "linear", "quadratic"):
                ci = section.ci.get(f"cohen_kappa.{pair['rater_a']}|{pair['rater_b']}.{weighting}")
                row[f"{weighting}_ci_low"] = ci.low if ci else None
                row[f"{weighting}_ci_high"] = ci.high if ci else None
                if section.nominal and weighting != "unweighted":
                    # Weights need ordered answers; options have none.
                    row[weighting] = row[f"{weighting}_ci_low"] = row[f"{weighting}_ci_high"] = None
            rows.append(row)
    return rows


def correlation_rows(report: StudyReport) -> list[dict[str, Any]]:
    """One row per (scope, metric): scope "mean" (mean human score) or "rater:<name>"."""
    correlation = report.correlation
    scopes = [("mean", correlation.mean or {})]
    scopes += [(f"rater:{r}", m) for r, m in (correlation.per_rater or {}).items()]
    rows = []
    for scope, metrics in scopes:
        for metric, m in metrics.items():
            rows.append(
                {
                    "scope": scope,
                    "human_question": correlation.human_question,
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


def meta_evaluation_rows(report: StudyReport) -> list[dict[str, Any]]:
    """One row per (level, metric, human question or "avg"): stats.metaeval_questions."""
    section = report.meta_evaluation
    return [
        {"level": level.removesuffix("_level"), "metric": metric, "question": question, **values}
        for level, table in (("summary_level", section.summary_level), ("system_level", section.system_level))
        for metric, by_question in table.items()
        for question, values in by_question.items()
    ]


_SYSTEM_FIELDS = ("generator", "n_summaries", "n_rated", "average", "n_words", "delta_fk", "rougeL")


def system_rows(report: StudyReport) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per generator (FactPICO Table 3/12 shape, stats.systems) and the columns:
    each question's mean, the average, the text metrics, and per span question its count
    and share of summaries (and of those not factual, where asked)."""
    section = report.by_system
    questions = list(section.questions) if section else []
    columns = ["generator", "n_summaries", "n_rated", *questions, "average", "n_words", "delta_fk", "rougeL"]
    rows = []
    for row in section.rows if section else ():
        flat = {name: getattr(row, name) for name in _SYSTEM_FIELDS}
        flat.update(row.scores)
        for question, counts in row.spans.items():
            for name, value in counts.items():
                column = f"{question}.{name}"
                flat[column] = value
                if column not in columns:
                    columns.append(column)
        rows.append(flat)
    return rows, columns


def comparison_rows(report: StudyReport, part: str) -> list[dict[str, Any]]:
    """One table of the comparisons section, every preference question's rows with it."""
    rows = []
    for section in report.comparisons:
        if part == "ranking":
            ranking = section.ranking or {}
            rows += [
                {"question": section.question, "n_resamples": ranking.get("n_resamples"), **row}
                for row in ranking.get("systems") or []
            ]
        else:
            rows += [{"question": section.question, **row} for row in getattr(section, part) or []]
    return rows


def compare_group_rows(report: StudyReport) -> list[dict[str, Any]]:
    """One row per (field, question, group): stats.compare.describe of its summaries' scores."""
    return [{"field": g.field, "question": g.question, **row} for g in report.compare.groups for row in g.rows]


def compare_pair_rows(report: StudyReport) -> list[dict[str, Any]]:
    """One row per (field, question, pair of systems): stats.compare.paired_comparisons."""
    return [{"field": p.field, "question": p.question, **row} for p in report.compare.pairs for row in p.rows]


def to_row(value: Any) -> dict[str, Any]:
    """A dataclass row as the dict a CSV writer takes."""
    return to_payload(value)


def _histogram_rows(report: StudyReport) -> list[dict[str, Any]]:
    return [
        {"question": h.question, "rater": r.rater, "value": value, "count": count}
        for h in report.histograms
        for r in h.raters
        for value, count in zip(h.scale, r.counts, strict=True)
    ]


def _option_rows(report: StudyReport) -> list[dict[str, Any]]:
    return [
        {"question": o.question, "rater": row["rater"], "n_rated": row["n_rated"], "option": option.value,
         "label": option.label, "count": row[option.value]}
        for o in report.option_counts
        for row in o.rows
        for option in o.options
    ]  # fmt: skip


def _table_files(report: StudyReport) -> dict[str, str]:
    """The CSV files of the ratings: agreement, histograms, means, groups, options."""
    means = [{"question": m.question, **to_row(row)} for m in report.item_means for row in m.rows]
    groups = [{"field": g.field, "question": g.question, **row} for g in report.by_group for row in g.rows]
    group_columns = ["field", "question"] + ([k for k in groups[0] if k not in ("field", "question")] if groups else [])
    return {
        "agreement.csv": _csv(agreement_rows(report), AGREEMENT_COLUMNS),
        "cohen_kappa.csv": _csv(cohen_rows(report), COHEN_COLUMNS),
        "histograms.csv": _csv(_histogram_rows(report), ["question", "rater", "value", "count"]),
        "item_means.csv": _csv(means, ["question", "item", "key", "n_ratings", "mean", "min", "max"]),
        "by_group.csv": _csv(groups, group_columns),
        "option_counts.csv": _csv(_option_rows(report), ["question", "rater", "n_rated", "option", "label", "count"]),
    }


def _metric_files(report: StudyReport) -> dict[str, str]:
    """The CSV files of the automatic metrics against people, and of the systems."""
    metric_columns = ["item", "key", "source", "human_mean"]
    metric_columns += [c for c in (report.metrics[0] if report.metrics else {}) if c not in metric_columns]
    adjudication = report.after_adjudication
    return {
        "metrics.csv": _csv(list(report.metrics), metric_columns),
        "correlation.csv": _csv(correlation_rows(report), CORRELATION_COLUMNS),
        "meta_evaluation.csv": _csv(meta_evaluation_rows(report), META_COLUMNS),
        "by_system.csv": _csv(*system_rows(report)),
        "comparisons_wins.csv": _csv(comparison_rows(report, "win_tie_loss"), WIN_COLUMNS),
        "comparisons_ranking.csv": _csv(comparison_rows(report, "ranking"), RANKING_COLUMNS),
        "comparisons_position_bias.csv": _csv(comparison_rows(report, "position_bias"), POSITION_COLUMNS),
        "system_scores.csv": _csv(compare_group_rows(report), GROUP_COLUMNS),
        "system_pairs.csv": _csv(compare_pair_rows(report), PAIR_COLUMNS),
        "after_adjudication.csv": _csv([to_row(r) for r in adjudication.by_system], ADJUDICATED_COLUMNS),
        "after_adjudication_items.csv": _csv([to_row(r) for r in adjudication.items], ADJUDICATED_ITEM_COLUMNS),
        "retrieval.csv": _csv(list(report.retrieval), RETRIEVAL_COLUMNS),
    }


SEVERITY_COLUMNS = ["question", "rater", "n_shared", "severity", "ci_low", "ci_high"]
DRIFT_COLUMNS = ["rater", "window", "first", "last", "n_shared", "agreement_with_others"]
DRIFT_COLUMNS += ["n_gold", "agreement_with_gold"]
DEVIATION_COLUMNS = ["protocol_version", "protocol_sha256", "code", "message"]


def _rater_files(report: StudyReport) -> dict[str, str]:
    """The raters' severity and drift, and the deviations from the frozen protocol."""
    severity = [{"question": s.question, **to_row(r)} for s in report.severity for r in s.raters]
    drift = [to_row(w) for w in report.drift.windows] if report.drift else []
    protocol = report.protocol
    deviations = (
        [
            {"protocol_version": protocol.version, "protocol_sha256": protocol.sha256, **to_row(d)}
            for d in protocol.deviations
        ]
        if protocol
        else []
    )
    return {
        "severity.csv": _csv(severity, SEVERITY_COLUMNS),
        "drift.csv": _csv(drift, DRIFT_COLUMNS),
        "protocol_deviations.csv": _csv(deviations, DEVIATION_COLUMNS),
    }


def _methods_files(report: StudyReport) -> dict[str, str]:
    """The methods section a paper can start from (analysis.methods)."""
    from analysis.methods import methods_section

    section = methods_section(report)
    return {"methods.md": section.markdown, "methods.tex": section.latex}


def report_files(report: StudyReport | Mapping[str, Any]) -> dict[str, str]:
    """Every downloadable file of the report, name -> text (CSV or JSON); a stored payload
    is read into the dataclasses first (analysis.report_json.report_from_payload)."""
    if isinstance(report, Mapping):
        report = report_from_payload(report)
    files = {
        "report.json": report_json(report),
        "agreement.json": json_text(report.agreement),
        "correlation.json": json_text(report.correlation),
        **_table_files(report),
        **_metric_files(report),
        **_rater_files(report),
        **_methods_files(report),
    }
    return {name: files[name] for name in FILE_NAMES}
