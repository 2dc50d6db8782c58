"""Once a release has a DOI, the methods section of the study's report cites it (the
card pushed to the Hub does too: tests/datasets/test_releases_hub.py)."""

from __future__ import annotations

import pytest

from analysis.methods import methods_section
from analysis.report_files import report_files
from analysis.report_json import report_from_payload
from analysis.services import compute_study_report
from datasets.releases import create_release, deposit_on_zenodo
from tests.analysis.reports import rated_study
from tests.datasets.test_releases import CREATORS, client_for, finished_export
from tests.datasets.zenodo_server import ZenodoServer

pytestmark = pytest.mark.django_db


def test_the_methods_section_cites_the_newest_doi_of_the_study():
    study, _ = rated_study(n_summaries=4, raters=("ra", "rb"))
    report = report_from_payload(compute_study_report(study=study, n_resamples=20))
    before = methods_section(report)
    assert "Data availability" not in before.markdown and "Data availability" not in before.latex
    release = create_release(study=study, export=finished_export(study), version="1.0", changelog="First.", by="admin")
    with ZenodoServer() as server:
        deposit_on_zenodo(release=release, creators=CREATORS, client=client_for(server))
    release.refresh_from_db()
    doi = release.doi
    after = methods_section(report)  # the report computed before the deposit cites it now
    assert after.markdown.startswith(before.markdown)
    assert after.markdown.endswith(
        "### Data availability\n\nThe ratings are released as a dataset under CC BY 4.0 "
        f"(release 1.0, DOI {doi}): <https://doi.org/{doi}>.\n"
    )
    assert after.latex.endswith(
        "\\subsection*{Data availability}\n\nThe ratings are released as a dataset under CC BY 4.0 "
        f"(release 1.0, DOI {doi}): \\url{{https://doi.org/{doi}}}.\n"
    )
    assert after.numbers == before.numbers  # a reference, not a number of the report
    files = report_files(report)
    assert f"https://doi.org/{doi}" in files["methods.md"] and f"https://doi.org/{doi}" in files["methods.tex"]
    assert "Data availability" not in methods_section(report, dataset=None).markdown
    other = methods_section(report, dataset=("10.1234/x_y", "2.0"))
    assert "DOI 10.1234/x\\_y" in other.latex and "\\url{https://doi.org/10.1234/x_y}" in other.latex
