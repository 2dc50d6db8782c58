"""Writes of the recruit app: onboarding set-up and each rater's way through it, crowd
links, participants arriving (with their work assigned) and leaving (docs/recruitment.md).

Every function is keyword-only and atomic where it writes, as annotate.services'."""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from annotate import designs
from annotate.models import Assignment, Batch, ExpectedAnswer, Study, StudyMembership
from annotate.rubrics import RubricDefinition, RubricDefinitionError
from annotate.selectors.contents import filter_summaries
from annotate.services.assignments import withdraw_assignment
from annotate.services.members import add_study_member
from annotate.services.qualification import enrol_in_qualification
from core.exceptions import ApplicationError, InvalidStateError
from core.text_validation import check_text
from recruit.models import (
    ArrivalCount,
    ConsentDecision,
    ConsentVersion,
    LinkChange,
    Onboarding,
    OnboardingRecord,
    Participant,
    RecruitmentLink,
)
from recruit.selectors import current_consent, questionnaire_definition

LINK_SALT = "recruit.link"
MAX_CONSENT_CHARS = 50_000
MAX_INSTRUCTIONS_CHARS = 50_000
MAX_QUESTIONS = 30
# Panel identifiers: Prolific's are 24 hex digits; other panels use similar tokens. Anything
# else (spaces, markup, very long values) is refused with a 400 naming the parameter.
PANEL_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")
OPEN_STATES = (Assignment.State.PENDING, Assignment.State.IN_PROGRESS)


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"{field}: {message}", extra={"fields": {field: message}})


# --- the study admin's set-up -----------------------------------------------------------------


@transaction.atomic
def save_onboarding(*, study: Study, consent_text: str, instructions: str, by=None) -> Onboarding:
    """Store the onboarding texts. A consent text that differs from the current version
    becomes the next version (raters are asked again); an empty one asks for no consent
    from then on (the versions and decisions already made are kept)."""
    for field, text, limit in (
        ("consent_text", consent_text, MAX_CONSENT_CHARS),
        ("instructions", instructions, MAX_INSTRUCTIONS_CHARS),
    ):
        check_text(text, field)
        if len(text) > limit:
            raise _invalid(field, f"at most {limit} characters")
    onboarding, _ = Onboarding.objects.select_for_update().get_or_create(study=study)
    onboarding.instructions = instructions.strip()
    onboarding.save()
    text = consent_text.strip()
    current = current_consent(study=study, include_withdrawn=True)
    if text and (current is None or current.text != text):
        number = (ConsentVersion.objects.filter(study=study).aggregate(m=Max("number"))["m"] or 0) + 1
        ConsentVersion.objects.create(study=study, number=number, text=text, created_by=by)
    elif not text and current is not None and current.text:
        # "No consent asked" is a version too (empty text), so the history shows when it stopped.
        number = (ConsentVersion.objects.filter(study=study).aggregate(m=Max("number"))["m"] or 0) + 1
        ConsentVersion.objects.create(study=study, number=number, text="", created_by=by)
    return onboarding


SUGGESTED_QUESTIONS = (
    {
        "key": "expertise",
        "kind": "choice",
        "prompt": "Which best describes your background in this field?",
        "required": True,
        "options": [
            {"value": "lay", "label": "No training in the field"},
            {"value": "student", "label": "Student of the field"},
            {"value": "practitioner", "label": "Practitioner or researcher"},
        ],
    },
    {
        "key": "years_of_practice",
        "kind": "scale",
        "prompt": "Years of practice in the field",
        "required": True,
        "options": [
            {"value": 0, "label": "none"},
            {"value": 1, "label": "under 2"},
            {"value": 2, "label": "2 to 5"},
            {"value": 3, "label": "5 to 10"},
            {"value": 4, "label": "over 10"},
        ],
    },
    {"key": "language", "kind": "text", "prompt": "Your first language", "required": False},
)

QUESTION_KINDS = ("choice", "checkboxes", "scale", "text")


