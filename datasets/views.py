"""Study admins' import page: upload a JSON Lines file and follow its runs. The upload
goes through the same service and task as POST /api/studies/<slug>/imports/
(datasets.import_runs), so the page and the API import alike."""

from __future__ import annotations

from datetime import UTC, datetime

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from annotate.selectors.access import get_study_for_admin
from core.exceptions import ApplicationError
from datasets import import_runs
from datasets.tasks import run_api_import_task


def _moment(iso: str | None) -> datetime | None:
    """A run file's ISO time (written with its offset, in UTC) as an aware datetime."""
    if not iso:
        return None
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class ImportForm(forms.Form):
    file = forms.FileField(
        label="JSON Lines file",
        help_text="Sources, summaries, claims and findings of this study (docs/import-format.md). All or nothing.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def imports(request, slug):
    study = get_study_for_admin(request.user, slug)
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            run = import_runs.start_import(
                study=study,
                requested_by=request.user,
                chunks=upload.chunks(),
                file_name=upload.name,
                enqueue=run_api_import_task.delay,
            )
        except ApplicationError as exc:
            form.add_error("file", exc.message)
        else:
            if run.status == "done":
                messages.success(request, f"Imported {run.file_name}.")
            elif run.status == "failed":
                messages.error(request, f"{run.file_name} was not imported: {run.error}")
            else:
                messages.info(request, f"{run.file_name} is being imported.")
            return redirect("datasets:imports", slug=study.slug)
    runs = import_runs.list_imports(study=study)[:20]
    waiting = any(run.status in ("pending", "running") for run in runs)
    # The run files keep ISO text; the page shows a date and time with its zone.
    rows = [{"run": run, "started": _moment(run.created_at), "finished": _moment(run.finished_at)} for run in runs]
    return render(
        request,
        "datasets/imports.html",
        {"study": study, "form": form, "rows": rows, "waiting": waiting},
        status=400 if form.errors else 200,
    )
