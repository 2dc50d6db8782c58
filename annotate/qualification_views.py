"""The study admin's qualification pages (docs/qualification.md): the pass rule with the
raters' attempts and the retry button, and the gold form that records an item's expected
answers with the rubric's own widgets."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from annotate import batches, qualification
from annotate.forms import GoldAnswerForm, QualificationRuleForm, answers_from_post
from annotate.models import Assignment, Batch, ComparisonMember, ExpectedAnswer, QualificationAttempt, Summary
from annotate.pages.questions import question_views
from annotate.rubrics import AnswerValidationError
from annotate.selectors.access import get_study_for_admin
from annotate.selectors.contents import rubric_definition
from annotate.selectors.queue import ShownSummary
from core.exceptions import ApplicationError

# Summaries listed for recording gold answers; a search by key finds the others.
MAX_LISTED = 100


def _rater_rows(study) -> list[dict]:
    """Every rater with qualification items, with their standing and attempts."""
    raters = (
        get_user_model()
        .objects.filter(assignments__study=study, assignments__batch__kind=Batch.Kind.QUALIFICATION)
        .distinct()
        .order_by("username")
    )
    rows = []
    for rater in raters:
        status = qualification.qualification_status(study=study, rater=rater)
        rows.append({"rater": rater, "status": status})
    return rows


@login_required
@require_http_methods(["GET", "POST"])
def qualification_page(request, slug):
    study = get_study_for_admin(request.user, slug)
    definition = rubric_definition(study.rubric)
    rule = qualification.current_rule(study)
    status = 200
    action = request.POST.get("action") if request.method == "POST" else None
    if action == "retry":
        rater = (
            get_user_model()
            .objects.filter(
                username=request.POST.get("rater", ""),
                assignments__study=study,
                assignments__batch__kind=Batch.Kind.QUALIFICATION,
            )
            .first()
        )
        if rater is None:
            messages.error(request, "rater: no such rater with qualification items in this study.")
        else:
            try:
                qualification.allow_qualification_retry(study=study, rater=rater, granted_by=request.user)
            except ApplicationError as exc:
                messages.error(request, exc.message)
            else:
                messages.success(request, f"{rater.get_username()} may try the qualification again.")
                return redirect("studies:qualification", slug=study.slug)
        form = QualificationRuleForm(definition=definition, initial=_initial(rule))
        status = 400
    elif request.method == "POST":
        form = QualificationRuleForm(request.POST, definition=definition)
        if form.is_valid():
            try:
                saved = qualification.set_qualification_rule(
                    study=study,
                    threshold=float(form.cleaned_data["threshold"]) / 100,
                    questions=form.cleaned_data["questions"],
                    tolerances=form.tolerances(),
                    attempts_allowed=form.cleaned_data["attempts_allowed"],
                    created_by=request.user,
                )
            except ApplicationError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, f"Pass rule saved (version {saved.version}).")
                return redirect("studies:qualification", slug=study.slug)
        status = 400
    else:
        form = QualificationRuleForm(definition=definition, initial=_initial(rule))
    qualification_batches = list(study.batches.filter(kind=Batch.Kind.QUALIFICATION).order_by("created_at"))
    in_batches = {pk for b in qualification_batches for pk in (b.design or {}).get("gold") or []}
    gold_items = (
        Summary.objects.filter(Q(assignments__batch__in=qualification_batches) | Q(pk__in=in_batches))
        .distinct()
        .order_by("key")
        .prefetch_related("expected_answers")
    )
    search = request.GET.get("q", "").strip()[:200]
    candidates = Summary.objects.filter(study=study)
    if search:
        candidates = candidates.filter(key__icontains=search)
    purposes = dict(ExpectedAnswer.objects.filter(study=study).values_list("summary_id", "purpose"))
    summaries = list(candidates.select_related("source").order_by("key")[: MAX_LISTED + 1])
    return render(
        request,
        "annotate/studies/qualification.html",
        {
            "study": study,
            "form": form,
            "rule": rule,
            "rules": study.qualification_rules.order_by("-version"),
            "qualification_batches": qualification_batches,
            "gold_items": [{"summary": s, "expected": next(iter(s.expected_answers.all()), None)} for s in gold_items],
            "raters": _rater_rows(study),
            # Every summary of the study, with a link to record its gold answers: the first
            # step of a qualification, reachable from here without typing a URL.
            "summaries": [
                {"summary": m, "purpose": ExpectedAnswer.Purpose(purposes[m.pk]).label if m.pk in purposes else ""}
                for m in summaries[:MAX_LISTED]
            ],
            "more_summaries": len(summaries) > MAX_LISTED,
            "search": search,
            "attempt_count": QualificationAttempt.objects.filter(study=study).count(),
        },
        status=status,
    )


def _initial(rule) -> dict:
    if rule is None:
        return {}
    initial = {
        "threshold": round(rule.threshold * 100, 1),
        "questions": rule.questions,
        "attempts_allowed": rule.attempts_allowed,
    }
    initial.update({f"tolerance_{k}": v for k, v in rule.tolerances.items()})
    return initial


def _compared(summary) -> list[ShownSummary] | None:
    """A comparison item's summaries in the comparison's own order, for its preference
    questions; None for a summary rated alone."""
    if not hasattr(summary, "comparison"):
        return None
    rows = ComparisonMember.objects.filter(comparison=summary.comparison).order_by("index")
    return [
        ShownSummary(chr(ord("A") + i), str(m.summary.uuid), m.summary.text)
        for i, m in enumerate(rows.select_related("summary"))
    ]


def _gold_questions(definition, expected_values, errors, findings, compared):
    """The rubric's own widgets for the questions a gold answer can be given to here:
    every question but highlights and per-claim answers (which need the rating page's
    script or the claims of one summary; docs/qualification.md)."""
    views = question_views(definition, expected_values, {}, errors, findings, (), compared=compared)
    return [v for v in views if not v["q"].highlights and not v["q"].per_claim]


@login_required
@require_http_methods(["GET", "POST"])
def gold_form(request, slug, summary_uuid):
    """One item's expected answers, entered with the rubric's widgets; a bad answer is a
    400 naming the question, and nothing is saved."""
    study = get_study_for_admin(request.user, slug)
    summary = get_object_or_404(Summary.objects.select_related("source"), uuid=summary_uuid, study=study)
    definition = rubric_definition(study.rubric)
    findings = list(summary.source.findings.order_by("index"))
    compared = _compared(summary)
    expected = ExpectedAnswer.objects.filter(study=study, summary=summary).first()
    errors: dict[str, str] = {}
    values = dict(expected.answers) if expected else {}
    form = GoldAnswerForm(
        request.POST or None,
        initial={"purpose": expected.purpose, "explanation": expected.explanation} if expected else None,
    )
    status = 200
    if request.method == "POST":
        status = 400
        try:
            answers, _ = answers_from_post(definition, request.POST, tuple(str(f.uuid) for f in findings))
            values = {k: v for k, v in answers.items() if v not in (None, "", [], {})}
            if not form.is_valid():
                errors["__all__"] = form.error_message()
            else:
                batches.record_expected_answer(
                    study=study,
                    summary=summary,
                    purpose=form.cleaned_data["purpose"],
                    answers=values,
                    explanation=form.cleaned_data["explanation"],
                    created_by=request.user,
                )
                messages.success(request, f"Expected answers for {summary.key} recorded.")
                return redirect("studies:gold", slug=study.slug, summary_uuid=summary.uuid)
        except AnswerValidationError as exc:
            errors.update(exc.errors)
            if "answers" in exc.errors:
                errors["__all__"] = exc.errors["answers"]
        except ApplicationError as exc:
            errors["__all__"] = exc.message
    prompts = {q.key: q.prompt for q in definition.questions}
    used_in = (
        Batch.objects.filter(assignments__summary=summary).exclude(assignments__state=Assignment.State.WITHDRAWN)
    ).distinct()
    return render(
        request,
        "annotate/studies/gold.html",
        {
            "study": study,
            "summary": summary,
            "compared": compared,
            "form": form,
            "expected": expected,
            "questions": _gold_questions(definition, values, errors, findings, compared),
            # Every problem once at the top, naming its field (the question as the admin reads it).
            "problems": [msg if key == "__all__" else f"{prompts.get(key, key)}: {msg}" for key, msg in errors.items()],
            "hide_rationale": True,
            "batches": used_in,
        },
        status=status,
    )
