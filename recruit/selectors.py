"""Reads of the recruit app: the onboarding's questionnaire as rubric questions, the
participant behind an account, a link's figures. Where a rater stands in a study's
onboarding is annotate's (annotate.selectors.onboarding): its items are refused before."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q

from annotate.models import (
    Assignment,
    ConsentDecision,
    Onboarding,
    OnboardingRecord,
    QualificationAttempt,
    RaterExclusion,
    Study,
)
from annotate.rubrics import RubricDefinition
from annotate.selectors.monitor import batch_monitor
from annotate.selectors.queue import visible_to_rater
from recruit.models import (
    BonusPayment,
    LinkChange,
    PanelCall,
    Participant,
    RecruitmentLink,
)


def questionnaire_definition(onboarding: Onboarding | None) -> RubricDefinition | None:
    """The background questionnaire as rubric questions (annotate/rubrics/), or None."""
    if onboarding is None or not onboarding.questionnaire:
        return None
    return RubricDefinition.from_dict(
        {"key": "questionnaire", "title": "Background questions", "questions": onboarding.questionnaire}
    )


def participant_of(user) -> Participant | None:
    """The participant behind an account, or None for an ordinary account."""
    if not getattr(user, "is_authenticated", False):
        return None
    try:
        return Participant.objects.select_related("link__batch", "study").get(user=user)
    except Participant.DoesNotExist:
        return None


def is_links_participant(user, *, link, external_id: str) -> bool:
    """Whether `user` is the participant that `link` made for the panel id `external_id`
    (following the link again continues them; anyone else signed in is asked first)."""
    return bool(
        getattr(user, "is_authenticated", False)
        and Participant.objects.filter(user=user, link=link, external_id=external_id).exists()
    )


def next_open_assignment(*, study: Study, rater) -> Assignment | None:
    """The first open item the rater may see now: behind a qualification gate, only the
    qualification items until they pass."""
    return (
        Assignment.objects.filter(
            study=study, rater=rater, state__in=(Assignment.State.PENDING, Assignment.State.IN_PROGRESS)
        )
        .filter(visible_to_rater(rater))
        .order_by("position", "pk")
        .first()
    )


@dataclass(frozen=True)
class LinkRow:
    link: RecruitmentLink
    participants: int
    completed: int
    declined: int
    screened_out: int
    left: int
    timed_out: int


def links_of(*, study: Study) -> list[LinkRow]:
    """The study's links with their participant counts (one query)."""
    links = (
        RecruitmentLink.objects.filter(study=study)
        .select_related("batch")
        .prefetch_related(Prefetch("changes", queryset=LinkChange.objects.select_related("changed_by")))
        .annotate(
            n=Count("participants"),
            n_completed=Count("participants", filter=Q(participants__outcome=Participant.Outcome.COMPLETED)),
            n_declined=Count("participants", filter=Q(participants__outcome=Participant.Outcome.DECLINED)),
            n_screened=Count("participants", filter=Q(participants__outcome=Participant.Outcome.SCREENED_OUT)),
            n_left=Count("participants", filter=Q(participants__outcome=Participant.Outcome.LEFT)),
            n_timed_out=Count("participants", filter=Q(participants__outcome=Participant.Outcome.TIMED_OUT)),
        )
        .order_by("created_at")
    )
    return [LinkRow(lk, lk.n, lk.n_completed, lk.n_declined, lk.n_screened, lk.n_left, lk.n_timed_out) for lk in links]


def onboarding_rows(*, study: Study) -> list[dict]:
    """Per rater of the study who has an onboarding trace: user id, consent decisions
    (version, accepted, time), instructions times, questionnaire answers, participant
    panel and outcome (never the panel's identifiers). For the dataset export."""
    rows: dict[int, dict] = {}

    def row(uid: int) -> dict:
        return rows.setdefault(
            uid,
            {
                "user_id": uid,
                "consent": [],
                "instructions_opened_at": None,
                "instructions_acknowledged_at": None,
                "questionnaire": None,
                "answered_at": None,
                "panel": "",
                "outcome": "",
            },
        )

    for d in ConsentDecision.objects.filter(study=study).select_related("version").order_by("created_at", "pk"):
        row(d.rater_id)["consent"].append({"version": d.version.number, "accepted": d.accepted, "at": d.created_at})
    for r in OnboardingRecord.objects.filter(study=study):
        target = row(r.rater_id)
        target["instructions_opened_at"] = r.instructions_opened_at
        target["instructions_acknowledged_at"] = r.instructions_acknowledged_at
        target["questionnaire"] = r.answers
        target["answered_at"] = r.answered_at
    for p in Participant.objects.filter(study=study).values("user_id", "panel", "outcome"):
        target = row(p["user_id"])
        target["panel"], target["outcome"] = p["panel"], p["outcome"]
    return list(rows.values())