def question_from_form(
    *, prompt: str, kind: str, options_text: str = "", required: bool = False, key: str = ""
) -> dict[str, Any]:
    """A rubric question mapping from the onboarding page's fields: the options one per
    line (a scale's are numbered 1, 2, ... in the order given; a choice's values are made
    from their labels)."""
    check_text(prompt, "prompt")
    prompt = prompt.strip()
    if not prompt:
        raise _invalid("prompt", "a question needs its prompt")
    if len(prompt) > 500:
        raise _invalid("prompt", "at most 500 characters")
    if kind not in QUESTION_KINDS:
        raise _invalid("kind", f"must be one of {', '.join(QUESTION_KINDS)}")
    key = key or re.sub(r"[^a-z0-9]+", "_", prompt.lower()).strip("_")[:40] or "question"
    if not key[0].isalpha():
        key = f"q_{key}"
    question: dict[str, Any] = {"key": key, "kind": kind, "prompt": prompt, "required": bool(required)}
    if kind != "text":
        check_text(options_text, "options")
        labels = [line.strip() for line in options_text.splitlines() if line.strip()]
        if len(labels) < 2:
            raise _invalid("options", "give at least two options, one per line")
        if len(labels) > 20 or any(len(label) > 200 for label in labels):
            raise _invalid("options", "at most 20 options of at most 200 characters each")
        if kind == "scale":
            question["options"] = [{"value": i, "label": label} for i, label in enumerate(labels, start=1)]
        else:
            values = [
                re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or f"option_{i}"
                for i, label in enumerate(labels, 1)
            ]
            if len(set(values)) != len(values):
                values = [f"option_{i}" for i in range(1, len(labels) + 1)]
            question["options"] = [{"value": v, "label": label} for v, label in zip(values, labels, strict=True)]
    return question


@transaction.atomic
def add_questionnaire_questions(*, study: Study, questions: list[dict[str, Any]]) -> Onboarding:
    """Append questions to the background questionnaire, checked as rubric questions
    (annotate/rubrics.py). A key already asked gets a numbered suffix."""
    onboarding, _ = Onboarding.objects.select_for_update().get_or_create(study=study)
    current = list(onboarding.questionnaire or [])
    keys = {q["key"] for q in current}
    for question in questions:
        question = dict(question)
        base, n = question["key"], 2
        while question["key"] in keys:
            question["key"], n = f"{base}_{n}", n + 1
        keys.add(question["key"])
        current.append(question)
    if len(current) > MAX_QUESTIONS:
        raise _invalid("prompt", f"a questionnaire has at most {MAX_QUESTIONS} questions")
    try:
        RubricDefinition.from_dict({"key": "questionnaire", "title": "Questionnaire", "questions": current})
    except RubricDefinitionError as exc:
        raise _invalid("prompt", exc.message) from None
    onboarding.questionnaire = current
    onboarding.save()
    return onboarding


@transaction.atomic
def remove_questionnaire_question(*, study: Study, key: str) -> Onboarding:
    """Take a question off the questionnaire; answers already given keep it."""
    onboarding, _ = Onboarding.objects.select_for_update().get_or_create(study=study)
    remaining = [q for q in onboarding.questionnaire or [] if q.get("key") != key]
    if len(remaining) == len(onboarding.questionnaire or []):
        raise _invalid("key", "no such question")
    onboarding.questionnaire = remaining
    onboarding.save()
    return onboarding


# --- a rater's way through onboarding ---------------------------------------------------------


def _record(study: Study, rater) -> OnboardingRecord:
    record, _ = OnboardingRecord.objects.select_for_update().get_or_create(study=study, rater=rater)
    return record


@transaction.atomic
def record_consent(*, study: Study, rater, version_uuid: Any, accepted: bool) -> ConsentDecision:
    """Store the rater's decision on the consent version they read (a stale version, one
    edited since the page was shown, is refused: they must read the new one). Declining
    ends their part: their open items are taken back (answers kept), and a participant
    finishes with the screen-out code."""
    version = current_consent(study=study)
    if version is None:
        raise InvalidStateError("This study asks for no consent.")
    if str(version.uuid) != str(version_uuid):
        raise _invalid("version", "the consent text has changed since you opened it: please read it again")
    decision = ConsentDecision.objects.create(study=study, rater=rater, version=version, accepted=bool(accepted))
    if not accepted:
        participant = Participant.objects.filter(user=rater, study=study).first()
        if participant is not None:
            finish_participation(participant=participant, outcome=Participant.Outcome.DECLINED)
        else:
            _withdraw_open(Assignment.objects.filter(study=study, rater=rater))
    return decision


