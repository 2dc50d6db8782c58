"""The onboarding gate in front of a rater's items (registered with annotate.gates in
RecruitConfig.ready): a rater who has not finished the study's onboarding (consent,
instructions, questionnaire) may not read or write its items through the API, whether the
request comes with a session or a token. The rating page itself redirects to the step
(recruit.middleware); this covers what the page does not: direct API calls.

No query for a study that asks nothing: whether it has an onboarding or a consent text is
read in the assignment's own query (the gate's condition)."""

from __future__ import annotations

from django.db.models import BooleanField, ExpressionWrapper
from django.urls import reverse
from django.utils.translation import gettext

from annotate.gates import ItemGate
from core.exceptions import ApplicationError
from recruit import selectors


class OnboardingRequired(ApplicationError):
    code = "onboarding_required"
    http_status = 403


def study_asks_onboarding(rater):
    return ExpressionWrapper(selectors.study_asks("study_id"), output_field=BooleanField())


def refuse_before_onboarding(assignment, rater) -> None:
    study = assignment.study
    if selectors.onboarding_step(study=study, rater=rater) is None:
        return
    step = reverse("recruit:next", kwargs={"slug": study.slug})
    raise OnboardingRequired(
        gettext("Finish the onboarding of study %(study)s first (consent, instructions, questionnaire): %(url)s")
        % {"study": repr(study.slug), "url": step},
        extra={"next": step},
    )


ONBOARDING_GATE = ItemGate(name="gate_onboarding", condition=study_asks_onboarding, check=refuse_before_onboarding)
