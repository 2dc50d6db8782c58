"""The demo's reports computed once, in a process of their own, when `make run` starts
(`manage.py prepare --demo`): so that the demo admin's first report is served from the
cache.

Computing a report imports pandas, scipy, statsmodels, scikit-learn and matplotlib
(about 2 s, and tens of MiB), which no web worker should do before a visitor asks. So
`prepare` only asks the cache (one query per study: analysis.selectors.report_inputs) and,
when a demo report is missing or stale, starts `manage.py compute_reports` and does not
wait for it. The reports go into the same cache as any other (keyed by a fingerprint of
their inputs): a rating changed afterwards makes them stale as usual, and a visit meanwhile
waits for this process's report rather than computing its own (the row is claimed with a
conditional update). The process stays in the terminal's process group, so Ctrl-C ends it
with the server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from core.background import BACKGROUND_NICENESS

# The studies `load_demo` makes, in the order their reports are computed; the first is the
# one the README points to.
DEMO_REPORT_STUDIES = ("demo-litsumm", "demo-factpico", "demo-pairwise", "demo-questions")
PHASE = "all"
ROOT = Path(__file__).resolve().parents[1]


def queue_demo_reports() -> list[str]:
    """The demo studies (present in the database) whose report for their inputs as they are
    now is not computed with its plots. Their rows are made (pending) here, through the
    cache the page reads (analysis.services.request_study_report, handing the run to no
    one), so that a visit before `compute_reports` has started finds its report queued and
    waits for it rather than computing it in a web worker. Nothing is imported beyond what
    the web app imports (the models, selectors and services)."""
    from analysis import services
    from analysis.models import AnalysisResult
    from annotate.models import Study

    missing = []
    studies = {s.slug: s for s in Study.objects.filter(slug__in=DEMO_REPORT_STUDIES)}
    for slug in DEMO_REPORT_STUDIES:
        study = studies.get(slug)
        if study is None:
            continue
        result = services.request_study_report(study=study, phase=PHASE, enqueue=lambda _id: None)
        if result.status != AnalysisResult.Status.DONE or services.plots_pending(result):
            missing.append(slug)
    return missing


def start_demo_reports(missing: list[str], stdout=None) -> subprocess.Popen | None:
    """Start `manage.py compute_reports` for the demo reports that are `missing` (what
    queue_demo_reports found); None when none is. It does not wait for it."""
    if not missing:
        return None
    print(f"Computing the demo's reports in the background: {', '.join(missing)}", flush=True)
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "compute_reports", *missing, "--phase", PHASE],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        # below the web workers: the raters' requests come first
        preexec_fn=lambda: os.nice(BACKGROUND_NICENESS),
    )
