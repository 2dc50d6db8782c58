"""The methods section: every number in it is the report's, in Markdown and in LaTeX."""

from __future__ import annotations

import re

import pytest

from analysis.methods import methods_section
from analysis.report_json import report_from_payload, report_payload
from analysis.services import compute_study_report
from annotate.models import Summary
from planning.services import freeze_protocol
from tests.analysis.reports import rated_study
from tests.planning.plans import pointwise_plan

pytestmark = pytest.mark.django_db


def value_at(payload, path: str):
    """The report's value at a dotted path with [index] and len(...)."""
    if path.startswith("len(") and path.endswith(")"):
        return len(value_at(payload, path[4:-1]))
    value = payload
    for part in re.findall(r'\["[^"]+"\]|\[\d+\]|[^.\[\]]+', path):
        if part.startswith('["'):
            value = value[part[2:-2]]
        elif part.startswith("["):
            value = value[int(part[1:-1])]
        else:
            value = value[part]
    return value


@pytest.fixture
def report():
    study, admin = rated_study(n_summaries=10, raters=("ra", "rb"), seed=3)
    # Two systems summarising the same five sources (the paired tests need shared sources).
    previous = None
    for i, summary in enumerate(Summary.objects.filter(study=study).order_by("pk")):
        summary.generator = "sys_A & co" if i % 2 else "sys_B"  # LaTeX's specials in a name
        if i % 2:
            summary.source = previous.source
        summary.save(update_fields=["generator", "source"])
        previous = summary
    plan = pointwise_plan()
    freeze_protocol(study=study, by=admin, plan=plan)
    return report_from_payload(compute_study_report(study=study, n_resamples=200))


def test_every_number_is_the_reports_and_appears_in_both_texts(report):
    section = methods_section(report)
    payload = report_payload(report)
    assert len(section.numbers) >= 10
    for number in section.numbers:
        assert value_at(payload, number.path) == number.value, number.path
        assert number.text in section.markdown, number
        assert number.text.replace("_", r"\_") in section.latex or number.text in section.latex, number
    paths = {n.path for n in section.numbers}
    assert any(p.startswith("compare.pairs[0].rows[0].p_holm") for p in paths)
    assert {"n_summaries", "n_answers", "len(raters)", "protocol.sha256", "protocol.planned_n"} <= paths
    assert any(p.endswith("krippendorff_alpha.ordinal") for p in paths)


def test_text_from_people_is_escaped_for_each_format(report):
    section = methods_section(report)
    assert r"sys\_A \& co" in section.latex and "sys_A & co" not in section.latex
    assert r"sys\_A & co" in section.markdown
    assert section.latex.count(r"\subsection*{") == section.markdown.count("### ")


def test_the_report_downloads_carry_it(report):
    from analysis.report_files import report_files

    files = report_files(report)
    assert files["methods.md"] == methods_section(report).markdown
    assert files["methods.tex"].startswith(r"\subsection*{Materials and rubric}")
