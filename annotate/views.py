"""HTML pages for raters. Thin: look up through a selector, call a service, render."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotate import batches, selectors, services
from annotate.exceptions import ApplicationError, StaleWriteError
from annotate.forms import BatchForm, answers_from_post, finding_field, rationale_field, spans_field
from annotate.models import Assignment, Summary
from annotate.rubrics import AnswerValidationError


def home(request):
    if request.user.is_authenticated:
        return redirect("annotate:queue")
    return redirect("login")


@login_required
def queue(request):
    assignments = list(selectors.assignments_for_rater(request.user))
    return render(
        request,
        "annotate/queue.html",
        {"assignments": assignments, "progress": selectors.queue_progress(request.user)},
    )


def _question_views(definition, answers, rationales, errors, findings):
    """What the template needs per question, precomputed (templates stay logic-free)."""
    views = []
    for q in definition.questions:
        value = answers.get(q.key)
        view = {
            "q": q,
            "template": f"annotate/questions/{q.kind}.html",
            "value": value,
            # Compared as text: answers re-shown after a failed POST are strings.
            "selected": {str(v) for v in value} if isinstance(value, list) else {str(value)},
            "rationale": rationales.get(q.key, "") if not isinstance(rationales.get(q.key), dict) else "",
            "rationale_field": rationale_field(q.key),
            "error": errors.get(q.key, ""),
        }
        if q.kind == "per_finding":
            given = value if isinstance(value, dict) else {}
            texts = rationales.get(q.key) if isinstance(rationales.get(q.key), dict) else {}
            view["findings"] = [
                {
                    "finding": f,
                    "number": number,
                    "field": finding_field(q.key, str(f.uuid)),
                    "selected": str(given.get(str(f.uuid), "")),
                    "rationale": texts.get(str(f.uuid), ""),
                    "rationale_field": rationale_field(finding_field(q.key, str(f.uuid))),
                }
                for number, f in enumerate(findings, start=1)
            ]
        if q.kind == "span":
            view["spans_field"] = spans_field(q.key)
        views.append(view)
    return views


def _client_data(assignment, definition, answers, sentences, findings) -> dict:
    """The JSON the rating page's script works from (rendered with json_script)."""
    return {
        "summary_text": assignment.summary.text,
        "source_text": assignment.summary.source.text,
        "sentences": [{"start": s.start, "end": s.end, "ref": s.ref} for s in sentences],
        "findings": [{"id": str(f.uuid), "start": f.start, "end": f.end} for f in findings],
        "span_questions": {
            q.key: {
                "target": q.target,
                "prompt": q.prompt,
                "rationale": q.rationale,
                "sub": [
                    {
                        "key": sq.key,
                        "kind": sq.kind,
                        "prompt": sq.prompt,
                        "options": [{"value": o.value, "label": o.label} for o in sq.options],
                    }
                    for sq in q.span_questions
                ],
            }
            for q in definition.questions
            if q.kind == "span"
        },
        "spans": {q.key: answers.get(q.key) or [] for q in definition.questions if q.kind == "span"},
    }