@transaction.atomic
def open_instructions(*, study: Study, rater) -> OnboardingRecord:
    record = _record(study, rater)
    if record.instructions_opened_at is None:
        record.instructions_opened_at = timezone.now()
        record.save(update_fields=["instructions_opened_at", "updated_at"])
    return record


@transaction.atomic
def acknowledge_instructions(*, study: Study, rater) -> OnboardingRecord:
    record = _record(study, rater)
    if record.instructions_opened_at is None:
        raise _invalid("acknowledge", "open the instructions before acknowledging them")
    if record.instructions_acknowledged_at is None:
        record.instructions_acknowledged_at = timezone.now()
        record.save(update_fields=["instructions_acknowledged_at", "updated_at"])
    return record


@transaction.atomic
def submit_questionnaire(*, study: Study, rater, answers: dict[str, Any]) -> OnboardingRecord:
    """Check the answers with the rubric's own validation (annotate/rubrics.py) and store
    them; answered again, the newest answers replace the stored ones."""
    onboarding = Onboarding.objects.filter(study=study).first()
    definition = questionnaire_definition(onboarding)
    if definition is None:
        raise InvalidStateError("This study asks no background questions.")
    clean = definition.validate(answers, {}, final=True)
    record = _record(study, rater)
    record.answers = {k: v for k, v in clean.values.items() if v not in (None, "", [])}
    record.answered_at = timezone.now()
    record.save(update_fields=["answers", "answered_at", "updated_at"])
    return record


# --- recruitment links ----------------------------------------------------------------------


def link_token(link: RecruitmentLink) -> str:
    """The link's signed token (Django's signing, with the secret key): it names the link
    by its random uuid, and any change to it fails the signature. The same token every
    time (no timestamp): the URL given to the panel stays the one the page shows."""
    return signing.Signer(salt=LINK_SALT).sign(str(link.uuid))


def link_from_token(token: str) -> RecruitmentLink | None:
    """The link a token names, else None (tampered or unknown). A closed link is returned
    too: arrive() refuses new participants on it with the screen-out code. Tokens signed
    with a timestamp (how links were signed before) are still read."""
    try:
        value = signing.Signer(salt=LINK_SALT).unsign(token)
    except signing.BadSignature:
        return None
    if ":" in value:
        # A timestamped token's signature covers "<payload>:<timestamp>": read it as such.
        try:
            value = signing.loads(token, salt=LINK_SALT)
        except signing.BadSignature:
            return None
    return (
        RecruitmentLink.objects.select_related("study", "batch").filter(uuid=value).first()
        if isinstance(value, str) and len(value) == 36
        else None
    )


@transaction.atomic
def create_link(
    *,
    study: Study,
    name: str,
    raters_per_item: int,
    items_per_participant: int,
    max_participants: int,
    time_budget_minutes: int,
    completion_url: str,
    completion_code: str,
    screenout_code: str = "",
    lease_minutes: int = 30,
    left_code: str = "",
    full_message: str = "",
    attention_every: int | None = None,
    by=None,
) -> RecruitmentLink:
    """A recruitment link with its own batch over the study's summaries (gold items,
    attention checks and training items left out): `raters_per_item` participants rate
    each summary, `items_per_participant` each."""
    check_text(name, "name")
    if not name.strip():
        raise _invalid("name", "required")
    terms = _check_terms(
        completion_url=completion_url,
        completion_code=completion_code,
        screenout_code=screenout_code,
        left_code=left_code,
        full_message=full_message,
        items_per_participant=items_per_participant,
        max_participants=max_participants,
        time_budget_minutes=time_budget_minutes,
        lease_minutes=lease_minutes,
    )
    if not isinstance(raters_per_item, int) or isinstance(raters_per_item, bool) or not 1 <= raters_per_item <= 50:
        raise _invalid("raters_per_item", "a whole number from 1 to 50")
    if attention_every is not None:
        if not isinstance(attention_every, int) or isinstance(attention_every, bool) or not 1 <= attention_every <= 500:
            raise _invalid("attention_every", "a whole number from 1 to 500")
        if not _attention_checks(study):
            raise _invalid(
                "attention_every", "the study has no attention checks: record expected answers with purpose attention"
            )
    special = ExpectedAnswer.objects.filter(study=study).values("summary")
    pool = list(filter_summaries(study=study).exclude(pk__in=special).values_list("pk", flat=True))
    if not pool:
        raise _invalid("name", "the study has no summaries to hand out")
    batch_name = f"crowd: {name.strip()}"
    if Batch.objects.filter(study=study, name=batch_name).exists():
        raise _invalid("name", f"this study already has a batch named {batch_name!r}")
    batch = Batch.objects.create(
        study=study,
        name=batch_name,
        kind=Batch.Kind.MAIN,
        design={"design": "crowd", "k": raters_per_item, "pool": pool},
        seed=secrets.randbelow(2**31),
        raters_per_item=raters_per_item,
        attention_every=attention_every,
        created_by=by,
    )
    return RecruitmentLink.objects.create(study=study, batch=batch, name=name.strip(), created_by=by, **terms)


