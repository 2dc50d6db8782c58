"""Where a rater goes next in a study: onboarding first, then the qualification gate, then
the items, and for a participant the end (docs/recruitment.md).

`qualification_outcome` is the one place the qualification gate (annotate/services/qualification.py)
plugs in: a "failed" state shows a participant the gate's message with the choice to leave
with the screen-out code (or to come back after a retry a study admin allows), and shows a
member the gate's message in their queue; while "pending", only the
qualification items are open to them (annotate.selectors.queue.visible_to_rater)."""

from __future__ import annotations

from django.shortcuts import redirect
from django.urls import reverse

from annotate.selectors import onboarding
from annotate.services.qualification import qualification_state
from recruit import selectors
from recruit.models import Participant
from recruit.services import participation

NOT_REQUIRED, PENDING, PASSED, FAILED = "not_required", "pending", "passed", "failed"


def qualification_outcome(*, study, rater) -> str:
    """ "not_required" | "pending" | "passed" | "failed": the study's qualification gate
    (annotate/services/qualification.py, docs/qualification.md)."""
    return qualification_state(study=study, rater=rater)


STEP_URLS = {
    onboarding.CONSENT: "recruit:consent",
    onboarding.DECLINED: "recruit:consent",
    onboarding.INSTRUCTIONS: "recruit:instructions",
    onboarding.QUESTIONNAIRE: "recruit:questionnaire",
}


def next_page(request, study, participant: Participant | None):
    """The redirect to where this rater goes next in the study."""
    user = request.user
    if participant is not None and participant.outcome:
        return redirect("recruit:done")
    if participant is not None and participation.time_is_up(participant):
        participation.finish_participation(participant=participant, outcome=Participant.Outcome.TIMED_OUT)
        return redirect("recruit:done")
    step = onboarding.onboarding_step(study=study, rater=user)
    if step is not None:
        return redirect(STEP_URLS[step], slug=study.slug)
    if qualification_outcome(study=study, rater=user) == FAILED:
        if participant is not None:
            # The gate's message and the choice to leave with the screen-out code, or to
            # wait for a retry a study admin may allow (recruit.views.not_passed).
            return redirect("recruit:not-passed", slug=study.slug)
        return redirect("annotate:queue")
    if participant is not None:
        following = selectors.next_open_assignment(study=study, rater=user)
        if following is None and participant.released_at is not None:
            # Away longer than the lease, their open items went to others: back now, they
            # get work again if the pool has room (as following the link again would).
            participation.arrive(link=participant.link, panel=participant.panel, external_id=participant.external_id)
            following = selectors.next_open_assignment(study=study, rater=user)
        if following is None:
            # Done; or no item was left for them (every item had its k raters): the
            # screen-out code, since they did no work to be paid for as completed (their
            # qualification answers are screening, not study work).
            submitted = participation.has_done_study_work(participant)
            outcome = Participant.Outcome.COMPLETED if submitted else Participant.Outcome.SCREENED_OUT
            participation.finish_participation(participant=participant, outcome=outcome)
            return redirect("recruit:done")
        return redirect("annotate:rate", assignment_uuid=following.uuid)
    wanted = request.GET.get("next", "")
    if wanted.startswith("/rate/") and "//" not in wanted:
        return redirect(wanted)
    following = selectors.next_open_assignment(study=study, rater=user)
    if following is not None:
        return redirect("annotate:rate", assignment_uuid=following.uuid)
    return redirect(reverse("annotate:queue"))
