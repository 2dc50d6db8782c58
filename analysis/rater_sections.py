"""The report's sections about raters and the plan: each rater's severity and drift
(stats.severity) and the frozen protocol's deviations (planning). They read the ratings
frame the report already has, the gold answers, and the study's protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.utils import timezone

from analysis.sections import (
    Deviation,
    DriftSection,
    DriftWindow,
    ProtocolSection,
    RaterSeverity,
    SeveritySection,
)
from annotate.models import Study
from annotate.selectors.batches import answer_matches

if TYPE_CHECKING:
    import pandas as pd

    from analysis.question_spec import QuestionSpec

DRIFT_WINDOW = 20


def severity_sections(named: pd.DataFrame, specs: Sequence[QuestionSpec], *, seed: int) -> tuple[SeveritySection, ...]:
    """Per scale question (each finding of a per-finding question an item of its own), each
    rater's mean signed difference from the others on shared items, with its interval."""
    from stats.severity import severity

    sections = []
    for spec in specs:
        if spec.kind != "scale":
            continue
        part = named[(named["question"] == spec.key) & named["score"].notna()]
        frame = part.rename(columns={"score": "value"})[["item", "rater", "value"]]
        rows = severity(frame, seed=seed) if len(frame) else []
        if rows:
            sections.append(SeveritySection(spec.key, tuple(RaterSeverity(**vars(r)) for r in rows)))
    return tuple(sections)


def drift_section(named: pd.DataFrame, specs: Sequence[QuestionSpec], gold: dict[str, dict]) -> DriftSection | None:
    """Each rater's answers to the questions with comparable answers (scales, choices,
    tickboxes; not free text) in the order submitted, in windows of DRIFT_WINDOW:
    agreement with the other raters and with the gold answers."""
    from stats.severity import drift

    compared = [s.key for s in specs if s.kind in ("scale", "choice", "checkboxes")]
    rows = named[named["question"].isin(compared) & named["answer"].notna() & named["submitted_at"].notna()]
    if not len(rows):
        return None
    summary = rows["item"].astype(str).str.split(":", n=1).str[0]
    correct = [
        answer_matches(gold[s][q], a) if s in gold and q in gold[s] and not f else None
        for s, q, a, f in zip(summary, rows["question"], rows["answer"], rows["finding"], strict=True)
    ]
    frame = rows.assign(
        item=rows["item"].astype(str) + "|" + rows["question"],
        value=[_comparable(a) for a in rows["answer"]],
        order=rows["submitted_at"],
        gold_correct=correct,
    )
    windows = drift(frame[["item", "rater", "value", "order", "gold_correct"]], window=DRIFT_WINDOW)
    return DriftSection(DRIFT_WINDOW, tuple(DriftWindow(**vars(w)) for w in windows))


def _comparable(answer):
    """An answer as a value equality can compare (tickboxes in any order alike)."""
    if isinstance(answer, list):
        return tuple(sorted(map(str, answer)))
    if isinstance(answer, dict):
        return tuple(sorted((str(k), str(v)) for k, v in answer.items()))
    return answer


def protocol_section(*, study: Study, names: dict[str, str]) -> ProtocolSection | None:
    """The latest frozen protocol and what deviates from it now (planning.protocol)."""
    from planning import selectors as planning_selectors
    from planning.protocol import Look, deviations

    protocol = planning_selectors.latest_protocol(study)
    if protocol is None:
        return None
    plan = protocol.document["plan"]
    n_now = planning_selectors.n_rated(study, plan)
    # The reports computed under this protocol before, and this one: each is a look.
    looks = (*planning_selectors.recorded_looks(protocol), Look(timezone.now().isoformat(), n_now))
    labels = {int(k): v for k, v in names.items()}
    state = planning_selectors.study_state(study=study, plan=plan, rater_labels=labels, looks=looks)
    return ProtocolSection(
        version=protocol.version,
        sha256=protocol.sha256,
        frozen_at=protocol.frozen_at.isoformat(),
        kind=plan["kind"],
        planned_n=plan["planned_n"],
        n_rated=state.n_rated,
        deviations=tuple(Deviation(d.code, d.message) for d in deviations(protocol.document, state)),
    )
