"""Study admins' pages: automatic evaluators (start a run, follow its progress) and Ask a
question (generation.asking)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

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


# --- Ask a question (generation.asking) ----------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def ask(request, slug):
    """A question in: it becomes a question of the study and an answer job, run off the
    request; the page of the job then shows its steps as they run."""
    from generation.asking import ask_question, asked_jobs
    from generation.tasks import enqueue_asked_question
    from literature.models import Retrieval

    study = get_study_for_admin(request.user, slug)
    form = {"question": "", "engine": "local", "regime": "unrestricted"}
    if request.method == "POST":
        form = {name: request.POST.get(name, default) for name, default in form.items()}
        try:
            job = ask_question(
                study=study,
                text=form["question"],
                engine=form["engine"],
                regime=form["regime"],
                asked_by=request.user.get_username(),
            )
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            transaction.on_commit(lambda: _queue_ask(enqueue_asked_question, job))
            return redirect("generation:asked", slug=study.slug, uuid=job.uuid)
    return render(
        request,
        "generation/ask.html",
        {
            "study": study,
            "form": form,
            "engines": Retrieval.Engine.choices,
            "regimes": Retrieval.Regime.choices,
            "asked": asked_jobs(study),
        },
        status=400 if request.method == "POST" else 200,
    )


def _queue_ask(enqueue, job) -> None:
    """Queue an asked question's work; a broker that cannot be reached fails its job and
    the page answers 503 "the task queue is unavailable" (core.background.enqueue_or_fail)."""
    from core.background import QUEUE_UNAVAILABLE, enqueue_or_fail
    from generation.models import AnswerJob
    from generation.services import fail_jobs

    error = f"{QUEUE_UNAVAILABLE.capitalize()}: the question was not queued; ask it again later."
    enqueue_or_fail(enqueue, job.pk, fail=lambda message: fail_jobs(job_ids=[job.pk], model=AnswerJob, error=error))


@login_required
@require_GET
def asked(request, slug, uuid):
    from generation.asking import ask_status, get_asked_job

    study = get_study_for_admin(request.user, slug)
    job = get_asked_job(study, uuid)
    return render(request, "generation/asked.html", {"study": study, "job": job, "s": ask_status(job)})


@login_required
@require_POST
def add_asked(request, slug, uuid):
    """The button under a finished answer: question and answer join the study for rating."""
    from generation.asking import add_asked_answer, get_asked_job
    from generation.tasks import enqueue_answer_verification

    study = get_study_for_admin(request.user, slug)
    job = get_asked_job(study, uuid)
    try:
        add_asked_answer(job=job)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        if job.config.get("verify"):
            transaction.on_commit(lambda: _queue_ask(enqueue_answer_verification, job))
        messages.info(request, "The question and its answer are in the study: put the answer in a batch to rate it.")
    return redirect("generation:asked", slug=study.slug, uuid=job.uuid)
