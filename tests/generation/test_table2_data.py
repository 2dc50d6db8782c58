"""A generated summary carries what LitSumm's Table 2 counts, and the study report counts it."""

import pytest

from annotate.selectors.frames import summaries_frame
from stats.pipeline_checks import check_pass_rates
from tests.generation.conftest import honest_model
from tests.generation.scripted_server import Reply
from tests.generation.test_admin_trace import BAD
from tests.generation.test_litsumm_pipeline import run_job

pytestmark = pytest.mark.django_db


def test_a_rescued_summary_fails_the_first_pass_and_passes_after_revision(serve, trial_source):
    serve(
        honest_model,
        steps={
            "generate": [Reply(content=BAD)],
            "rescue_real": [Reply(content="Drug A was compared with placebo in 120 adults [PMC100].")],
        },
    )
    job = run_job(trial_source)
    row = summaries_frame(study=trial_source.study).set_index("key").loc[job.summary.key]
    assert (row["pipeline"], row["attempts"], row["references_passed"]) == ("litsumm", 2, True)
    assert row["consistency_revised"] is not None and not row["consistency_revised"]  # no statement needed revising
    stages = {s["stage"]: s["passed"] for s in check_pass_rates(summaries_frame(study=trial_source.study))["stages"]}
    assert stages == {
        "references_first_pass": 0,
        "references_after_revision": 1,
        "consistency_clean": 1,
        "consistency_after_revision": 1,
    }
