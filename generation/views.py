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
    from generation.evaluators import EVALUATORS, evaluator_for, needs_llm, start_evaluation
    from generation.judging import JUDGE_NAME, start_judge_run
    from generation.llm import Gateway
    from generation.models import EvaluationRun, JudgeRun
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
    judge_runs = (
        JudgeRun.objects.filter(study=study)
        .annotate(
            judged=Count("answers"),
            valid=Count("answers", filter=Q(answers__status="valid")),
            invalid=Count("answers", filter=Q(answers__status="invalid")),
            failed=Count("answers", filter=Q(answers__status="failed")),
        )
        .order_by("-created_at")
    )
    evaluators = [{"name": name, "needs_llm": needs_llm(name)} for name in sorted(EVALUATORS)]
    evaluators.append({"name": JUDGE_NAME, "needs_llm": True})
    return render(
        request,
        "generation/evaluators.html",
        {
            "study": study,
            "evaluators": evaluators,
            "runs": runs,
            "judge_runs": judge_runs,
            "n_summaries": n_summaries,
        },
    )
