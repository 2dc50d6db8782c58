"""Crowd recruitment links: their signed tokens, creating them, changing their terms."""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.core import signing
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from annotate.models import Batch, ExpectedAnswer, Study
from annotate.selectors.contents import filter_summaries
from core.text_validation import check_text
from recruit.models import (
    LinkChange,
    RecruitmentLink,
)
from recruit.services.checks import PANEL_ID, invalid_field

LINK_SALT = "recruit.link"

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
        raise invalid_field("name", "required")
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
        raise invalid_field("raters_per_item", "a whole number from 1 to 50")
    if attention_every is not None:
        if not isinstance(attention_every, int) or isinstance(attention_every, bool) or not 1 <= attention_every <= 500:
            raise invalid_field("attention_every", "a whole number from 1 to 500")
        if not attention_checks(study):
            raise invalid_field(
                "attention_every", "the study has no attention checks: record expected answers with purpose attention"
            )
    special = ExpectedAnswer.objects.filter(study=study).values("summary")
    pool = list(filter_summaries(study=study).exclude(pk__in=special).values_list("pk", flat=True))
    if not pool:
        raise invalid_field("name", "the study has no summaries to hand out")
    batch_name = f"crowd: {name.strip()}"
    if Batch.objects.filter(study=study, name=batch_name).exists():
        raise invalid_field("name", f"this study already has a batch named {batch_name!r}")
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
        raise invalid_field("completion_code", "required")
    for field, code in codes.items():
        if len(code) > 64 or (code and not PANEL_ID.fullmatch(code)):
            raise invalid_field(field, "1 to 64 letters, digits or _.:@-")
    if codes["screenout_code"] == codes["completion_code"]:
        raise invalid_field("screenout_code", "must differ from the completion code")
    if codes["left_code"] == codes["completion_code"]:
        raise invalid_field("left_code", "must differ from the completion code")
    if not re.fullmatch(r"https?://[^\s<>\"']{1,490}", completion_url.strip()):
        raise invalid_field("completion_url", "an http(s) address")
    if len(full_message) > 500:
        raise invalid_field("full_message", "at most 500 characters")
    for field, value, low, high in (
        ("items_per_participant", items_per_participant, 1, 500),
        ("max_participants", max_participants, 1, 100_000),
        ("time_budget_minutes", time_budget_minutes, 1, 24 * 60),
        ("lease_minutes", lease_minutes, 1, 24 * 60),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise invalid_field(field, f"a whole number from {low} to {high}")
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
        raise invalid_field(sorted(unknown)[0], "cannot be changed")
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


def attention_checks(study: Study) -> list[int]:
    """The summaries the study marks as attention checks, in id order."""
    return sorted(
        ExpectedAnswer.objects.filter(study=study, purpose=ExpectedAnswer.Purpose.ATTENTION).values_list(
            "summary_id", flat=True
        )
    )
