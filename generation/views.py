"""Study admins' page of automatic evaluators: start a run, follow its progress."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotate.exceptions import ApplicationError
from annotate.selectors.access import get_study_for_admin


@login_required
@require_http_methods(["GET", "POST"])
def evaluators(request, slug):
    from generation.evaluators import EVALUATORS, evaluator_for, start_evaluation
    from generation.llm import Gateway
    from generation.models import EvaluationRun
    from generation.services import require_api_key
    from generation.tasks import enqueue_evaluation

    study = get_study_for_admin(request.user, slug)
    if request.method == "POST":
        name = request.POST.get("evaluator", "")
        try:
            if name not in EVALUATORS:
                raise ApplicationError(f"unknown evaluator {name!r}")
            require_api_key()
            run = start_evaluation(study=study, evaluator=evaluator_for(name, Gateway()))
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            enqueue_evaluation(study.pk, name)
            messages.info(request, f"{name} is running (run {str(run.uuid)[:8]}).")
        return redirect("generation:evaluators", slug=study.slug)
    n_summaries = study.summaries.count()
    runs = (
        EvaluationRun.objects.filter(study=study)
        .annotate(
            scored=Count("scores__summary", distinct=True),
            failed=Count("scores", filter=Q(scores__status="failed")),
        )
        .order_by("-created_at")
    )
    return render(
        request,
        "generation/evaluators.html",
        {"study": study, "evaluators": sorted(EVALUATORS), "runs": runs, "n_summaries": n_summaries},
    )
