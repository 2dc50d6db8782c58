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
    from generation.evaluators import EVALUATORS, evaluator_for, needs_llm, start_evaluation
    from generation.judging import JUDGE_NAME, start_judge_run
    from generation.llm import Gateway
    from generation.services import require_api_key
    from generation.tasks import enqueue_evaluation, enqueue_judge

    study = get_study_for_admin(request.user, slug)
    if request.method == "POST":
        name = request.POST.get("evaluator", "")
        judge = name == JUDGE_NAME  # the rubric judge answers the rubric; the others score summaries
        try:
            if not judge and name not in EVALUATORS:
                raise ApplicationError(f"unknown evaluator {name!r}")
            model = judge or needs_llm(name)
            if model:
                require_api_key()
            if judge:
                run = start_judge_run(study=study)
            else:
                run = start_evaluation(study=study, evaluator=evaluator_for(name, Gateway() if model else None))
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            if judge:
                enqueue_judge(study.pk)
            else:
                enqueue_evaluation(study.pk, name)
            messages.info(request, f"{name} is running (version {run.version[:12]}); this page follows its progress.")
        return redirect("generation:evaluators", slug=study.slug)
    evaluators = [{"name": name, "needs_llm": needs_llm(name)} for name in sorted(EVALUATORS)]
    evaluators.append({"name": JUDGE_NAME, "needs_llm": True})
    return render(
        request,
        "generation/evaluators.html",
        {
            "study": study,
            "evaluators": evaluators,
            **evaluator_runs(study, now=timezone.now()),
        },
    )
