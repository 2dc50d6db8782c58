"""The demo: the LitSumm-style study, its accounts and their assignments (a service)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotate.importing import ImportResult, import_records
from annotate.models import Study, StudyMembership
from annotate.services import add_study_member, assign_summaries, ensure_user

DEFAULT_DEMO_PASSWORD = "rate-summaries-2026"
DEMO_STUDY = "demo-litsumm"
DEMO_SEED = 2026
# Of the demo's summaries, this many are rated by both demo raters (the rest once each).
DEMO_OVERLAP = 10


def demo_file() -> Path:
    return Path(settings.BASE_DIR) / "fixtures" / "demo" / "litsumm_demo.jsonl"


@dataclass(frozen=True)
class DemoResult:
    imported: ImportResult
    users_created: list[str]
    assignments_created: int


@transaction.atomic
def load_demo(*, password: str) -> DemoResult:
    """Load the demo study and accounts. Idempotent: a second run changes nothing
    (existing accounts keep their passwords)."""
    with demo_file().open(encoding="utf-8") as handle:
        imported = import_records(lines=handle)
    created_users = []
    admin, made = ensure_user(username="admin", password=password, is_staff=True, is_superuser=True)
    created_users += ["admin"] if made else []
    raters = []
    for name in ("rater1", "rater2"):
        user, made = ensure_user(username=name, password=password)
        created_users += [name] if made else []
        raters.append(user)

    study = Study.objects.get(slug=DEMO_STUDY)
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN, seed=0)
    for i, rater in enumerate(raters, start=1):
        add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER, seed=DEMO_SEED + i)
    summaries = list(study.summaries.order_by("key"))
    overlap = sorted(random.Random(DEMO_SEED).sample(summaries, min(DEMO_OVERLAP, len(summaries))), key=lambda s: s.key)
    # The shared items first, then the rest once each, so both queues end up equally long.
    created = assign_summaries(study=study, raters=raters, per_item=2, seed=DEMO_SEED, summaries=overlap)
    created += assign_summaries(study=study, raters=raters, per_item=1, seed=DEMO_SEED, summaries=summaries)
    return DemoResult(imported=imported, users_created=created_users, assignments_created=len(created))
