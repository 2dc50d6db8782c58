"""The study report pages. Thin: check access, call a service or the page model
(analysis.pages), render.

Access: the study's admins and viewers (annotate.selectors.access.get_study_for_viewer);
anyone else gets 404, as on the other study pages, and anonymous users are sent to login.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from analysis import pages, selectors, services, tasks
from analysis.models import AnalysisResult
from analysis.plots import FORMATS
from analysis.report_files import FILE_NAMES, report_files
from annotate.models import Study
from annotate.selectors.access import get_study_for_admin, get_study_for_viewer, studies_for_staff_pages

CONTENT_TYPES = {"png": "image/png", "svg": "image/svg+xml"}


def _phase(request) -> str:
    phase = request.GET.get("phase", "all")
    if phase not in services.PHASES:
        raise Http404("Unknown phase.")
    return phase


def _done_result(study: Study, phase: str) -> AnalysisResult:
    """The finished report for the study's inputs as they are now, else 404 (never computes)."""
    fingerprint = selectors.report_inputs(study=study, phase=phase).fingerprint
    result = selectors.analysis_result(study=study, phase=phase, fingerprint=fingerprint)
    if result is None or result.status != AnalysisResult.Status.DONE:
        raise Http404("No finished report for the current ratings; open the report page first.")
    return result


@login_required
@require_GET
def study_list(request):
    return render(request, "analysis/study_list.html", {"studies": studies_for_staff_pages(request.user)})


@login_required
@require_GET
def study_report(request, slug: str):
    study = get_study_for_viewer(request.user, slug)
    phase = _phase(request)
    # Never computes here: the cached report, or a pending one whose progress the page shows.
    result = services.request_study_report(study=study, phase=phase, enqueue=tasks.enqueue_study_report)
    page = pages.report_page(user=request.user, study=study, phase=phase, result=result)
    return render(request, "analysis/report.html", page.context())


@login_required
@require_POST
def study_report_recompute(request, slug: str):
    """A study admin asks for the report to be computed again (CSRF-checked POST)."""
    study = get_study_for_admin(request.user, slug)
    phase = request.POST.get("phase", "all")
    if phase not in services.PHASES:
        raise Http404("Unknown phase.")
    services.recompute_study_report(study=study, phase=phase, enqueue=tasks.enqueue_study_report)
    messages.success(request, "The report is being computed again; this page shows it when it is done.")
    return redirect(reverse("analysis:report", args=[study.slug]) + f"?phase={phase}")


@login_required
@require_POST
def study_report_resume(request, slug: str):
    """ "Compute it again" after a report failed (its worker died): any viewer may ask."""
    study = get_study_for_viewer(request.user, slug)
    phase = request.POST.get("phase", "all")
    if phase not in services.PHASES:
        raise Http404("Unknown phase.")
    services.resume_study_report(study=study, phase=phase, enqueue=tasks.enqueue_study_report)
    return redirect(reverse("analysis:report", args=[study.slug]) + f"?phase={phase}")


@login_required
@require_GET
def study_report_progress(request, slug: str):
    """What static/js/report.js polls while the report is computed: status and percent.
    Answers at once, as the page does (and queues the report again where the page would)."""
    study = get_study_for_viewer(request.user, slug)
    result = services.request_study_report(study=study, phase=_phase(request), enqueue=tasks.enqueue_study_report)
    response = JsonResponse({"status": result.status, "progress": result.progress})
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_GET
def study_report_plot(request, slug: str, kind: str, subject: str, fmt: str):
    if fmt not in FORMATS:
        raise Http404("Unknown image format.")
    study = get_study_for_viewer(request.user, slug)
    result = _done_result(study, _phase(request))
    # Drawn by the worker with the report (analysis.services.draw_report_plots): only served here.
    plot = selectors.report_plot(result=result, kind=kind, subject=subject, fmt=fmt)
    if plot is None:
        raise Http404("No such plot.")
    response = HttpResponse(bytes(plot.image), content_type=CONTENT_TYPES[fmt])
    # An SVG opened directly must not run anything even if it somehow held markup.
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


@login_required
@require_GET
def study_report_download(request, slug: str, name: str):
    if name not in FILE_NAMES:
        raise Http404("No such file.")
    study = get_study_for_viewer(request.user, slug)
    phase = _phase(request)
    result = _done_result(study, phase)
    content_type = "application/json" if name.endswith(".json") else "text/csv"
    response = HttpResponse(report_files(result.result)[name], content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{phase}-{name}"'
    return response
