"""Power against the number of items, by simulation through the report's own tests
(docs/planning.md). Parameters from the options or estimated from a pilot study."""

from __future__ import annotations

import json
from dataclasses import asdict

from django.core.management.base import BaseCommand

from annotate.management.common import study_named
from core.commands import usage_error, usage_errors
from planning.forms import PowerForm
from planning.pages import run_power
from planning.selectors import pilot_frames
from stats.power import PowerInputError, pilot_estimate


class Command(BaseCommand):
    help = "Estimate power over a grid of numbers of items (pointwise or side by side)."

    def add_arguments(self, parser):
        for name, field in PowerForm.base_fields.items():
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, help=field.help_text or None)
        parser.add_argument("--pilot", help="A study whose ratings give the variances and the effect.")
        parser.add_argument("--question", default="overall", help="The pilot's question (default: overall).")
        parser.add_argument("--json", action="store_true", help="Print the curve as JSON.")

    def handle(self, *args, **options):
        values = {name: field.initial for name, field in PowerForm.base_fields.items()}
        if options["pilot"]:
            with usage_errors():
                study = study_named(options["pilot"])
            try:
                found = pilot_estimate(*pilot_frames(study, options["question"]))
            except PowerInputError as error:
                raise usage_error(f"--pilot: {error}") from None
            values.update(
                item_sd=found.item_sd,
                rater_sd=found.rater_sd,
                residual_sd=found.residual_sd,
                raters_per_item=max(1, round(found.raters_per_item)),
                n_systems=max(2, len(found.system_means)),
            )
            if found.effect is not None:
                values["effect"] = found.effect
            self.stdout.write(f"From pilot {study.slug}: {json.dumps(asdict(found))}")
        values.update({k: v for k, v in options.items() if k in values and v is not None})
        form = PowerForm(values)
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            raise usage_error(f"--{field.replace('_', '-')}: {' '.join(errors)}")
        curve = run_power(form.cleaned_data)
        if options["json"]:
            self.stdout.write(json.dumps(asdict(curve)))
            return
        self.stdout.write(
            f"{'items':>8} {'power':>7} {'MC SE':>7}" + ("  width" if curve.kind == "side_by_side" else "")
        )
        for p in curve.points:
            width = f"  {p.interval_width:.2f}" if p.interval_width is not None else ""
            self.stdout.write(f"{p.n_items:>8} {p.power:>7.3f} {p.mc_error:>7.3f}{width}")
        if curve.smallest_n:
            self.stdout.write(f"Smallest number of items reaching power {curve.target}: {curve.smallest_n}")
        else:
            self.stdout.write(f"No number of items of the grid reaches power {curve.target}.")