@login_required
@require_http_methods(["GET", "POST"])
def rate(request, assignment_uuid):
    assignment = selectors.get_assignment_for_rater(request.user, assignment_uuid)
    definition = selectors.rubric_definition(assignment.study.rubric)
    errors: dict[str, str] = {}
    status = 200
    if request.method == "GET":
        services.open_assignment(assignment=assignment)
        revision = selectors.latest_revision(assignment)
        answers, rationales = selectors.revision_answers(revision)
    else:
        action = request.POST.get("action", "save")
        finding_ids = tuple(str(f.uuid) for f in assignment.summary.source.findings.all())
        try:
            answers, rationales = answers_from_post(definition, request.POST, finding_ids)
        except AnswerValidationError as exc:
            answers, rationales = {}, {}
            errors, action = exc.errors, "invalid"
        common = {"assignment": assignment, "rater": request.user, "version": request.POST.get("version")}
        try:
            if action == "invalid":
                raise AnswerValidationError(errors)
            if action == "submit":
                services.submit_rating(
                    **common, answers=answers, rationales=rationales, active_seconds=request.POST.get("active_seconds")
                )
                messages.success(request, "Rating submitted.")
                if selectors.training_feedback(assignment) is not None:
                    return redirect("annotate:feedback", assignment_uuid=assignment.uuid)
                following = selectors.next_assignment_for_rater(request.user, after=assignment)
                if following is not None:
                    return redirect("annotate:rate", assignment_uuid=following.uuid)
                return redirect("annotate:queue")
            if action == "skip":
                services.skip_assignment(**common, reason=request.POST.get("skip_reason"))
                messages.info(request, "Item skipped.")
                return redirect("annotate:queue")
            if action == "reopen":
                services.reopen_rating(**common)
                messages.info(request, "Rating reopened: your submitted answers are kept in the history.")
                return redirect("annotate:rate", assignment_uuid=assignment.uuid)
            services.save_draft(
                **common, answers=answers, rationales=rationales, active_seconds=request.POST.get("active_seconds")
            )
            messages.success(request, "Draft saved.")
            return redirect("annotate:rate", assignment_uuid=assignment.uuid)
        except AnswerValidationError as exc:
            errors, status = exc.errors, 400
        except StaleWriteError as exc:
            errors, status = {"__all__": exc.message}, 409
        except ApplicationError as exc:
            errors, status = {"__all__": exc.message}, getattr(exc, "http_status", 400)
        assignment.refresh_from_db()

    editable = assignment.state in (Assignment.State.PENDING, Assignment.State.IN_PROGRESS)
    source = assignment.summary.source
    sentences = list(source.sentences.all())
    findings = list(source.findings.all())
    context = {
        "assignment": assignment,
        "study": assignment.study,
        "summary_text": assignment.summary.text,
        "source": source,
        "sentences": sentences,
        "findings": findings,
        # Assisted condition only: the pipeline's verdict per claim (never the generator).
        "claims": list(assignment.summary.claims.order_by("index")) if assignment.study.assisted else [],
        "questions": _question_views(definition, answers, rationales, errors, findings),
        "client_data": _client_data(assignment, definition, answers, sentences, findings),
        "form_error": errors.get("__all__", ""),
        "has_errors": bool(errors),
        "editable": editable,
        "api_url": reverse("api:assignment-rating", kwargs={"assignment_uuid": assignment.uuid}),
        "digit_question": next((q.key for q in definition.questions if q.shortcut_digits), ""),
    }
    return render(request, "annotate/rate.html", context, status=status)


@login_required
def feedback(request, assignment_uuid):
    """Training round: the rater's own submitted answers beside the expected ones."""
    assignment = selectors.get_assignment_for_rater(request.user, assignment_uuid)
    expected = selectors.training_feedback(assignment)
    if expected is None or assignment.state != Assignment.State.SUBMITTED:
        raise Http404("No feedback for this item.")
    given, _ = selectors.revision_answers(selectors.latest_revision(assignment))
    definition = selectors.rubric_definition(assignment.study.rubric)
    rows = [
        {
            "q": q,
            "given": given.get(q.key),
            "expected": expected.answers[q.key],
            "match": selectors.answer_matches(expected.answers[q.key], given.get(q.key)),
        }
        for q in definition.questions
        if q.key in expected.answers
    ]
    following = selectors.next_assignment_for_rater(request.user, after=assignment)
    return render(
        request,
        "annotate/feedback.html",
        {"assignment": assignment, "rows": rows, "expected": expected, "following": following},
    )


def display_answer(value) -> str:
    """An answer as text for the admin pages (lists joined, spans quoted)."""
    if value is None or value == [] or value == {}:
        return "–"
    if isinstance(value, list):
        return "; ".join(
            f"“{v.get('text', '')}”" + (f" ({', '.join(map(str, v['answers'].values()))})" if v.get("answers") else "")
            if isinstance(v, dict)
            else str(v)
            for v in value
        )
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


# --- study admins and viewers ------------------------------------------------------------