# A participant's straight-lining share (the monitor's figure: the highest share of their
# answers to one scale question equal to their most frequent answer) at or above this,
# over at least STRAIGHT_MIN_ANSWERS answers, is flagged on the participants page.
STRAIGHT_FLAG = 0.9
STRAIGHT_MIN_ANSWERS = 3


@dataclass(frozen=True)
class ParticipantRow:
    """One participant on the study admins' participants page (never exported)."""

    participant: Participant
    items_done: int
    items_assigned: int
    qualification: str  # "3/4 (75 %), passed" of the last attempt, or ""
    qualification_failed: bool
    gold_accuracy: float | None  # the monitor's: attention checks answered in the link's batch
    too_fast: int  # the monitor's rule: items under the fraction of the batch's median time
    straight_share: float | None
    straight_flag: bool
    excluded: bool
    bonuses: tuple


@dataclass(frozen=True)
class ParticipantsPage:
    rows: tuple[ParticipantRow, ...]
    calls: tuple
    search: str


def participants_page(*, study: Study, panel_id: str = "", calls: int = 30) -> ParticipantsPage:
    """Every participant of the study (or the one with this panel id), with their outcome,
    times, items done, qualification and gold figures, the monitor's too-fast and
    straight-lining figures for their link's batch, their bonuses, and the study's last
    calls to the panel. A fixed number of queries per link, whatever the participants."""
    participants = list(
        Participant.objects.filter(study=study, **({"external_id": panel_id} if panel_id else {}))
        .select_related("user", "link__batch")
        .order_by("-created_at", "-pk")
    )
    users = [p.user_id for p in participants]
    batches = {p.link.batch_id: p.link.batch for p in participants}
    counts = {
        (row["rater_id"], row["batch_id"]): row
        for row in Assignment.objects.filter(batch_id__in=batches, rater_id__in=users)
        .values("rater_id", "batch_id")
        .annotate(
            done=Count("pk", filter=Q(state=Assignment.State.SUBMITTED)),
            live=Count("pk", filter=~Q(state=Assignment.State.WITHDRAWN)),
        )
    }
    figures = {}
    for batch in batches.values():
        for row in batch_monitor(batch).rows:
            figures[(row.user.pk, batch.pk)] = row.figures
    last_attempt = {}
    for attempt in QualificationAttempt.objects.filter(study=study, rater_id__in=users).order_by("number"):
        last_attempt[attempt.rater_id] = attempt
    excluded = set(
        RaterExclusion.objects.filter(batch_id__in=batches, rater_id__in=users).values_list("rater_id", "batch_id")
    )
    bonuses: dict[int, list] = {}
    for bonus in BonusPayment.objects.filter(participant__in=participants).order_by("created_at"):
        bonuses.setdefault(bonus.participant_id, []).append(bonus)
    rows = []
    for p in participants:
        key = (p.user_id, p.link.batch_id)
        f = figures.get(key)
        attempt = last_attempt.get(p.user_id)
        share = f.straight_share if f is not None else None
        rows.append(
            ParticipantRow(
                participant=p,
                items_done=counts.get(key, {}).get("done", 0),
                items_assigned=counts.get(key, {}).get("live", 0),
                qualification=(
                    f"{attempt.matched}/{attempt.compared} ({round(100 * attempt.score)} %), "
                    f"{'passed' if attempt.passed else 'failed'} (attempt {attempt.number})"
                    if attempt
                    else ""
                ),
                qualification_failed=attempt is not None and not attempt.passed,
                gold_accuracy=f.gold_accuracy if f is not None else None,
                too_fast=f.too_fast if f is not None else 0,
                straight_share=share,
                straight_flag=share is not None and share >= STRAIGHT_FLAG and (f.items >= STRAIGHT_MIN_ANSWERS),
                excluded=key in excluded,
                bonuses=tuple(bonuses.get(p.pk, ())),
            )
        )
    recent = PanelCall.objects.filter(study=study).select_related("participant__user", "made_by")
    recent = tuple(recent.order_by("-created_at", "-pk")[:calls])
    return ParticipantsPage(rows=tuple(rows), calls=recent, search=panel_id)
