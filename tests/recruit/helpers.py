"""Shared set-up of the recruit tests: a study with summaries, an onboarding and a link."""

from recruit.services import links, onboarding
from tests.factories import SummaryFactory

CONSENT = "You are asked to rate summaries. Your answers are stored with a pseudonym."
INSTRUCTIONS = "Read the source first, then the summary. Rate faithfulness only."
COMPLETE, SCREENOUT = "C1A2B3", "SCREEN9"


def make_link(study, *, items=3, k=2, participants=30, summaries=6, minutes=60, lease=30, name="wave 1"):
    for _ in range(summaries):
        SummaryFactory(source__study=study)
    return links.create_link(
        study=study,
        name=name,
        raters_per_item=k,
        items_per_participant=items,
        max_participants=participants,
        time_budget_minutes=minutes,
        lease_minutes=lease,
        completion_url="http://127.0.0.1:9/complete",
        completion_code=COMPLETE,
        screenout_code=SCREENOUT,
    )


def set_up_onboarding(study, *, questionnaire=True):
    onboarding.save_onboarding(study=study, consent_text=CONSENT, instructions=INSTRUCTIONS)
    if questionnaire:
        onboarding.add_questionnaire_questions(study=study, questions=list(onboarding.SUGGESTED_QUESTIONS))


def prolific_query(pid="5f8a1b2c3d4e5f6a7b8c9d0e", study_id="STUDY1", session="SESSION1") -> str:
    return f"?PROLIFIC_PID={pid}&STUDY_ID={study_id}&SESSION_ID={session}"


def arrival_url(link, **ids) -> str:
    return f"/r/{links.link_token(link)}/{prolific_query(**ids)}"