EDITABLE = (
    "max_participants",
    "items_per_participant",
    "time_budget_minutes",
    "lease_minutes",
    "completion_url",
    "completion_code",
    "screenout_code",
    "left_code",
    "full_message",
)
# The messages a participant the link turns away reads, marked for the catalogue: the
# participant pages show them in the page's language (docs/languages.md).
DEFAULT_FULL_MESSAGE = gettext_noop("This study has all the participants it needs. Thank you for your interest.")


def _check_terms(
    *,
    completion_url: str,
    completion_code: str,
    screenout_code: str,
    left_code: str,
    full_message: str,
    items_per_participant: int,
    max_participants: int,
    time_budget_minutes: int,
    lease_minutes: int,
) -> dict[str, Any]:
    """A link's limits, codes and messages, checked; the values to store."""
    for field, value in (
        ("completion_url", completion_url),
        ("completion_code", completion_code),
        ("screenout_code", screenout_code),
        ("left_code", left_code),
        ("full_message", full_message),
    ):
        check_text(value, field)
    codes = {
        "completion_code": completion_code.strip(),
        "screenout_code": screenout_code.strip(),
        "left_code": left_code.strip(),
    }
    if not codes["completion_code"]:
        raise _invalid("completion_code", "required")
    for field, code in codes.items():
        if len(code) > 64 or (code and not PANEL_ID.fullmatch(code)):
            raise _invalid(field, "1 to 64 letters, digits or _.:@-")
    if codes["screenout_code"] == codes["completion_code"]:
        raise _invalid("screenout_code", "must differ from the completion code")
    if codes["left_code"] == codes["completion_code"]:
        raise _invalid("left_code", "must differ from the completion code")
    if not re.fullmatch(r"https?://[^\s<>\"']{1,490}", completion_url.strip()):
        raise _invalid("completion_url", "an http(s) address")
    if len(full_message) > 500:
        raise _invalid("full_message", "at most 500 characters")
    for field, value, low, high in (
        ("items_per_participant", items_per_participant, 1, 500),
        ("max_participants", max_participants, 1, 100_000),
        ("time_budget_minutes", time_budget_minutes, 1, 24 * 60),
        ("lease_minutes", lease_minutes, 1, 24 * 60),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise _invalid(field, f"a whole number from {low} to {high}")
    return {
        **codes,
        "completion_url": completion_url.strip(),
        "full_message": full_message.strip() or DEFAULT_FULL_MESSAGE,
        "items_per_participant": items_per_participant,
        "max_participants": max_participants,
        "time_budget_minutes": time_budget_minutes,
        "lease_minutes": lease_minutes,
    }


@transaction.atomic
def update_link(*, link: RecruitmentLink, by=None, **values) -> LinkChange | None:
    """Change a link's limits, codes, completion URL or messages, running or not; the
    change is recorded (who, when, each field before and after). Participants already in
    keep their items; a new limit applies from the next arrival, a new time budget or
    lease from the next request. Returns the record, or None when nothing changed."""
    unknown = set(values) - set(EDITABLE)
    if unknown:
        raise _invalid(sorted(unknown)[0], "cannot be changed")
    link = RecruitmentLink.objects.select_for_update().get(pk=link.pk)
    current = {field: getattr(link, field) for field in EDITABLE}
    terms = _check_terms(**{**current, **values})
    changes = {f: [current[f], terms[f]] for f in EDITABLE if terms[f] != current[f]}
    if not changes:
        return None
    RecruitmentLink.objects.filter(pk=link.pk).update(**{f: terms[f] for f in changes}, updated_at=timezone.now())
    return LinkChange.objects.create(link=link, changed_by=by, changes=changes)


@transaction.atomic
def set_link_enabled(*, link: RecruitmentLink, enabled: bool) -> RecruitmentLink:
    RecruitmentLink.objects.filter(pk=link.pk).update(enabled=enabled, updated_at=timezone.now())
    link.refresh_from_db()
    return link


class ArrivalRefused(ApplicationError):
    """The link cannot take this participant (closed, full, no item left): decided before
    any step, so nobody consents or qualifies for work they cannot get. `link` is set when
    the participant should leave with the link's screen-out code (or its "full" message)."""

    code = "refused"
    http_status = 403

    def __init__(self, message: str, extra: dict[str, Any] | None = None, *, link: RecruitmentLink | None = None):
        super().__init__(message, extra)
        self.link = link


class TooManyArrivals(ArrivalRefused):
    code = "throttled"
    http_status = 429


def _free_items(link: RecruitmentLink) -> int:
    """Summaries of the link's pool with fewer than k live raters (a newcomer has none of
    them yet). The caller holds the batch's row lock."""
    batch = link.batch
    pool = set(batch.design.get("pool") or [])
    full = set(
        Assignment.objects.filter(batch=batch, summary_id__in=pool)
        .exclude(state=Assignment.State.WITHDRAWN)
        .values("summary_id")
        .annotate(n=Count("pk"))
        .filter(n__gte=batch.raters_per_item)
        .values_list("summary_id", flat=True)
    )
    return len(pool - full)


def _count_arrival(address: str) -> None:
    """Count one new account from `address`; refuse past the limit in the window."""
    if not address:
        return
    limit = settings.RECRUIT_ARRIVALS_PER_ADDRESS
    window = timedelta(minutes=settings.RECRUIT_ARRIVAL_WINDOW_MINUTES)
    now = timezone.now()
    row, _ = ArrivalCount.objects.select_for_update().get_or_create(address=address, defaults={"window_start": now})
    if row.window_start < now - window:
        row.window_start, row.count = now, 0
    if row.count >= limit:
        raise TooManyArrivals(gettext_noop("Too many new participants from your network: please try again later."))
    row.count += 1
    row.save()


# The parameters each panel passes: (participant id, study id, session id).
PANEL_FIELDS = {
    Participant.Panel.PROLIFIC: ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"),
    Participant.Panel.GENERIC: ("participant", "study", "session"),
}


def check_panel_ids(params) -> tuple[str, str, str, str]:
    """(panel, participant id, study id, session id) from the link's query string (or the
    arrival form's fields): Prolific's PROLIFIC_PID, STUDY_ID and SESSION_ID, or a generic
    `participant`."""
    if params.get("PROLIFIC_PID") is not None:
        panel = Participant.Panel.PROLIFIC
    elif params.get("participant") is not None:
        panel = Participant.Panel.GENERIC
    else:
        raise _invalid("PROLIFIC_PID", "the link needs the panel's participant id (PROLIFIC_PID or participant)")
    values = []
    for i, field in enumerate(PANEL_FIELDS[panel]):
        value = params.get(field, "")
        if (i == 0 or value) and not PANEL_ID.fullmatch(value):
            raise _invalid(field, "1 to 64 letters, digits or _.:@-")
        values.append(value)
    return panel, *values


def _withdraw_open(assignments) -> int:
    n = 0
    for assignment in assignments.filter(state__in=OPEN_STATES):
        withdraw_assignment(assignment=assignment)
        n += 1
    return n


def release_absent(*, link: RecruitmentLink, now=None) -> int:
    """Give back the open items of the link's participants who have been away longer
    than the lease (or past their time budget): withdrawn, their answers kept. Returns
    the number of participants released. Called inside arrive()'s lock."""
    now = now or timezone.now()
    gone = Participant.objects.filter(link=link, outcome="", released_at__isnull=True).filter(
        Q(last_seen_at__lt=now - timedelta(minutes=link.lease_minutes))
        | Q(created_at__lt=now - timedelta(minutes=link.time_budget_minutes))
    )
    released = 0
    for participant in gone:
        _withdraw_open(Assignment.objects.filter(batch=link.batch, rater=participant.user))
        Participant.objects.filter(pk=participant.pk).update(released_at=now)
        released += 1
    return released


def _attention_checks(study: Study) -> list[int]:
    return sorted(
        ExpectedAnswer.objects.filter(study=study, purpose=ExpectedAnswer.Purpose.ATTENTION).values_list(
            "summary_id", flat=True
        )
    )


def _tie_break(participant_id: int, summary_id: int, seed: int) -> bytes:
    return hashlib.sha256(f"{seed}:{participant_id}:{summary_id}".encode()).digest()


def assign_work(*, participant: Participant) -> list[Assignment]:
    """Hand the participant items of the link's pool, fewest live ratings first (ties in
    an order of the participant's own), never more than k live raters on an item, up to
    `items_per_participant` items in all (withdrawn ones not counted again).

    The caller holds the batch's row lock (arrive()), so concurrent arrivals count live
    ratings one after the other and k holds."""
    link = participant.link
    batch = link.batch
    pool = list(batch.design.get("pool") or [])
    mine = Assignment.objects.filter(batch=batch, rater=participant.user, summary_id__in=pool)
    kept = mine.exclude(state=Assignment.State.WITHDRAWN).count()
    wanted = link.items_per_participant - kept
    if wanted <= 0:
        return []
    live = dict(
        Assignment.objects.filter(batch=batch)
        .exclude(state=Assignment.State.WITHDRAWN)
        .values_list("summary_id")
        .annotate(n=Count("pk"))
        .values_list("summary_id", "n")
    )
    had = set(
        Assignment.objects.filter(study=participant.study, rater=participant.user).values_list("summary_id", flat=True)
    )
    open_items = [s for s in pool if live.get(s, 0) < batch.raters_per_item and s not in had]
    open_items.sort(key=lambda s: (live.get(s, 0), _tie_break(participant.pk, s, batch.seed)))
    chosen = open_items[:wanted]
    checks = [c for c in _attention_checks(participant.study) if c not in had] if batch.attention_every else []
    if chosen and checks:
        # About one check after every N items, at a place the participant cannot predict
        # (annotate.designs, as in a batch's queues); each check at most once.
        mixed = designs.insert_attention_checks(
            chosen, [("check", c) for c in checks], every=batch.attention_every, seed=f"{batch.seed}:{participant.pk}"
        )
        seen: set[int] = set()
        chosen = []
        for entry in mixed:
            summary_id = entry[1] if isinstance(entry, tuple) else entry
            if summary_id not in seen:
                seen.add(summary_id)
                chosen.append(summary_id)
    last = Assignment.objects.filter(study=participant.study, rater=participant.user).aggregate(m=Max("position"))["m"]
    start = 0 if last is None else last + 1
    return Assignment.objects.bulk_create(
        [
            Assignment(study=participant.study, batch=batch, summary_id=s, rater=participant.user, position=start + i)
            for i, s in enumerate(chosen)
        ]
    )


def arrive(
    *,
    link: RecruitmentLink,
    panel: str,
    external_id: str,
    panel_study_id: str = "",
    panel_session_id: str = "",
    address: str = "",
) -> tuple[Participant, bool]:
    """A participant arrives through the link: their account is made (first visit) or
    found (a return), and work is handed out. Returns (participant, created).

    The batch row is locked first (select_for_update; SQLite's writers queue on the
    database lock, settings' IMMEDIATE transactions), so arrivals on one link are counted
    one at a time: the participant limit and k per item hold under concurrency."""
    with transaction.atomic():
        Batch.objects.select_for_update().filter(pk=link.batch_id).update(updated_at=timezone.now())
        link = RecruitmentLink.objects.select_related("study", "batch").get(pk=link.pk)
        now = timezone.now()
        release_absent(link=link, now=now)
        participant = (
            Participant.objects.select_related("user", "link__batch", "study")
            .filter(link=link, external_id=external_id)
            .first()
        )
        created = participant is None
        if created:
            # Decided before any step (consent, instructions, qualification): someone who
            # cannot get an item leaves at once with the screen-out code.
            if not link.enabled:
                raise ArrivalRefused(gettext_noop("This study is closed to new participants."), link=link)
            if Participant.objects.filter(link=link).count() >= link.max_participants:
                raise ArrivalRefused(gettext_noop("This study has all the participants it needs."), link=link)
            if not _free_items(link):
                raise ArrivalRefused(gettext_noop("Every item of this study has all the raters it needs."), link=link)
            _count_arrival(address)
            user = get_user_model().objects.create_user(username=f"participant-{secrets.token_hex(8)}", password=None)
            add_study_member(study=link.study, user=user, role=StudyMembership.Role.RATER)
            try:
                with transaction.atomic():
                    participant = Participant.objects.create(
                        user=user,
                        link=link,
                        study=link.study,
                        panel=panel,
                        external_id=external_id,
                        panel_study_id=panel_study_id,
                        panel_session_id=panel_session_id,
                        address=address,
                        last_seen_at=now,
                    )
            except IntegrityError:
                raise ArrivalRefused(
                    gettext_noop("This participant arrived twice at once: please reload the page.")
                ) from None
        else:
            Participant.objects.filter(pk=participant.pk).update(last_seen_at=now, released_at=None)
            participant.refresh_from_db()
        if participant.outcome == "" and not time_is_up(participant, now=now):
            # Behind a qualification gate the study's qualification items come first; the
            # link's items stay hidden until the participant passes (visible_to_rater).
            enrol_in_qualification(study=link.study, rater=participant.user)
            assign_work(participant=participant)
        return participant, created


def time_is_up(participant: Participant, *, now=None) -> bool:
    now = now or timezone.now()
    return participant.created_at + timedelta(minutes=participant.link.time_budget_minutes) <= now


# How stale `last_seen_at` may get before a request writes it again: half the shortest
# lease (1 minute), so a participant who is here never loses their items, while their draft
# saves and API calls do not each add a write.
TOUCH_EVERY = timedelta(seconds=30)


def touch(*, participant: Participant) -> None:
    """The participant is here: the lease on their items starts again (written at most
    every TOUCH_EVERY)."""
    now = timezone.now()
    if now - participant.last_seen_at >= TOUCH_EVERY:
        Participant.objects.filter(pk=participant.pk).update(last_seen_at=now)


FINAL_OUTCOMES = tuple(o for o in Participant.Outcome.values if o)


@transaction.atomic
def finish_participation(*, participant: Participant, outcome: str) -> Participant:
    """End a participant's part: `completed`, `declined` (consent), `screened_out` (failed
    qualification, no item left), `left` (the participant's own "Leave") or `timed_out`
    (past the link's time budget). Their open items go back to the pool (answers kept). The
    first outcome stands: finishing again changes nothing and returns the participant as
    stored."""
    if outcome not in FINAL_OUTCOMES:
        raise _invalid("outcome", f"must be one of {', '.join(FINAL_OUTCOMES)}")
    updated = Participant.objects.filter(pk=participant.pk, outcome="").update(
        outcome=outcome, finished_at=timezone.now(), updated_at=timezone.now()
    )
    if updated:
        _withdraw_open(Assignment.objects.filter(study=participant.study, rater=participant.user))
    participant.refresh_from_db()
    return participant


def outcome_code(participant: Participant) -> str:
    """The code a finished participant takes back to the panel ("" for none):

    - completed: the completion code;
    - timed out: the completion code if they submitted any of the link's items in time
      (their work counts and is paid), else the screen-out code;
    - left: the link's code for leaving, else the screen-out code;
    - declined, screened out: the screen-out code."""
    link = participant.link
    outcome = participant.outcome
    if outcome == Participant.Outcome.COMPLETED:
        return link.completion_code
    if outcome == Participant.Outcome.TIMED_OUT and has_done_study_work(participant):
        return link.completion_code
    if outcome == Participant.Outcome.LEFT and link.left_code:
        return link.left_code
    return link.screenout_code


def return_url(link: RecruitmentLink, code: str) -> str:
    """The panel's completion URL with `?cc=<code>` added; "" without a code (the page then
    asks the participant to return the study on the panel)."""
    if not code:
        return ""
    joiner = "&" if "?" in link.completion_url else "?"
    return f"{link.completion_url}{joiner}cc={quote(code, safe='')}"


def completion(participant: Participant) -> tuple[str, str]:
    """(code, URL to send the participant to) for a finished participant."""
    code = outcome_code(participant)
    return code, return_url(participant.link, code)


def has_done_study_work(participant: Participant) -> bool:
    """Whether the participant submitted any of the link's items: qualification (and
    training) items are screening in batches of their own and never count."""
    return Assignment.objects.filter(
        batch_id=participant.link.batch_id, rater=participant.user, state=Assignment.State.SUBMITTED
    ).exists()
