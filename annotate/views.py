"""HTML pages for raters. Thin: look up through a selector, call a service, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotate import selectors, services
from annotate.exceptions import ApplicationError, StaleWriteError
from annotate.forms import answers_from_post, finding_field, rationale_field, spans_field
from annotate.models import Assignment
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
        "questions": _question_views(definition, answers, rationales, errors, findings),
        "client_data": _client_data(assignment, definition, answers, sentences, findings),
        "form_error": errors.get("__all__", ""),
        "has_errors": bool(errors),
        "editable": editable,
        "api_url": reverse("api:assignment-rating", kwargs={"assignment_uuid": assignment.uuid}),
        "digit_question": next((q.key for q in definition.questions if q.shortcut_digits), ""),
    }
    return render(request, "annotate/rate.html", context, status=status)
