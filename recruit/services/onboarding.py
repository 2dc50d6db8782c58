"""The study admin's onboarding set-up (consent, instructions, questionnaire) and each rater's
way through it (docs/recruitment.md)."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext

from annotate.models import (
    Assignment,
    ConsentDecision,
    ConsentVersion,
    Onboarding,
    OnboardingRecord,
    Study,
    StudySettingChange,
)
from annotate.rubrics import RubricDefinition, RubricDefinitionError
from annotate.selectors.onboarding import current_consent
from core.exceptions import InvalidStateError
from core.text_validation import check_text
from recruit.models import Participant
from recruit.selectors import questionnaire_definition
from recruit.services.checks import invalid_field
from recruit.services.participation import finish_participation, withdraw_open

MAX_CONSENT_CHARS = 50_000
MAX_INSTRUCTIONS_CHARS = 50_000
MAX_QUESTIONS = 30

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
            raise invalid_field(field, f"at most {limit} characters")
    onboarding, _ = Onboarding.objects.select_for_update().get_or_create(study=study)
    before = {"instructions": onboarding.instructions}
    onboarding.instructions = instructions.strip()
    onboarding.save()
    text = consent_text.strip()
    current = current_consent(study=study, include_withdrawn=True)
    before["consent_text"] = current.text if current is not None else ""
    # Recorded beside the study's other settings (who, when, before, after), so the
    # settings page lists them and the dataset exports them.
    StudySettingChange.objects.bulk_create(
        StudySettingChange(
            study=study,
            field=field,
            before=before[field],
            after=after,
            changed_by=by,
            via=StudySettingChange.Via.ONBOARDING,
        )
        for field, after in (("instructions", onboarding.instructions), ("consent_text", text))
        if before[field] != after
    )
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
        raise invalid_field("prompt", "a question needs its prompt")
    if len(prompt) > 500:
        raise invalid_field("prompt", "at most 500 characters")
    if kind not in QUESTION_KINDS:
        raise invalid_field("kind", f"must be one of {', '.join(QUESTION_KINDS)}")
    key = key or re.sub(r"[^a-z0-9]+", "_", prompt.lower()).strip("_")[:40] or "question"
    if not key[0].isalpha():
        key = f"q_{key}"
    question: dict[str, Any] = {"key": key, "kind": kind, "prompt": prompt, "required": bool(required)}
    if kind != "text":
        check_text(options_text, "options")
        labels = [line.strip() for line in options_text.splitlines() if line.strip()]
        if len(labels) < 2:
            raise invalid_field("options", "give at least two options, one per line")
        if len(labels) > 20 or any(len(label) > 200 for label in labels):
            raise invalid_field("options", "at most 20 options of at most 200 characters each")
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
    (annotate/rubrics/). A key already asked gets a numbered suffix."""
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
        raise invalid_field("prompt", f"a questionnaire has at most {MAX_QUESTIONS} questions")
    try:
        RubricDefinition.from_dict({"key": "questionnaire", "title": "Questionnaire", "questions": current})
    except RubricDefinitionError as exc:
        raise invalid_field("prompt", exc.message) from None
    onboarding.questionnaire = current
    onboarding.save()
    return onboarding


@transaction.atomic
def remove_questionnaire_question(*, study: Study, key: str) -> Onboarding:
    """Take a question off the questionnaire; answers already given keep it."""
    onboarding, _ = Onboarding.objects.select_for_update().get_or_create(study=study)
    remaining = [q for q in onboarding.questionnaire or [] if q.get("key") != key]
    if len(remaining) == len(onboarding.questionnaire or []):
        raise invalid_field("key", "no such question")
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
        raise invalid_field(
            "version", gettext("the consent text has changed since you opened it: please read it again")
        )
    decision = ConsentDecision.objects.create(study=study, rater=rater, version=version, accepted=bool(accepted))
    if not accepted:
        participant = Participant.objects.filter(user=rater, study=study).first()
        if participant is not None:
            finish_participation(participant=participant, outcome=Participant.Outcome.DECLINED)
        else:
            withdraw_open(Assignment.objects.filter(study=study, rater=rater))
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
        raise invalid_field("acknowledge", gettext("open the instructions before acknowledging them"))
    if record.instructions_acknowledged_at is None:
        record.instructions_acknowledged_at = timezone.now()
        record.save(update_fields=["instructions_acknowledged_at", "updated_at"])
    return record


@transaction.atomic
def submit_questionnaire(*, study: Study, rater, answers: dict[str, Any]) -> OnboardingRecord:
    """Check the answers with the rubric's own validation (annotate/rubrics/) and store
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
