"""The demo: the LitSumm-style study, its accounts and their assignments (a service)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotate.models import Study, StudyMembership
from annotate.services import add_study_member, assign_summaries, ensure_user
from datasets.importing import ImportResult, import_evidence_inference, import_records

DEFAULT_DEMO_PASSWORD = "rate-summaries-2026"
DEMO_STUDY = "demo-litsumm"
FACTPICO_STUDY = "demo-factpico"
DEMO_SEED = 2026
# Of the demo's summaries, this many are rated by both demo raters (the rest once each).
DEMO_OVERLAP = 10


def fixture(*parts: str) -> Path:
    return Path(settings.BASE_DIR).joinpath("fixtures", *parts)


def demo_file() -> Path:
    return fixture("demo", "litsumm_demo.jsonl")


def _import_file(path: Path) -> ImportResult:
    with path.open(encoding="utf-8") as handle:
        return import_records(lines=handle)


def _load_factpico_demo() -> ImportResult:
    """The FactPICO study: its study line, the abstracts its summaries were written
    from (with their Evidence Inference findings), then the summaries."""
    result = _import_file(fixture("demo", "factpico_study.jsonl"))
    summaries_path = fixture("demo", "factpico_summaries.jsonl")
    with summaries_path.open(encoding="utf-8") as handle:
        pmcids = {json.loads(line)["source"] for line in handle if line.strip()}
    study = Study.objects.get(slug=FACTPICO_STUDY)
    with fixture("evidence_inference", "abstracts.jsonl").open(encoding="utf-8") as handle:
        _merge(result, import_evidence_inference(study=study, lines=handle, only=pmcids))
    return _merge(result, _import_file(summaries_path))


def _merge(into: ImportResult, other: ImportResult) -> ImportResult:
    for bucket in ("created", "updated", "unchanged"):
        getattr(into, bucket).update(getattr(other, bucket))
    return into


@dataclass(frozen=True)
class DemoResult:
    imported: ImportResult
    users_created: list[str]
    assignments_created: int


@transaction.atomic
def load_demo(*, password: str) -> DemoResult:
    """Load the demo study and accounts. Idempotent: a second run changes nothing
    (existing accounts keep their passwords)."""
    imported = _merge(_import_file(demo_file()), _load_factpico_demo())
    created_users = []
    admin, made = ensure_user(username="admin", password=password, is_staff=True, is_superuser=True)
    created_users += ["admin"] if made else []
    raters = []
    for name in ("rater1", "rater2"):
        user, made = ensure_user(username=name, password=password)
        created_users += [name] if made else []
        raters.append(user)

    created = 0
    for slug in (DEMO_STUDY, FACTPICO_STUDY):
        study = Study.objects.get(slug=slug)
        add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN, seed=0)
        for i, rater in enumerate(raters, start=1):
            add_study_member(study=study, user=rater, role=StudyMembership.Role.RATER, seed=DEMO_SEED + i)
        summaries = list(study.summaries.order_by("key"))
        overlap = sorted(
            random.Random(DEMO_SEED).sample(summaries, min(DEMO_OVERLAP, len(summaries))), key=lambda s: s.key
        )
        # The shared items first, then the rest once each, so both queues end up equally long.
        created += len(assign_summaries(study=study, raters=raters, per_item=2, seed=DEMO_SEED, summaries=overlap))
        created += len(assign_summaries(study=study, raters=raters, per_item=1, seed=DEMO_SEED, summaries=summaries))
    return DemoResult(imported=imported, users_created=created_users, assignments_created=created)
