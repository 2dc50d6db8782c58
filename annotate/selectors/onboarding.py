"""Where a rater stands in a study's onboarding (consent, instructions, questionnaire;
docs/recruitment.md), and the one check in front of a rater's items.

The rule is written once, as conditions of a query over the study's id (`pending_steps`):
`onboarding_step` reads them for one study (the step pages of recruit), and
`annotate.selectors.queue.get_assignment_for_rater` reads them in the assignment's own
query and raises OnboardingRequired, so every item page and every item API call meets the
same check without a query of its own. The onboarding applies to every rater of the study,
members and participants alike."""

from __future__ import annotations

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, Subquery
from django.urls import reverse
from django.utils.translation import gettext

from annotate.models import ConsentDecision, ConsentVersion, Onboarding, OnboardingRecord, Study
from core.exceptions import ApplicationError

CONSENT, DECLINED, INSTRUCTIONS, QUESTIONNAIRE = "consent", "declined", "instructions", "questionnaire"
# In the order a rater takes them: the first pending one is the next step.
STEPS = (CONSENT, DECLINED, INSTRUCTIONS, QUESTIONNAIRE)


class OnboardingRequired(ApplicationError):
    """The rater has not finished the study's onboarding: the API answers 403 in the one
    error shape with the step page's address in `next`; an item page redirects there."""

    code = "onboarding_required"
    http_status = 403

    def __init__(self, study: Study):
        self.study = study
        self.next_url = reverse("recruit:next", kwargs={"slug": study.slug})
        super().__init__(
            gettext("Finish the onboarding of study %(study)s first (consent, instructions, questionnaire): %(url)s")
            % {"study": repr(study.slug), "url": self.next_url},
            extra={"next": self.next_url},
        )


def current_consent(*, study: Study, include_withdrawn: bool = False) -> ConsentVersion | None:
    """The study's newest consent version, or None when it asks for none (no version, or
    the newest is empty: the admin stopped asking)."""
    version = ConsentVersion.objects.filter(study=study).order_by("-number").first()
    if version is not None and not version.text and not include_withdrawn:
        return None
    return version


def pending_steps(rater, study_ref: str) -> dict[str, Exists]:
    """One condition per step (STEPS), over the outer query's field `study_ref` holding the
    study's id: true where the rater still has that step to take. "consent": the study's
    current consent (its newest version, when not empty) has no decision of the rater;
    "declined": their latest decision on it declined; "instructions" and "questionnaire":
    the study asks them and the rater has not acknowledged or answered them."""
    newer = ConsentVersion.objects.filter(study=OuterRef("study"), number__gt=OuterRef("number"))
    latest = ConsentDecision.objects.filter(version=OuterRef("pk"), rater=rater).order_by("-pk").values("accepted")
    asked = (
        ConsentVersion.objects.filter(study=OuterRef(study_ref))
        .exclude(text="")
        .filter(~Exists(newer))
        .annotate(latest_accepted=Subquery(latest[:1]))
    )
    records = OnboardingRecord.objects.filter(study=OuterRef("study"), rater=rater)
    onboarding = Onboarding.objects.filter(study=OuterRef(study_ref))
    return {
        CONSENT: Exists(asked.filter(latest_accepted__isnull=True)),
        DECLINED: Exists(asked.filter(latest_accepted=False)),
        INSTRUCTIONS: Exists(
            onboarding.exclude(instructions="").filter(
                ~Exists(records.filter(instructions_acknowledged_at__isnull=False))
            )
        ),
        QUESTIONNAIRE: Exists(
            onboarding.exclude(questionnaire=[]).filter(~Exists(records.filter(answered_at__isnull=False)))
        ),
    }


def needs_onboarding(rater, study_ref: str) -> ExpressionWrapper:
    """Whether any step is pending (pending_steps), as one boolean of the outer query."""
    steps = pending_steps(rater, study_ref)
    return ExpressionWrapper(Q(*steps.values(), _connector=Q.OR), output_field=BooleanField())


def onboarding_step(*, study: Study, rater) -> str | None:
    """The step of the study's onboarding the rater must take next: "consent",
    "declined" (they declined the current version: no items), "instructions",
    "questionnaire", or None when they are through (or the study asks nothing). One query."""
    conditions = {f"pending_{step}": condition for step, condition in pending_steps(rater, "pk").items()}
    pending = Study.objects.filter(pk=study.pk).values(**conditions).get()
    return next((step for step in STEPS if pending[f"pending_{step}"]), None)
