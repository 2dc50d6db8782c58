"""Plain-text tables of the JSON-ready reports, for people reading a terminal."""

from __future__ import annotations

from typing import Any


def number(value: Any, digits: int = 4) -> str:
    """A float to ``digits`` decimals; ``None`` (undefined) as "n/a"."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(cell).ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), "  ".join("-" * width for width in widths), *(line(row) for row in rows)])


def _one_agreement(report: dict[str, Any]) -> str:
    alpha = report["krippendorff_alpha"]
    overall = [
        ["items rated by >= 2 raters", number(report.get("n_items_shared"))],
        ["items rated (all)", number(report["n_items"])],
        ["raters", number(report["n_raters"])],
        ["percent agreement", number(report["percent_agreement"])],
        ["Fleiss' kappa", number(report["fleiss_kappa"])],
        ["Randolph's kappa", number(report["randolph_kappa"])],
        ["Gwet's AC1", number(report.get("gwet_ac1"))],
        ["PABAK", number(report.get("pabak"))],
        ["Krippendorff's alpha (nominal)", number(alpha["nominal"])],
        ["Krippendorff's alpha (ordinal)", number(alpha["ordinal"])],
        ["Krippendorff's alpha (interval)", number(alpha["interval"])],
    ]
    pairs = [
        [
            str(p["rater_a"]),
            str(p["rater_b"]),
            number(p["n"]),
            number(p["unweighted"]),
            number(p["linear"]),
            number(p["quadratic"]),
        ]
        for p in report["cohen_kappa"]
    ]
    return (
        _table(["statistic", "value"], overall)
        + "\n\nCohen's kappa per rater pair\n"
        + _table(["rater a", "rater b", "n", "unweighted", "linear", "quadratic"], pairs)
    )


def agreement_table(report: dict[str, Any]) -> str:
    """The `agreement` command's report as text (one block per question if there are several)."""
    if "questions" not in report:
        return _one_agreement(report)
    return "\n\n".join(f"== question {q} ==\n{_one_agreement(r)}" for q, r in report["questions"].items())


def correlate_table(report: dict[str, Any], *, human: str) -> str:
    """The `correlate` command's report as text, one row per metric."""
    rows = []
    for name, m in report["metrics"].items():
        rows.append(
            [
                name,
                number(m["n"]),
                number(m["dropped"]),
                number(m["spearman"]["rho"]),
                number(m["spearman"]["p_holm"]),
                number(m["kendall_tau_b"]["tau"]),
                number(m["kendall_tau_b"]["p_holm"]),
                number(m["acc_eq"]["at_zero"]),
                number(m["acc_eq"]["value"]),
                number(m["acc_eq"]["epsilon"]),
            ]
        )
    header = ["metric", "n", "dropped", "rho", "p (Holm)", "tau-b", "p (Holm)", "acc_eq(0)", "acc_eq", "epsilon"]
    return f"against {human}\n" + _table(header, rows)
