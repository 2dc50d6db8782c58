"""The demo reports' CPU seconds in one checkout of the project, to compare two trees.

Run:  .venv/bin/python tests/bench/compare_report_trees.py TREE STUDY

Not collected by pytest; not in `make bench` (it compares checkouts: run it on `main`'s
worktree and on a branch's, alternated, against the database that
tests/bench/bench_report.py builds, var/bench-report.sqlite3, through DATABASE_URL). Prints
one JSON line: the first compute_study_report of the fresh process (imports included), the
best of two more, every plot's SVG alone, then PNG and SVG from one figure each.
docs/performance.md's history has its figures.
"""

from __future__ import annotations

import json
import os
import resource
import sys


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(root: str, slug: str) -> None:
    sys.path.insert(0, root)
    os.chdir(root)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.sched_setaffinity(0, {1})
    import django

    django.setup()
    from analysis import services
    from analysis.plots import plot_names, render_plot
    from annotate.models import Study

    study = Study.objects.select_related("rubric").get(slug=slug)
    start = cpu()
    report = services.compute_study_report(study=study)
    cold = cpu() - start
    warm = []
    for _ in range(2):
        start = cpu()
        services.compute_study_report(study=study)
        warm.append(cpu() - start)
    names = plot_names(report)
    start = cpu()
    for kind, subject, _stem in names:
        render_plot(report, kind, subject, ("svg",))
    svg = cpu() - start
    start = cpu()
    for kind, subject, _stem in names:
        render_plot(report, kind, subject, ("png", "svg"))
    both = cpu() - start
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


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
