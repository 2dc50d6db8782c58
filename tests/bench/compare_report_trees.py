"""The demo reports' CPU seconds in one checkout of the project, to compare two trees.

Run:  .venv/bin/python tests/bench/compare_report_trees.py TREE STUDY

Not collected by pytest; not in `make bench` (it compares checkouts: run it on `main`'s
worktree and on a branch's, alternated, against the database that
tests/bench/bench_report.py builds, var/bench-report.sqlite3, through DATABASE_URL). Prints
one JSON line: the first compute_study_report of the fresh process (imports included), the
best of two more, every plot's SVG alone, then PNG and SVG from one figure each.
docs/performance.md ("Issue 30, second round") has its figures.
"""

import json
import os
import resource
import sys

root = sys.argv[1]
slug = sys.argv[2]
sys.path.insert(0, root)
os.chdir(root)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.sched_setaffinity(0, {1})
import django

django.setup()


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


from analysis import services
from analysis.plots import plot_names, render_plot
from annotate.models import Study

study = Study.objects.select_related("rubric").get(slug=slug)
t = cpu()
rep = services.compute_study_report(study=study)
cold = cpu() - t
warm = []
for _ in range(2):
    t = cpu()
    services.compute_study_report(study=study)
    warm.append(cpu() - t)
names = plot_names(rep)
t = cpu()
for k, s_, _ in names:
    render_plot(rep, k, s_, ("svg",))
svg = cpu() - t
t = cpu()
for k, s_, _ in names:
    render_plot(rep, k, s_, ("png", "svg"))
both = cpu() - t
print(
    json.dumps(
        {
            "tree": root,
            "study": slug,
            "cold_numbers": round(cold, 2),
            "warm_numbers": round(min(warm), 2),
            "plots": len(names),
            "svg_only": round(svg, 2),
            "png_and_svg_one_figure": round(both, 2),
            "load": os.getloadavg()[0],
        }
    )
)
