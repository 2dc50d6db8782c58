"""Writes of study planning: freezing a study's analysis plan."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotate.models import Study
from core.exceptions import ApplicationError
from planning import selectors
from planning.models import Protocol, ReportLook
from planning.protocol import PlanError, check_plan, protocol_hash

PLAN_FIELDS = (
    "kind",
    "primary_question",
    "test",
    "correction",
    "alpha",
    "planned_n",
    "stopping_rule",
    "exclusion_rules",
    "power",
)


class InvalidPlan(ApplicationError):
    code = "invalid_plan"
    http_status = 400


def protocol_document(*, study: Study, plan: dict[str, Any]) -> dict[str, Any]:
    """What a freeze records: the plan as given, with the rubric and the batch designs
    and seeds read from the study (never typed by hand)."""
    return {
        "study": study.slug,
        "plan": {key: plan.get(key) for key in PLAN_FIELDS if key in plan},
        "rubric": selectors.rubric_record(study),
        "batches": selectors.batch_records(study),
    }


def record_look(*, study: Study, version: int, at, n_rated: int) -> ReportLook | None:
    """A report of the study was computed at `at` under protocol `version` with `n_rated`
    items rated (analysis records it when a report is done)."""
    protocol = Protocol.objects.filter(study=study, version=version).first()
    if protocol is None:
        return None
    return ReportLook.objects.create(protocol=protocol, at=at, n_rated=n_rated)


@transaction.atomic
def freeze_protocol(*, study: Study, by, plan: dict[str, Any], note: str = "") -> Protocol:
    """Freeze the plan as the study's next protocol version. A later version amends the
    earlier ones and needs a note saying why; none is ever edited."""
    try:
        check_plan(plan, questions=selectors.scale_questions(study))
    except PlanError as error:
        raise InvalidPlan(str(error), extra={"field": error.field}) from None
    Study.objects.select_for_update().filter(pk=study.pk).first()
    last = selectors.latest_protocol(study)
    version = 1 if last is None else last.version + 1
    if version > 1 and not note.strip():
        raise InvalidPlan("note: say why this version amends the frozen plan.", extra={"field": "note"})
    document = protocol_document(study=study, plan=plan)
    return Protocol.objects.create(
        study=study,
        version=version,
        document=document,
        sha256=protocol_hash(document),
        frozen_by=by,
        note=note.strip(),
    )
