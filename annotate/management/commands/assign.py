from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named, users_named
from annotate.services.assignments import assign_summaries
from core.exceptions import ApplicationError


class Command(BaseCommand):
    help = (
        "Give every summary of a study N raters from a list, counting existing assignments; "
        "workloads are balanced and each rater's queue order is randomised with a stored seed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--raters", required=True, help="comma-separated usernames")
        parser.add_argument("--per-item", type=int, default=1, help="raters per summary (default 1)")
        parser.add_argument("--seed", type=int, default=0, help="seed for tie-breaking (default 0)")

    def handle(self, *args, study: str, raters: str, per_item: int, seed: int, **options):
        study_obj = study_named(study)
        names, users = users_named(raters)
        try:
            created = assign_summaries(study=study_obj, raters=[users[n] for n in names], per_item=per_item, seed=seed)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        if not created:
            self.stdout.write(f"Nothing to assign: every summary of {study_obj.slug} already has {per_item} rater(s).")
            return
        per_rater = {}
        for assignment in created:
            per_rater[assignment.rater_id] = per_rater.get(assignment.rater_id, 0) + 1
        shares = ", ".join(f"{n}: {per_rater.get(users[n].pk, 0)}" for n in names)
        self.stdout.write(
            f"Assigned {len({a.summary_id for a in created})} summaries of {study_obj.slug}: "
            f"{len(created)} new assignments ({shares}); every summary now has {per_item} rater(s)."
        )
