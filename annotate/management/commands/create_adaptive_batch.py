from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named, users_named
from annotate.services.adaptive import adaptive_state, create_adaptive_batch
from core.exceptions import ApplicationError


class Command(BaseCommand):
    help = (
        "Create an adaptive side-by-side batch: comparisons handed out one at a time as raters "
        "continue, the pair of systems chosen from the judgements so far (docs/pairwise.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--name", required=True, help="the batch's name")
        parser.add_argument("--raters", required=True, help="comma-separated usernames")
        parser.add_argument("--budget", type=int, required=True, help="judgements at most")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--z", type=float, default=1.96, help="how far apart neighbours must be (1.96)")

    def handle(self, *args, study, name, raters, budget, seed, z, **options):
        study_obj = study_named(study)
        names, users = users_named(raters)
        try:
            batch = create_adaptive_batch(
                study=study_obj, name=name, raters=[users[n] for n in names], budget=budget, seed=seed, z=z
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        state = adaptive_state(batch)
        systems = ", ".join(batch.design["systems"])
        self.stdout.write(
            f"Batch {batch.name!r} of {study_obj.slug}: {len(systems.split(', '))} systems ({systems}), "
            f"budget {state.budget}; {state.handed_out} comparison(s) handed out so far."
        )
