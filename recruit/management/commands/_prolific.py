"""What the Prolific commands share: the study, the participants named by panel id."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotate.models import Study
from recruit.models import Participant


def study_of(slug: str) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise CommandError(f"No study {slug!r}.")
    return study


def participants_of(study: Study, panel_ids: list[str]) -> list[Participant]:
    """The study's participants with these Prolific ids, in the order given; an unknown id
    is an error (nothing is done)."""
    found = {
        p.external_id: p
        for p in Participant.objects.filter(study=study, panel=Participant.Panel.PROLIFIC, external_id__in=panel_ids)
        .select_related("user", "study", "link")
        .order_by("created_at")
    }
    missing = [pid for pid in panel_ids if pid not in found]
    if missing:
        raise CommandError(f"No Prolific participant of {study.slug!r} with id(s): {', '.join(missing)}.")
    return [found[pid] for pid in dict.fromkeys(panel_ids)]
