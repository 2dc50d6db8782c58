"""HTML pages for raters. Thin: look up through a selector, call a service, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotate import selectors, services
from annotate.exceptions import ApplicationError, StaleWriteError
from annotate.forms import answers_from_post, rationale_field
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


def _question_views(definition, answers, rationales, errors):
    """What the template needs per question, precomputed (templates stay logic-free)."""
    views = []
    for q in definition.questions:
        value = answers.get(q.key)
        views.append(
            {
                "q": q,
                "value": value,
                # Compared as text: answers re-shown after a failed POST are strings.
                "selected": {str(v) for v in value} if isinstance(value, list) else {str(value)},
                "rationale": rationales.get(q.key, ""),
                "rationale_field": rationale_field(q.key),
                "error": errors.get(q.key, ""),
            }
        )
    return views


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
        answers, rationales = answers_from_post(definition, request.POST)
        common = {"assignment": assignment, "rater": request.user, "version": request.POST.get("version")}
        try:
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
    context = {
        "assignment": assignment,
        "study": assignment.study,
        "summary_text": assignment.summary.text,
        "source": source,
        "sentences": list(source.sentences.all()),
        "questions": _question_views(definition, answers, rationales, errors),
        "form_error": errors.get("__all__", ""),
        "has_errors": bool(errors),
        "editable": editable,
        "api_url": reverse("api:assignment-rating", kwargs={"assignment_uuid": assignment.uuid}),
        "digit_question": next((q.key for q in definition.questions if q.shortcut_digits), ""),
    }
    return render(request, "annotate/rate.html", context, status=status)
