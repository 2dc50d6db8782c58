"""The Plan page (sample size, freezing the plan) and a frozen protocol's page."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotate.selectors.access import get_study_for_admin, get_study_for_viewer
from planning import selectors
from planning.forms import FreezeForm
from planning.pages import plan_page, protocol_page
from planning.services import InvalidPlan, freeze_protocol


@login_required
@require_http_methods(["GET", "HEAD"])
def plan(request, slug: str):
    study = get_study_for_admin(request.user, slug)
    return render(request, "planning/plan.html", {"page": plan_page(request.user, study, request.GET)})


@login_required
@require_POST
def freeze(request, slug: str):
    study = get_study_for_admin(request.user, slug)
    form = FreezeForm(request.POST, questions=selectors.scale_questions(study))
    if form.is_valid():
        plan_values = form.plan()
        if form.cleaned_data["power"]:
            try:
                plan_values["power"] = json.loads(form.cleaned_data["power"])
            except ValueError:
                form.add_error("power", "The power curve's record is not JSON.")
        if form.is_valid():
            try:
                protocol = freeze_protocol(
                    study=study, by=request.user, plan=plan_values, note=form.cleaned_data["note"]
                )
            except InvalidPlan as error:
                form.add_error(
                    error.extra.get("field") if error.extra.get("field") in form.fields else None, error.message
                )
            else:
                return redirect("planning:protocol", slug=study.slug, version=protocol.version)
    page = plan_page(request.user, study, request.GET, freeze_form=form)
    return render(request, "planning/plan.html", {"page": page}, status=400)


@login_required
@require_http_methods(["GET", "HEAD"])
def protocol(request, slug: str, version: int):
    study = get_study_for_viewer(request.user, slug)
    page = protocol_page(study, version)
    if request.GET.get("format") == "json":
        response = HttpResponse(page.text, content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-protocol-v{version}.json"'
        return response
    return render(request, "planning/protocol.html", {"page": page})
