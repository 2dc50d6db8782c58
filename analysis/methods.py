"""A methods section a paper can start from, in Markdown and LaTeX, written from the study
report (analysis.sections.StudyReport) and nothing else: every number in it is one of the
report's, listed in `numbers` with where it comes from, so tests/analysis/test_methods.py
checks each against the report.

What it says: the material (summaries, systems), the rubric and its version, the raters
and how many items each rated, the items rated by two or more raters, agreement with its
bootstrap intervals, the systems compared (paired tests with Holm's correction, or
Bradley–Terry rankings side by side), the frozen protocol with its deviations, and where
the data is: the DOI of the study's newest release deposited on Zenodo (datasets.releases),
looked up when the section is written, so a report computed before the deposit cites it
too. The DOI is a reference, not one of the report's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.sections import StudyReport

__all__ = ["MethodsNumber", "MethodsSection", "methods_section"]

# The agreement figure the text quotes per question, by the question's level.
ALPHA_LEVEL = {"ordinal": "ordinal", "interval": "interval", "nominal": "nominal", None: "nominal"}


@dataclass(frozen=True)
class MethodsNumber:
    path: str  # where in the report: dotted, [index], ["key with dots"], len(...)
    value: Any
    text: str  # as it reads in the section


@dataclass(frozen=True)
class MethodsSection:
    markdown: str
    latex: str
    numbers: tuple[MethodsNumber, ...]


class _Writer:
    """Paragraphs of (text, value) pieces, written once as Markdown and once as LaTeX."""

    def __init__(self) -> None:
        self.paragraphs: list[list[tuple[str, bool]]] = []  # (piece, is_literal_text)
        self.numbers: list[MethodsNumber] = []

    def start(self, heading: str) -> None:
        self.paragraphs.append([(heading, True)])

    def say(self, *pieces: Any) -> None:
        self.paragraphs[-1].extend(p if isinstance(p, tuple) else (str(p), True) for p in pieces)

    def number(self, path: str, value: Any, digits: int | None = None) -> tuple[str, bool]:
        text = f"{value:.{digits}f}" if digits is not None else f"{value}"
        self.numbers.append(MethodsNumber(path, value, text))
        return (text, False)

    def render(self, escape, heading) -> str:
        out = []
        for paragraph in self.paragraphs:
            title, *rest = paragraph
            body = "".join(escape(text) if literal else text for text, literal in rest)
            out.append(heading(escape(title[0])) + "\n\n" + body.strip())
        return "\n\n".join(out) + "\n"


def _latex(text: str) -> str:
    replace = {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "α": r"$\alpha$",
        "–": "--",
        "−": "$-$",
    }
    return "".join(replace.get(c, c) for c in text)


def _markdown(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in text)


def _systems(report: StudyReport) -> list[str]:
    for table in report.compare.groups:
        if table.field == "generator":
            return [str(row["group"]) for row in table.rows]
    return []


def _material(w: _Writer, report: StudyReport) -> None:
    w.start("Materials and rubric")
    systems = _systems(report)
    w.say(w.number("n_summaries", report.n_summaries), " summaries")
    if systems:
        w.say(f" from {len(systems)} systems ({', '.join(systems)})")
    w.say(" were rated")
    if report.rubric is not None:
        w.say(f" with the rubric {report.rubric.title} ({report.rubric.key}, version ")
        w.say(w.number("rubric.version", report.rubric.version), ")")
    kinds = sorted({q.kind for q in report.questions})
    w.say(f", which asks {len(report.questions)} questions ({', '.join(kinds)}). ")


def _raters(w: _Writer, report: StudyReport) -> None:
    w.start("Raters and design")
    counts = [r.n_rated for r in report.raters]
    w.say(w.number("len(raters)", len(report.raters)), " raters gave ")
    w.say(w.number("n_answers", report.n_answers), " answers on ")
    w.say(w.number("n_items_rated", report.n_items_rated), " items")
    if counts:
        low, high = min(counts), max(counts)
        i_low, i_high = counts.index(low), counts.index(high)
        if low == high:
            w.say(" (", w.number(f"raters[{i_low}].n_rated", low), " items each)")
        else:
            w.say(" (between ", w.number(f"raters[{i_low}].n_rated", low), " and ")
            w.say(w.number(f"raters[{i_high}].n_rated", high), " items each)")
    w.say(". ")
    shared = [(i, s) for i, s in enumerate(report.agreement) if s.report and s.option is None]
    if shared:
        i, first = shared[0]
        w.say(w.number(f"agreement[{i}].report.n_items_shared", first.report["n_items_shared"]))
        w.say(f" items of the question {first.question} were rated by two or more raters. ")


def _agreement(w: _Writer, report: StudyReport) -> None:
    sections = [(i, s) for i, s in enumerate(report.agreement) if s.report and s.option is None and s.kind == "scale"]
    if not sections:
        return
    w.start("Agreement")
    for i, section in sections:
        level = ALPHA_LEVEL.get(section.level, "nominal")
        value = section.report["krippendorff_alpha"][level]
        ci = section.ci.get(f"krippendorff_alpha.{level}")
        w.say(f"For {section.question}, Krippendorff's α ({level}) was ")
        w.say(w.number(f"agreement[{i}].report.krippendorff_alpha.{level}", value, 2))
        if ci is not None and ci.low is not None:
            key = f'agreement[{i}].ci["krippendorff_alpha.{level}"]'
            w.say(" (95% CI ", w.number(f"{key}.low", ci.low, 2), " to ", w.number(f"{key}.high", ci.high, 2), ")")
        w.say(" and percent agreement (the mean share of agreeing rater pairs per item) ")
        w.say(w.number(f"agreement[{i}].report.percent_agreement", section.report["percent_agreement"], 2), ". ")
    resamples = sections[0][1].n_resamples
    w.say("Intervals are percentile bootstrap intervals over items (")
    w.say(w.number(f"agreement[{sections[0][0]}].n_resamples", resamples), " resamples). ")


def _tests(w: _Writer, report: StudyReport) -> None:
    pairs = [(ti, t) for ti, t in enumerate(report.compare.pairs) if t.rows]
    if not pairs and not report.comparisons:
        return
    w.start("Systems compared")
    for ti, table in pairs:
        w.say(f"On {table.question}, systems were compared pairwise on the sources both summarised ")
        w.say("(Wilcoxon's signed-rank test, Holm's correction across the pairs): ")
        for ri, row in enumerate(table.rows):
            path = f"compare.pairs[{ti}].rows[{ri}]"
            w.say(f"{row['a']} − {row['b']}: mean difference ")
            w.say(w.number(f"{path}.mean_difference", row["mean_difference"], 2))
            if row.get("ci_low") is not None:
                w.say(" (95% CI ", w.number(f"{path}.ci_low", row["ci_low"], 2), " to ")
                w.say(w.number(f"{path}.ci_high", row["ci_high"], 2), ")")
            w.say(", n = ", w.number(f"{path}.n_sources", row["n_sources"]))
            if row.get("p_holm") is not None:
                w.say(", Holm-adjusted p = ", w.number(f"{path}.p_holm", row["p_holm"], 3))
            w.say("; " if ri < len(table.rows) - 1 else ". ")
    for ci, section in enumerate(report.comparisons):
        ranking = section.ranking.get("systems") if isinstance(section.ranking, dict) else None
        if not ranking:
            continue
        w.say(f"Side by side, on {section.question} (")
        w.say(w.number(f"comparisons[{ci}].n_judgements", section.n_judgements), " judgements), the Bradley–Terry ")
        w.say("ranking was ")
        for si, row in enumerate(ranking):
            w.say(f"{row['system']} (strength ")
            w.say(w.number(f"comparisons[{ci}].ranking.systems[{si}].strength", row["strength"], 2), ")")
            w.say(", " if si < len(ranking) - 1 else ". ")


def _protocol(w: _Writer, report: StudyReport) -> None:
    protocol = report.protocol
    if protocol is None:
        return
    w.start("Pre-registration")
    w.say(f"The analysis plan was frozen before rating (protocol version {protocol.version}, SHA-256 ")
    w.say(w.number("protocol.sha256", protocol.sha256), "); ")
    w.say(w.number("protocol.planned_n", protocol.planned_n), " items were planned and ")
    w.say(w.number("protocol.n_rated", protocol.n_rated), " rated; ")
    n = len(protocol.deviations)
    w.say(w.number("len(protocol.deviations)", n), " deviation" + ("" if n == 1 else "s") + " from the plan. ")
    w.say(*(f"{d.message} " for d in protocol.deviations))


def _availability(dataset: tuple[str, str] | None) -> tuple[str, str]:
    """The data availability paragraph, in Markdown and LaTeX, when the dataset has a DOI."""
    if dataset is None:
        return "", ""
    doi, version = dataset
    url = f"https://doi.org/{doi}"
    text = f"The ratings are released as a dataset under CC BY 4.0 (release {version}, DOI {doi}): "
    return (
        f"\n### Data availability\n\n{_markdown(text)}<{url}>.\n",
        f"\n\\subsection*{{Data availability}}\n\n{_latex(text)}\\url{{{url}}}.\n",
    )


def methods_section(report: StudyReport, *, dataset: tuple[str, str] | None | bool = True) -> MethodsSection:
    """The section for `report`. `dataset`: (DOI, release version) to cite, None for none,
    or True (the default) for the study's newest release with a DOI, if any."""
    if dataset is True:
        from datasets.releases import latest_doi

        dataset = latest_doi(study_slug=report.study) if report.study else None
    w = _Writer()
    _material(w, report)
    _raters(w, report)
    _agreement(w, report)
    _tests(w, report)
    _protocol(w, report)
    markdown = w.render(_markdown, lambda title: f"### {title}")
    latex = w.render(_latex, lambda title: f"\\subsection*{{{title}}}")
    md_availability, tex_availability = _availability(dataset)
    return MethodsSection(markdown + md_availability, latex + tex_availability, tuple(w.numbers))
