"""Page models of the Plan page and a protocol's page."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.http import Http404, QueryDict

from annotate.models import Study
from annotate.selectors.access import get_study_for_admin
from planning import selectors
from planning.forms import FreezeForm, PilotForm, PowerForm
from planning.models import Protocol
from planning.protocol import REPORT_CORRECTION, REPORT_TESTS, canonical_json

if TYPE_CHECKING:  # numpy and pandas load when a curve is computed, not with the web app
    from stats.power import PilotEstimate, PointwiseDesign, PowerCurve, SideBySideDesign

CHART_WIDTH, CHART_HEIGHT = 480, 200


@dataclass(frozen=True)
class Chart:
    points: str  # the SVG polyline's points
    target_y: float
    ticks: tuple[tuple[float, int], ...]  # (x, n items)
    zero_y: float
    one_y: float


@dataclass(frozen=True)
class PlanPage:
    study: Study
    power_form: PowerForm
    pilot_form: PilotForm
    freeze_form: FreezeForm
    pilot: PilotEstimate | None
    pilot_error: str
    curve: PowerCurve | None
    chart: Chart | None
    protocols: tuple[Protocol, ...]
    report_tests: dict[str, str]


def _design(data: dict[str, Any]) -> PointwiseDesign | SideBySideDesign:
    from stats.power import PointwiseDesign, SideBySideDesign

    if data["kind"] == "side_by_side":
        return SideBySideDesign(
            effect=data["effect"],
            raters_per_item=data["raters_per_item"],
            n_systems=data["n_systems"],
            rater_sd=data["rater_sd"],
            tie_rate=data["tie_rate"],
        )
    return PointwiseDesign(
        effect=data["effect"],
        item_sd=data["item_sd"],
        rater_sd=data["rater_sd"],
        residual_sd=data["residual_sd"],
        raters_per_item=data["raters_per_item"],
        n_systems=data["n_systems"],
        alpha=data["alpha"],
    )


def run_power(data: dict[str, Any]) -> PowerCurve:
    """The curve of a valid PowerForm's cleaned data."""
    from stats.power import SideBySideDesign, pointwise_power, side_by_side_power

    design = _design(data)
    common = {"simulations": data["simulations"], "target": data["target"], "seed": data["seed"]}
    if isinstance(design, SideBySideDesign):
        return side_by_side_power(design, data["grid"], **common)
    return pointwise_power(design, data["grid"], **common)


def chart(curve: PowerCurve) -> Chart:
    sizes = [p.n_items for p in curve.points]
    low, high = min(sizes), max(sizes)
    span = (high - low) or 1

    def x(n: int) -> float:
        return round(40 + (CHART_WIDTH - 60) * (n - low) / span, 1)

    def y(power: float) -> float:
        return round(10 + (CHART_HEIGHT - 40) * (1 - power), 1)

    points = " ".join(f"{x(p.n_items)},{y(p.power)}" for p in curve.points)
    return Chart(points, y(curve.target), tuple((x(n), n) for n in sizes), y(0.0), y(1.0))


def _pilot(user, query: QueryDict, initial: dict[str, Any]) -> tuple[PilotForm, PilotEstimate | None, str]:
    form = PilotForm(query if "pilot" in query else None)
    if not form.is_bound or not form.is_valid():
        return form, None, ""
    try:
        pilot_study = get_study_for_admin(user, form.cleaned_data["pilot"])
    except Http404:
        return form, None, "No study of that name that you administer."
    from stats.power import PowerInputError, pilot_estimate

    try:
        found = pilot_estimate(*selectors.pilot_frames(pilot_study, form.cleaned_data["question"]))
    except PowerInputError as error:
        return form, None, str(error)
    initial.update(
        item_sd=round(found.item_sd, 3),
        rater_sd=round(found.rater_sd, 3),
        residual_sd=round(found.residual_sd, 3),
        raters_per_item=max(1, round(found.raters_per_item)),
        n_systems=max(2, len(found.system_means)),
    )
    if found.effect is not None:
        initial["effect"] = round(found.effect, 3)
    return form, found, ""


def plan_page(user, study: Study, query: QueryDict, *, freeze_form: FreezeForm | None = None) -> PlanPage:
    """The Plan page: a pilot's estimates, the power curve of the parameters asked for
    (a run when the query says `run`), the freeze form and the study's protocols."""
    initial = {name: field.initial for name, field in PowerForm.base_fields.items()}
    pilot_form, pilot, pilot_error = _pilot(user, query, initial)
    running = "run" in query
    power_form = PowerForm(query if running else None, initial=initial)
    curve = None
    if running and power_form.is_valid():
        curve = run_power(power_form.cleaned_data)
    power = ""
    if curve is not None:
        power = canonical_json(
            {
                "design": curve.design,
                "kind": curve.kind,
                "target": curve.target,
                "simulations": curve.simulations,
                "seed": curve.seed,
                "smallest_n": curve.smallest_n,
                "points": [[p.n_items, p.power] for p in curve.points],
            }
        )
    questions = selectors.scale_questions(study)
    if freeze_form is None:
        freeze_initial = {
            "kind": power_form.data.get("kind", "pointwise") if running else "pointwise",
            "primary_question": questions[0] if questions else "",
        }
        if curve is not None and curve.smallest_n:
            freeze_initial["planned_n"] = curve.smallest_n
        freeze_form = FreezeForm(initial=freeze_initial | {"power": power}, questions=questions)
    return PlanPage(
        study=study,
        power_form=power_form,
        pilot_form=pilot_form,
        freeze_form=freeze_form,
        pilot=pilot,
        pilot_error=pilot_error,
        curve=curve,
        chart=chart(curve) if curve is not None else None,
        protocols=tuple(selectors.protocols_of(study)),
        report_tests={k: f"{REPORT_TESTS[k]} (correction: {REPORT_CORRECTION[k]})" for k in REPORT_TESTS},
    )


@dataclass(frozen=True)
class ProtocolPage:
    study: Study
    protocol: Protocol
    text: str  # the canonical JSON the hash is taken over (the download)
    pretty: str  # the same document indented, for reading on the page


def protocol_page(study: Study, version: int) -> ProtocolPage:
    protocol = selectors.protocols_of(study).filter(version=version).first()
    if protocol is None:
        raise Http404("No such protocol version.")
    pretty = json.dumps(protocol.document, indent=2, sort_keys=True, ensure_ascii=False)
    return ProtocolPage(study, protocol, canonical_json(protocol.document), pretty)
