"""How many judgements the adaptive side-by-side rule needs to recover the true order of
the systems, against the uniform all-pairs design (docs/pairwise.md)."""

from __future__ import annotations

import numpy as np
from django.core.management.base import BaseCommand

from core.commands import usage_error
from stats.adaptive import compare_designs


class Command(BaseCommand):
    help = "Simulate the adaptive side-by-side design against uniform all pairs (seeded)."

    def add_arguments(self, parser):
        parser.add_argument("--systems", type=int, default=8, help="Number of systems (default 8).")
        parser.add_argument("--spread", type=float, default=2.4, help="Strongest minus weakest, log-odds (2.4).")
        parser.add_argument("--runs", type=int, default=100)
        parser.add_argument("--step", type=int, default=60, help="Budgets every this many judgements (60).")
        parser.add_argument("--max-budget", type=int, default=1500)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **options):
        if options["systems"] < 3:
            raise usage_error("--systems: at least 3.")
        if options["runs"] < 1 or options["step"] < 1 or options["max_budget"] < options["step"]:
            raise usage_error("--runs, --step and --max-budget must be positive, --max-budget at least --step.")
        strengths = np.linspace(0.0, options["spread"], options["systems"])
        budgets = range(options["step"], options["max_budget"] + 1, options["step"])
        found = compare_designs(strengths, budgets, runs=options["runs"], seed=options["seed"])
        self.stdout.write(
            f"{'judgements':>10} {'adaptive':>9} {'uniform':>8}   (share of runs with Kendall's tau >= 0.9)"
        )
        for budget, a, u in zip(found.budgets, found.adaptive_share, found.uniform_share, strict=True):
            self.stdout.write(f"{budget:>10} {a:>9.2f} {u:>8.2f}")
        self.stdout.write(
            f"{found.n_systems} systems, {found.runs} runs, seed {found.seed}: adaptive needs "
            f"{found.adaptive_needs or 'more than the largest budget'}, uniform "
            f"{found.uniform_needs or 'more than the largest budget'} judgements for tau >= 0.9 in 90% of runs."
        )