@login_required
def studies(request):
    return render(request, "annotate/studies/list.html", {"studies": selectors.studies_for_staff_pages(request.user)})


@login_required
def study_dashboard(request, slug):
    study = selectors.get_study_for_viewer(request.user, slug)
    batches = [selectors.batch_progress(b) for b in study.batches.order_by("created_at")]
    is_admin = _is_study_admin(request.user, study)
    return render(
        request, "annotate/studies/dashboard.html", {"study": study, "batches": batches, "is_admin": is_admin}
    )


def _is_study_admin(user, study) -> bool:
    try:
        selectors.get_study_for_admin(user, study.slug)
    except Http404:
        return False
    return True


@login_required
@require_http_methods(["GET", "POST"])
def batch_create(request, slug):
    study = selectors.get_study_for_admin(request.user, slug)
    users = get_user_model().objects.filter(is_active=True).order_by("username")
    form = BatchForm(request.POST or None, users=users)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            batch = batches.create_batch(
                study=study,
                name=d["name"],
                kind=d["kind"],
                raters=list(d["raters"]),
                design=d["design"],
                seed=d["seed"],
                filters=form.filters(),
                n=d["n"],
                stratify_by=[f.strip() for f in d["stratify_by"].split(",") if f.strip()],
                k=d["k"],
                share=d["share"],
                m=d["m"],
                blinded=d["blinded"],
                created_by=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Batch {batch.name!r} created with {batch.assignments.count()} assignments.")
            return redirect("studies:batch", slug=study.slug, batch_uuid=batch.uuid)
    return render(
        request,
        "annotate/studies/batch_form.html",
        {"study": study, "form": form},
        status=400 if request.method == "POST" else 200,
    )


@login_required
@require_http_methods(["GET", "POST"])
def batch_detail(request, slug, batch_uuid):
    study = selectors.get_study_for_viewer(request.user, slug)
    batch = selectors.get_batch(study, batch_uuid)
    is_admin = _is_study_admin(request.user, study)
    if request.method == "POST":
        if not is_admin:
            raise Http404("No such study.")
        action = request.POST.get("action")
        try:
            if action == "rerate":
                opened = batches.open_rerating(batch=batch)
                messages.success(request, f"Re-rating round opened for {opened} submitted assignments.")
            else:
                assignment = batch.assignments.filter(uuid=request.POST.get("assignment")).first()
                if assignment is None:
                    raise ApplicationError("No such assignment in this batch.")
                if action == "withdraw":
                    batches.withdraw_assignment(assignment=assignment)
                    messages.success(request, "Assignment withdrawn; its answers are kept.")
                elif action == "move":
                    target = get_user_model().objects.filter(username=request.POST.get("to", "")).first()
                    if target is None:
                        raise ApplicationError("No such user.")
                    batches.move_assignment(assignment=assignment, to_rater=target)
                    messages.success(request, f"Moved to {target.get_username()}; earlier answers are kept.")
                else:
                    raise ApplicationError("Unknown action.")
        except ApplicationError as exc:
            messages.error(request, exc.message)
        return redirect("studies:batch", slug=study.slug, batch_uuid=batch.uuid)
    assignments = batch.assignments.select_related("rater", "summary").order_by("summary__key", "rater__username")
    definition = selectors.rubric_definition(study.rubric)
    return render(
        request,
        "annotate/studies/batch.html",
        {
            "study": study,
            "batch": batch,
            "progress": selectors.batch_progress(batch),
            "is_admin": is_admin,
            "assignments": assignments if is_admin else [],
            "questions": [q for q in definition.questions if q.kind != "text"],
        },
    )


@login_required
def disagreements(request, slug, batch_uuid):
    study = selectors.get_study_for_admin(request.user, slug)
    batch = selectors.get_batch(study, batch_uuid)
    definition = selectors.rubric_definition(study.rubric)
    choices = [q for q in definition.questions if q.kind != "text"]
    question = request.GET.get("question") or choices[0].key
    if question not in {q.key for q in choices}:
        raise Http404("No such question.")
    try:
        threshold = float(request.GET.get("threshold", 1))
    except ValueError:
        threshold = 1.0
    phase = request.GET.get("phase", "initial")
    if phase not in ("initial", "post_discussion"):
        phase = "initial"
    sort = "item" if request.GET.get("sort") == "item" else "spread"
    rows = [
        (row, {rater: display_answer(value) for rater, value in row.values.items()})
        for row in selectors.batch_disagreements(batch, question=question, threshold=threshold, phase=phase, sort=sort)
    ]
    return render(
        request,
        "annotate/studies/disagreements.html",
        {
            "study": study,
            "batch": batch,
            "rows": rows,
            "questions": choices,
            "question": question,
            "threshold": threshold,
            "phase": phase,
            "sort": sort,
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def batch_item(request, slug, batch_uuid, summary_uuid):
    study = selectors.get_study_for_admin(request.user, slug)
    batch = selectors.get_batch(study, batch_uuid)
    summary = get_object_or_404(Summary.objects.select_related("source"), uuid=summary_uuid, study=study)
    if not batch.assignments.filter(summary=summary).exists():
        raise Http404("This summary is not in the batch.")
    definition = selectors.rubric_definition(study.rubric)
    error = ""
    if request.method == "POST":
        try:
            if request.POST.get("action") == "expected":
                try:
                    answers = json.loads(request.POST.get("answers") or "{}")
                except json.JSONDecodeError as exc:
                    raise ApplicationError(f"The expected answers are not valid JSON: {exc.msg}.") from None
                batches.record_expected_answer(
                    study=study,
                    summary=summary,
                    purpose=request.POST.get("purpose", "gold"),
                    answers=answers,
                    explanation=request.POST.get("explanation", ""),
                    created_by=request.user,
                )
                messages.success(request, "Expected answers recorded.")
            elif request.POST.get("action") == "note":
                batches.add_discussion_note(
                    batch=batch,
                    summary=summary,
                    author=request.user,
                    text=request.POST.get("text", ""),
                    question=request.POST.get("question", ""),
                )
                messages.success(request, "Note added.")
            else:
                key = request.POST.get("question", "")
                q = next((q for q in definition.questions if q.key == key), None)
                if q is None:
                    raise ApplicationError("Choose a question.")
                value = request.POST.getlist("value") if q.kind == "checkboxes" else request.POST.get("value")
                batches.record_consensus(
                    batch=batch,
                    summary=summary,
                    question=key,
                    value=value,
                    rationale=request.POST.get("rationale", ""),
                    decided_by=request.user,
                )
                messages.success(request, f"Consensus for {q.prompt} recorded.")
            return redirect("studies:batch-item", slug=slug, batch_uuid=batch.uuid, summary_uuid=summary.uuid)
        except AnswerValidationError as exc:
            error = "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
        except ApplicationError as exc:
            error = exc.message
    phases = {}
    for phase in ("initial", "post_discussion"):
        by_rater = selectors.batch_answers(batch, phase=phase, summary=summary).get(summary.pk, {})
        phases[phase] = [
            {
                "rater": rater,
                "answers": [
                    {
                        "q": q,
                        "value": display_answer(answers.get(q.key)),
                        "rationale": display_answer(rationales.get(q.key)) if rationales.get(q.key) else "",
                    }
                    for q in definition.questions
                ],
            }
            for rater, (answers, rationales, _) in sorted(by_rater.items(), key=lambda kv: kv[0].get_username())
        ]
    return render(
        request,
        "annotate/studies/item.html",
        {
            "study": study,
            "batch": batch,
            "summary": summary,
            "phases": phases,
            "error": error,
            "sentences": list(summary.source.sentences.order_by("index")),
            "notes": summary.discussion_notes.filter(batch=batch).select_related("author"),
            "consensus": summary.consensus_answers.filter(batch=batch).select_related("decided_by"),
            "expected": summary.expected_answers.first(),
            "consensus_questions": [
                q for q in definition.questions if q.kind in ("scale", "choice", "checkboxes", "text")
            ],
        },
        status=400 if error else 200,
    )
