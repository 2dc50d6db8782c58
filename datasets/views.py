"""Study admins' import, export and releases pages: upload a JSON Lines file and follow its
runs; start a dataset export and follow it to its download; make a release of an export and
push it to the Hub or deposit it on Zenodo. Imports and exports go through the same
services and tasks as POST /api/studies/<slug>/imports/ and /exports/ (datasets.import_runs,
datasets.export_runs), so the pages and the API import and export alike; pushes and
deposits run in the background (datasets.publish_runs), never in the request."""

from __future__ import annotations

from datetime import UTC, datetime

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.validators import URLValidator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotate.selectors.access import get_study_for_admin
from core.exceptions import ApplicationError
from datasets import export_runs, import_runs, publish_runs
from datasets.models import ExportRun, PublishRun, Release
from datasets.release_pages import releases_page
from datasets.releases import create_release, parse_creators
from datasets.tasks import enqueue_publish, run_api_export_task, run_api_import_task


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


# --- releases: make one, push it to the Hub, deposit it on Zenodo ---

CREATORS_HELP = "One a line: Family, Given; Affiliation (the affiliation is optional)."


class ReleaseForm(forms.Form):
    export = forms.ModelChoiceField(queryset=ExportRun.objects.none(), to_field_name="uuid", empty_label=None)
    version = forms.CharField(max_length=20, help_text="1, 1.1 or 1.1.0, above the last release's")
    changelog = forms.CharField(max_length=500, help_text="What this release is, in a line.")
    creators = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text=CREATORS_HELP)

    def __init__(self, study, *args, **kwargs):
        super().__init__(*args, **kwargs)
        exports = ExportRun.objects.filter(study=study, status=ExportRun.Status.DONE, include_restricted=False)
        self.fields["export"].queryset = exports.order_by("-finished_at", "-id")
        self.fields["export"].label_from_instance = lambda run: f"{run.finished_at:%Y-%m-%d %H:%M} UTC · {run.uuid}"


class HubForm(forms.Form):
    repo = forms.CharField(max_length=200, label="Repository", help_text="owner/name of a Hub dataset repository")
    visibility = forms.ChoiceField(choices=[("public", "public"), ("private", "private")], initial="public")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


class ZenodoForm(forms.Form):
    creators = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text=CREATORS_HELP)
    keywords = forms.CharField(max_length=500, required=False, help_text="Separated by commas.")
    related = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text="URLs this dataset supplements, one a line."
    )

    def clean_related(self):
        urls = _lines(self.cleaned_data["related"])
        validate = URLValidator(schemes=["http", "https"])
        for url in urls:
            validate(url)
        return urls


def _form_errors(form: forms.Form) -> str:
    return "; ".join(f"{form.fields[f].label or f}: {' '.join(e)}" for f, e in form.errors.items())


@login_required
@require_http_methods(["GET", "POST"])
def releases(request, slug):
    """Study admins: the study's releases with where they are published, and a form to
    make a release of a finished export."""
    study = get_study_for_admin(request.user, slug)
    form = ReleaseForm(study, request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            release = create_release(
                study=study,
                export=data["export"],
                version=data["version"],
                changelog=data["changelog"],
                by=request.user.get_username(),
                creators=parse_creators(data["creators"]),
            )
        except ApplicationError as exc:
            field = next(iter(exc.extra.get("fields", {})), None)
            form.add_error(field if field in form.fields else None, exc.message)
        else:
            messages.success(request, f"Release {release.version} made.")
            return redirect("datasets:releases", slug=study.slug)
    return render(
        request,
        "datasets/releases.html",
        {"page": releases_page(study=study), "form": form, "hub_form": HubForm(), "zenodo_form": ZenodoForm()},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def release_publish(request, slug, release_id, target):
    """Start a push of the release to the Hub, or its deposit on Zenodo, in the background."""
    study = get_study_for_admin(request.user, slug)
    release = get_object_or_404(Release, study=study, uuid=release_id)
    form = (HubForm if target == PublishRun.Target.HUB else ZenodoForm)(request.POST)
    if not form.is_valid():
        messages.error(request, f"Release {release.version}: {_form_errors(form)}")
        return redirect("datasets:releases", slug=study.slug)
    data = form.cleaned_data
    if target == PublishRun.Target.HUB:
        options = {"repo": data["repo"], "private": data["visibility"] == "private"}
    else:
        keywords = [k.strip() for k in data["keywords"].split(",")]
        options = {"creators": parse_creators(data["creators"]), "keywords": keywords, "related": data["related"]}
    try:
        publish_runs.start_publish(
            release=release, target=target, options=options, requested_by=request.user, enqueue=enqueue_publish
        )
    except ApplicationError as exc:
        if exc.http_status >= 500:
            raise  # the queue is unavailable: the 503 page (core.exceptions)
        messages.error(request, f"Release {release.version}: {exc.message}")
    else:
        label = PublishRun.Target(target).label
        messages.info(request, f"Release {release.version}: publishing on {label} has started.")
    return redirect("datasets:releases", slug=study.slug)
