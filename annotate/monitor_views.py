"""The study admin's live quality monitor of a batch and the inbox of the raters'
questions (docs/monitoring.md). Thin: access through a selector, a service per action."""

from __future__ import annotations

import math

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotate import monitoring
from annotate.pages import page_context
from annotate.pages.monitor import FLAG_STATUSES, flag_inbox_page, monitor_page
from annotate.selectors.access import get_study_for_admin
from annotate.selectors.batches import get_batch
from annotate.selectors.monitor import DEFAULT_FAST_FRACTION, batch_rater, get_study_flag
from core.exceptions import ApplicationError

MONITOR_ACTIONS = ("pause", "resume", "reassign", "exclude")


def _field_error(field: str, message: str) -> ApplicationError:
    return ApplicationError(f'field "{field}": {message}', extra={"fields": {field: message}})


def _fast_fraction(raw: str | None) -> float:
    """The `fast` query parameter: the share of the batch's median under which an item
    counts as too fast (0 < fast < 1)."""
    if raw in (None, ""):
        return DEFAULT_FAST_FRACTION
    try:
        value = float(raw)
    except ValueError:
        raise _field_error("fast", "must be a number between 0 and 1, e.g. 0.25") from None
    if not math.isfinite(value) or not 0 < value < 1:
        raise _field_error("fast", "must be a number between 0 and 1, e.g. 0.25")
    return value


def _batch_rater(batch, username: str):
    """A rater with items in the batch, by username, else a 400 naming `rater`."""
    if not isinstance(username, str) or not username:
        raise _field_error("rater", "choose a rater of this batch")
    user = batch_rater(batch, username)
    if user is None:
        raise _field_error("rater", "no such rater in this batch")
    return user


def _act(request, study, batch) -> str:
    """Run the posted action; the message to show."""
    action = request.POST.get("action", "")
    if action not in MONITOR_ACTIONS:
        raise _field_error("action", f"must be one of {', '.join(MONITOR_ACTIONS)}")
    rater = _batch_rater(batch, request.POST.get("rater", ""))
    name = rater.get_username()
    if action == "pause":
        monitoring.pause_rater(study=study, rater=rater, paused_by=request.user, reason=request.POST.get("reason", ""))
        return f"{name} is paused: no new items and no answers until you resume them."
    if action == "resume":
        monitoring.resume_rater(study=study, rater=rater, resumed_by=request.user)
        return f"{name} is resumed."
    if action == "reassign":
        done = monitoring.reassign_open_items(batch=batch, rater=rater)
        kept = f"; {done.kept} stayed (every other rater has them already)" if done.kept else ""
        return f"{done.moved} open item{'s' if done.moved != 1 else ''} of {name} moved to other raters{kept}."
    monitoring.exclude_rater(batch=batch, rater=rater, excluded_by=request.user, reason=request.POST.get("reason", ""))
    return f"{name}'s answers in this batch are excluded from the report and the export's answer tables."


@login_required
@require_http_methods(["GET", "POST"])
def batch_monitor_page(request, slug, batch_uuid):
    """Per rater: items done, median active time, too-fast items, straight-lining, gold
    accuracy and leave-one-out agreement, with the actions. static/js/monitor.js fetches
    the page again every few seconds and swaps in its figures (#monitor-figures)."""
    study = get_study_for_admin(request.user, slug)
    batch = get_batch(study, batch_uuid)
    status, error = 200, ""
    if request.method == "POST":
        try:
            messages.success(request, _act(request, study, batch))
        except ApplicationError as exc:
            status, error = getattr(exc, "http_status", 400), exc.message
        else:
            return redirect("studies:monitor", slug=study.slug, batch_uuid=batch.uuid)
    try:
        fast = _fast_fraction(request.GET.get("fast"))
    except ApplicationError as exc:
        status, error, fast = 400, exc.message, DEFAULT_FAST_FRACTION
    page = monitor_page(request.user, study, batch, fast=fast, error=error)
    return render(request, "annotate/studies/monitor.html", page_context(page), status=status)


@login_required
@require_http_methods(["GET", "POST"])
def flag_inbox(request, slug):
    """The study's questions from raters, open ones first; the admin answers here."""
    study = get_study_for_admin(request.user, slug)
    status, error, error_flag = 200, "", None
    shown = request.GET.get("status", "all")
    if shown not in FLAG_STATUSES:
        status, error, shown = 400, f'field "status": must be one of {", ".join(FLAG_STATUSES)}', "all"
    if request.method == "POST":
        item = get_study_flag(study, request.POST.get("flag", ""))
        try:
            if item is None:
                raise _field_error("flag", "no such question in this study")
            monitoring.answer_flag(
                flag=item,
                answered_by=request.user,
                answer=request.POST.get("answer", ""),
                shared=request.POST.get("shared") == "on",
            )
        except ApplicationError as exc:
            status, error, error_flag = getattr(exc, "http_status", 400), exc.message, item
        else:
            messages.success(request, "Answer saved: the rater sees it on the item.")
            return redirect("studies:flags", slug=study.slug)
    page = flag_inbox_page(request.user, study, shown=shown, error=error, error_flag=error_flag)
    return render(request, "annotate/studies/flags.html", page_context(page), status=status)
