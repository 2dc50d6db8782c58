"""Study admins' import and export pages: upload a JSON Lines file and follow its runs;
start a dataset export and follow it to its download. They go through the same services
and tasks as POST /api/studies/<slug>/imports/ and /exports/ (datasets.import_runs,
datasets.export_runs), so the pages and the API import and export alike."""

from __future__ import annotations

from datetime import UTC, datetime

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotate.selectors.access import get_study_for_admin
from core.exceptions import ApplicationError
from datasets import export_runs, import_runs
from datasets.tasks import run_api_export_task, run_api_import_task


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
                upload=upload,
                file_name=upload.name,
                enqueue=run_api_import_task.delay,
            )
        except ApplicationError as exc:
            if exc.http_status >= 500:
                raise  # the queue is unavailable: the 503 page (core.exceptions)
            form.add_error("file", exc.message)
        else:
            if run.status == "done":
                changed = "; ".join(
                    f"{c['field']}: {c['before'][:60]!r} → {c['after'][:60]!r}" for c in run.settings_changed
                )
                messages.success(
                    request, f"Imported {run.file_name}." + (f" Study settings changed: {changed}." if changed else "")
                )
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


@login_required
@require_POST
def import_retry(request, slug, import_id):
    """Run a failed import again from its kept upload (its worker died, the queue was down)."""
    study = get_study_for_admin(request.user, slug)
    try:
        run = import_runs.retry_import(study=study, import_id=import_id, enqueue=run_api_import_task.delay)
    except ApplicationError as exc:
        if exc.http_status >= 500:
            raise
        messages.error(request, exc.message)
    else:
        messages.info(request, f"{run.file_name}: {run.status}.")
    return redirect("datasets:imports", slug=study.slug)


# --- exports: the same service and task as POST /api/studies/<slug>/exports/ ---


class ExportForm(forms.Form):
    formats = forms.MultipleChoiceField(
        choices=[(f, f) for f in export_runs.FORMATS],
        initial=list(export_runs.FORMATS),
        widget=forms.CheckboxSelectMultiple,
    )
    phase = forms.ChoiceField(choices=[(p, p) for p in export_runs.PHASES], initial="all")
    include_calibration = forms.BooleanField(required=False, label="Include calibration batches")
    include_restricted = forms.BooleanField(
        required=False,
        label="Include the text of sources whose licence does not allow a CC BY release",
    )


def _export_row(run) -> dict:
    return {"run": run, "started": _moment(run.created_at), "finished": _moment(run.finished_at)}


@login_required
@require_http_methods(["GET", "POST"])
def exports(request, slug):
    """Study admins: start a dataset export (every format by default, restricted sources
    withheld) and see the study's exports, each linking to its page."""
    study = get_study_for_admin(request.user, slug)
    form = ExportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = export_runs.start_export(
                study=study, requested_by=request.user, enqueue=run_api_export_task.delay, **form.cleaned_data
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect("datasets:export", slug=study.slug, export_id=run.id)
    runs = export_runs.list_exports(study=study)[:20]
    return render(
        request,
        "datasets/exports.html",
        {"study": study, "form": form, "rows": [_export_row(run) for run in runs]},
        status=400 if form.errors else 200,
    )


@login_required
def export_detail(request, slug, export_id):
    """One export's page: its status (refreshing while it runs), counts, withheld sources
    and the download link once done (the API's download, which takes the session)."""
    study = get_study_for_admin(request.user, slug)
    run = export_runs.get_export(study=study, export_id=export_id)
    return render(
        request,
        "datasets/export.html",
        {
            "study": study,
            "row": _export_row(run),
            "waiting": run.status in ("pending", "running"),
            "download": reverse("api:export-download", kwargs={"slug": study.slug, "export_id": run.id})
            if run.status == "done"
            else "",
        },
    )
