"""Figures of the study report, drawn with matplotlib's Agg backend (no display needed).

Every function takes the JSON report (see analysis.report) and returns the image as bytes
in each format asked for ("png", "svg"): a figure is drawn once and saved in every format.
Labels that come from data (rater names, metric and question keys) are escaped for
mathtext, and matplotlib writes text into SVG as glyph paths (``svg.fonttype = "path"``),
so no data text ends up as markup in an SVG.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from functools import cache
from typing import Any

__all__ = [
    "FORMATS",
    "density_figure",
    "histogram_figure",
    "plot_names",
    "questions_figure",
    "render_plot",
    "scatter_figure",
    "strengths_figure",
]

FORMATS = ("png", "svg")
# axes.titley fixed: matplotlib otherwise measures every axis's ticks to lift the title
# above them (about 15 % of a figure's cost; no figure has ticks on top).
_CONTEXT = {"svg.fonttype": "path", "svg.hashsalt": "summary-ratings", "figure.dpi": 100, "axes.titley": 1.0}


@cache
def _pyplot():
    """matplotlib's pyplot on the Agg backend, imported on the first figure drawn: the
    web app starts without matplotlib and only a plot request pays for it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plain(text: Any) -> str:
    """Data text shown literally: a "$" would otherwise start mathtext."""
    return str(text).replace("\\", "\\\\").replace("$", r"\$")


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _margins(fig, *, left: float = 0.7, right: float = 0.2, bottom: float = 0.55, top: float = 0.4, wspace=None):
    """Fixed margins in inches, instead of matplotlib's constrained layout, which measured
    every text of the figure again on each of its passes and doubled the cost of a figure
    (docs/performance.md, the report)."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height, wspace=wspace
    )


def _save(fig, formats: Sequence[str]) -> dict[str, bytes]:
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:
        raise ValueError(f"Unknown image format {unknown[0]!r}; use one of {FORMATS}.")
    images = {}
    try:
        for fmt in formats:
            buffer = io.BytesIO()
            # No date in the SVG metadata, so the same report always gives the same bytes.
            metadata = {"Date": None} if fmt == "svg" else {}
            # Every figure has fixed margins (_margins), so no bbox_inches="tight" (which
            # drew each figure once more, only to measure it).
            fig.savefig(buffer, format=fmt, metadata=metadata)
            images[fmt] = buffer.getvalue()
    finally:
        _pyplot().close(fig)
    return images


# Up to this many raters, a histogram is a bar chart per rater; with more, one heat map
# (raters x scale values): sixty panels in a row are neither readable nor quick to draw.
HISTOGRAM_PANELS = 12
# Scatter plots of more points than this are rasterised inside their SVG (matplotlib's
# `rasterized`): thousands of vector markers make a slow, heavy file for no visible gain.
VECTOR_POINTS = 1000


def histogram_figure(report: dict[str, Any], question: str, formats: Sequence[str] = ("png",)) -> dict[str, bytes]:
    """How often each rater gave each scale value for ``question``: one bar chart per rater,
    or one heat map of raters by values when there are more than HISTOGRAM_PANELS."""
    histogram = next((h for h in report["histograms"] if h["question"] == question), None)
    if histogram is None:
        raise KeyError(question)
    raters = histogram["raters"] or [{"rater": "(no ratings)", "counts": [0] * len(histogram["scale"])}]
    if len(raters) > HISTOGRAM_PANELS:
        return _histogram_heat_map(histogram, raters, question, formats)
    plt = _pyplot()
    with plt.rc_context(_CONTEXT):
        fig, axes = plt.subplots(1, len(raters), figsize=(2.6 * len(raters) + 0.6, 3.0), sharey=True, squeeze=False)
        _margins(fig, top=0.7, wspace=0.12)
        labels = [str(v) for v in histogram["scale"]]
        for ax, rater in zip(axes[0], raters, strict=True):
            ax.bar(range(len(labels)), rater["counts"], color="#4c72b0")
            ax.set_xticks(range(len(labels)), labels)
            ax.set_title(f"{_plain(rater['rater'])} (n={sum(rater['counts'])})", fontsize=10)
            ax.set_xlabel(_plain(question))
        axes[0][0].set_ylabel("ratings")
        fig.suptitle(f"Scores per rater: {_plain(question)}", fontsize=11)
        return _save(fig, formats)


def _histogram_heat_map(histogram: dict[str, Any], raters: list[dict], question: str, formats) -> dict[str, bytes]:
    """Each rater's share of ratings at each scale value, one row per rater (n beside it)."""
    import numpy as np

    counts = np.array([r["counts"] for r in raters], dtype=float)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    labels = [str(v) for v in histogram["scale"]]
    plt = _pyplot()
    with plt.rc_context(_CONTEXT):
        fig, ax = plt.subplots(figsize=(0.8 * len(labels) + 3.4, 0.2 * len(raters) + 1.4))
        _margins(fig, left=2.4, top=0.5, bottom=0.6)
        image = ax.imshow(shares, aspect="auto", cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_yticks(range(len(raters)), [f"{_plain(r['rater'])} (n={sum(r['counts'])})" for r in raters], fontsize=7)
        ax.set_xlabel(_plain(question))
        fig.colorbar(image, ax=ax, label="share of the rater's ratings")
        ax.set_title(f"Scores per rater: {_plain(question)}", fontsize=11)
        return _save(fig, formats)


def scatter_figure(report: dict[str, Any], metric: str, formats: Sequence[str] = ("png",)) -> dict[str, bytes]:
    """Metric against the mean human score per summary, with rho, tau-b and acc_eq in the title."""
    correlation = report["correlation"]
    if metric not in correlation.get("metric_columns", []):
        raise KeyError(metric)
    rows = [r for r in report["metrics"] if r.get(metric) is not None and r.get("human_mean") is not None]
    import numpy as np

    x = np.array([r[metric] for r in rows], dtype=float)
    y = np.array([r["human_mean"] for r in rows], dtype=float)
    stats = correlation.get("mean", {}).get(metric, {})
    rho = stats.get("spearman", {}).get("rho")
    tau = stats.get("kendall_tau_b", {}).get("tau")
    acc = stats.get("acc_eq", {}).get("value")
    plt = _pyplot()
    with plt.rc_context(_CONTEXT):
        fig, ax = plt.subplots(figsize=(4.6, 3.6))
        _margins(fig)
        ax.scatter(x, y, s=18, alpha=0.7, color="#4c72b0", rasterized=len(x) > VECTOR_POINTS)
        ax.set_xlabel(_plain(metric))
        ax.set_ylabel(f"mean human score ({_plain(correlation.get('human_question') or 'none')})")
        ax.set_title(
            f"rho = {_number(rho)}, tau-b = {_number(tau)}, acc_eq = {_number(acc)} (n = {len(rows)})",
            fontsize=9,
        )
        return _save(fig, formats)


def density_figure(report: dict[str, Any], metric: str, formats: Sequence[str] = ("png",)) -> dict[str, bytes]:
    """FactPICO Figure 3 / Table 11: the standardised densities of the metric and of the
    mean human score (the KDEs the KL divergence integrates, stats.metaeval), with KL."""
    from stats.metaeval import standardised_densities

    correlation = report["correlation"]
    if metric not in correlation.get("metric_columns", []):
        raise KeyError(metric)
    rows = [r for r in report["metrics"] if r.get(metric) is not None and r.get("human_mean") is not None]
    human = [r["human_mean"] for r in rows]
    densities = standardised_densities(human, [r[metric] for r in rows], grid_size=512)
    kl = correlation.get("mean", {}).get(metric, {}).get("kl_divergence")
    plt = _pyplot()
    with plt.rc_context(_CONTEXT):
        fig, ax = plt.subplots(figsize=(4.6, 3.2))
        _margins(fig)
        if densities is None:
            ax.text(0.5, 0.5, "too few distinct values", ha="center", va="center", transform=ax.transAxes)
        else:
            grid, p, q = densities
            ax.plot(grid, p, color="#4c72b0", label="mean human score")
            ax.plot(grid, q, color="#dd8452", label=_plain(metric))
            ax.legend(fontsize=8)
        ax.set_xlabel("standardised value (z-score)")
        ax.set_ylabel("density")
        ax.set_title(f"KL(human || metric) = {_number(kl)} (n = {len(rows)})", fontsize=9)
        return _save(fig, formats)


def questions_figure(report: dict[str, Any], metric: str, formats: Sequence[str] = ("png",)) -> dict[str, bytes]:
    """The metric against every human scale question and their average, one panel each,
    with Kendall's tau-b and its bootstrap interval (FactPICO Tables 4 and 10)."""
    meta = report.get("meta_evaluation") or {}
    cells = meta.get("summary_level", {}).get(metric)
    if cells is None:
        raise KeyError(metric)
    import numpy as np

    values = {r["item"]: r.get(metric) for r in report["metrics"]}
    questions = meta["questions"]
    plt = _pyplot()
    with plt.rc_context(_CONTEXT):
        fig, axes = plt.subplots(1, len(questions), figsize=(2.5 * len(questions) + 0.6, 2.9), squeeze=False)
        _margins(fig, top=0.35, wspace=0.3)
        for ax, q in zip(axes[0], questions, strict=True):
            points = [
                (values[h["item"]], h[q])
                for h in meta.get("human_scores", [])
                if h.get(q) is not None and values.get(h["item"]) is not None
            ]
            # Arrays, not lists: matplotlib masks a list element by element.
            xy = np.array(points, dtype=float).reshape(-1, 2)
            ax.scatter(
                xy[:, 0],
                xy[:, 1],
                s=12,
                alpha=0.7,
                color="#4c72b0",
                rasterized=len(points) > VECTOR_POINTS,
            )
            cell = cells.get(q, {})
            interval = (
                f" [{_number(cell.get('ci_low'), 2)}, {_number(cell.get('ci_high'), 2)}]"
                if cell.get("ci_low") is not None
                else ""
            )
            ax.set_title(f"{_plain(q)}: tau-b {_number(cell.get('kendall_tau_b'), 2)}{interval}", fontsize=8)
            ax.set_xlabel(_plain(metric), fontsize=8)
        axes[0][0].set_ylabel("mean human score")
        return _save(fig, formats)


def plot_names(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Every plot of the report as (kind, subject, file stem): histograms, then per metric
    its scatter and density against the first question's mean, then its panels against
    every question."""
    names = [("histogram", h["question"], f"histogram_{h['question']}") for h in report["histograms"]]
    if report["correlation"].get("human_question"):
        for m in report["correlation"]["metric_columns"]:
            names += [("scatter", m, f"scatter_{m}"), ("density", m, f"density_{m}")]
    summary_level = (report.get("meta_evaluation") or {}).get("summary_level", {})
    names += [("questions", m, f"questions_{m}") for m in summary_level]
    names += [
        ("strengths", c["question"], f"strengths_{c['question']}")
        for c in report.get("comparisons") or []
        if (c.get("ranking") or {}).get("systems")
    ]
    return names


def strengths_figure(report: dict[str, Any], question: str, formats: Sequence[str] = ("png",)) -> dict[str, bytes]:
    """The systems' Bradley–Terry strengths on one preference question, strongest on top,
    each with its 95% bootstrap interval and the share of resamples that kept its place."""
    section = next((c for c in report.get("comparisons") or [] if c["question"] == question), None)
    if section is None or not (section.get("ranking") or {}).get("systems"):
        raise KeyError(question)
    rows = section["ranking"]["systems"]
    plt = _pyplot()
    with plt.rc_context(_CONTEXT):
        fig, ax = plt.subplots(figsize=(6.0, 0.55 * len(rows) + 1.4))
        # Room on the left for the longest system name (about 0.075 inch a character at 10 pt).
        longest = max(len(str(r["system"])) for r in rows)
        _margins(fig, left=min(2.4, 0.3 + 0.075 * longest))
        ys = list(range(len(rows)))[::-1]
        for y, row in zip(ys, rows, strict=True):
            low, high = row["ci_low"], row["ci_high"]
            if low is not None and high is not None:
                ax.plot([low, high], [y, y], color="#4a78a8", linewidth=2.5, solid_capstyle="butt")
            ax.plot([row["strength"]], [y], "o", color="#1d3d5e")
            kept = row.get("place_kept")
            note = f"place {row['place']}" + ("" if kept is None else f", kept in {kept:.0%}")
            ax.annotate(_plain(note), (row["strength"], y), xytext=(0, 7), textcoords="offset points", ha="center",
                        fontsize=8, color="#555")  # fmt: skip
        ax.axvline(0, color="#bbb", linewidth=1)
        ax.set_yticks(ys, [_plain(r["system"]) for r in rows])
        ax.set_xlabel("Bradley–Terry strength (log worth; 95% bootstrap interval)")
        ax.set_title(_plain(f"{section.get('prompt') or question} ({section['n_judgements']} judgements)"), fontsize=9)
        ax.set_ylim(-0.7, len(rows) - 0.3)
    return _save(fig, formats)


_FIGURES = {
    "histogram": histogram_figure,
    "scatter": scatter_figure,
    "density": density_figure,
    "questions": questions_figure,
    "strengths": strengths_figure,
}


def render_plot(report: dict[str, Any], kind: str, subject: str, formats: Sequence[str] = FORMATS) -> dict[str, bytes]:
    """One plot of the report (a name from plot_names) in each of `formats`; KeyError for
    a plot the report does not have."""
    return _FIGURES[kind](report, subject, formats)
