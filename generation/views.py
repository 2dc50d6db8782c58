"""Study admins' page of automatic evaluators: start a run, follow its progress."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from annotate.selectors.access import get_study_for_admin
from core.exceptions import ApplicationError
from generation.selectors import evaluator_runs


@login_required
@require_http_methods(["GET", "POST"])
def evaluators(request, slug):
    from generation.evaluators import automatic_runs, start_automatic_run
    from generation.tasks import queue_automatic_run

    study = get_study_for_admin(request.user, slug)
    if request.method == "POST":
        name = request.POST.get("evaluator", "")
        try:
            run = start_automatic_run(study=study, name=name)
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            # A broker that cannot be reached: the run is marked failed and the 503 page says
            # so (QueueUnavailableError, core.exceptions.UnavailablePageMiddleware).
            queue_automatic_run(run, name)
            messages.info(request, f"{name} is running (version {run.version[:12]}); this page follows its progress.")
        return redirect("generation:evaluators", slug=study.slug)
    evaluators = [{"name": r.name, "needs_llm": r.needs_llm} for r in automatic_runs().values()]
    return render(
        request,
        "generation/evaluators.html",
        {
            "study": study,
            "evaluators": evaluators,
            **evaluator_runs(study, now=timezone.now()),
        },
    )
