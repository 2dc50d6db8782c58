"""The question study page: questions, what was retrieved for each, scores, answers."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotate.selectors.access import get_study_for_viewer
from literature.selectors import questions_overview


@login_required
@require_GET
def questions(request, slug):
    study = get_study_for_viewer(request.user, slug)
    overview, figures = questions_overview(study)
    return render(request, "literature/questions.html", {"study": study, "overview": overview, "figures": figures})
