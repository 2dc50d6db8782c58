from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named, users_named
from annotate.models import Batch
from annotate.services.batches import COMPARISONS, DESIGNS, create_batch
from core.exceptions import ApplicationError


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    result = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{what} must look like FIELD=VALUE, got {item!r}")
        result[key] = value
    return result


class Command(BaseCommand):
    help = (
        "Build a batch of assignments: filter the study's summaries, sample them (seeded, optionally "
        "stratified), assign them with a design. Same options as the admin page (docs/batches.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--name", required=True, help="batch name, unique in the study")
        parser.add_argument("--raters", required=True, help="comma-separated usernames")
        parser.add_argument("--design", choices=[*DESIGNS, COMPARISONS], default="k_raters")
        parser.add_argument(
            "--per-source", type=int, help="comparisons: pairs of generators per source (default: every pair)"
        )
        parser.add_argument("--kind", choices=Batch.Kind.values, default=Batch.Kind.MAIN)
        parser.add_argument("--k", type=int, default=2, help="raters per item (k_raters, balanced)")
        parser.add_argument("--share", type=float, default=0.2, help="share of doubly rated items (partial_overlap)")
        parser.add_argument("--m", type=int, default=1, help="items shared by every rater pair (pairwise_overlap)")
        parser.add_argument("--n", type=int, help="sample this many summaries (default: all that match)")
        parser.add_argument("--stratify", default="", help="comma-separated: generator, context_length, source.FIELD")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--generator", action="append", help="only these generators (repeatable)")
        parser.add_argument("--flag", action="append", help="only summaries with this pipeline flag (repeatable)")
        parser.add_argument("--no-flag", action="append", help="only summaries without this flag (repeatable)")
        parser.add_argument("--source", action="append", metavar="FIELD=VALUE", help="source metadata filter")
        parser.add_argument("--min-context", type=int, help="at least this many source sentences")
        parser.add_argument("--max-context", type=int, help="at most this many source sentences")
        parser.add_argument("--rated", choices=["yes", "no"], help="already rated (in any batch) or not")
        parser.add_argument(
            "--assigned", choices=["yes", "no"], help="already given to a rater (in any batch, not withdrawn) or not"
        )
        parser.add_argument("--unblinded", action="store_true", help="turn blinding off (it is on by default)")
        parser.add_argument("--gold", action="append", metavar="SUMMARY_KEY", help="gold item for every rater")
        parser.add_argument("--attention-every", type=int, help="mix an attention check in after about N items")
        parser.add_argument("--training", action="store_true", help="show expected answers after each submit")

    def handle(self, *args, **o):
        study = study_named(o["study"])
        names, users = users_named(o["raters"])
        filters = {
            "generator": o["generator"],
            "flags_any": o["flag"],
            "flags_none": o["no_flag"],
            "source_metadata": _pairs(o["source"], "--source"),
            "min_context": o["min_context"],
            "max_context": o["max_context"],
            "rated": None if o["rated"] is None else o["rated"] == "yes",
            "assigned": None if o["assigned"] is None else o["assigned"] == "yes",
        }
        filters = {k: v for k, v in filters.items() if v not in (None, [], {})}
        try:
            batch = create_batch(
                study=study,
                name=o["name"],
                raters=[users[n] for n in names],
                design=o["design"],
                seed=o["seed"],
                kind=o["kind"],
                filters=filters,
                n=o["n"],
                stratify_by=[f.strip() for f in o["stratify"].split(",") if f.strip()],
                k=o["k"],
                share=o["share"],
                m=o["m"],
                blinded=not o["unblinded"],
                gold=list(study.summaries.filter(key__in=o["gold"] or [])),
                attention_every=o["attention_every"],
                training=o["training"],
                per_source=o["per_source"],
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        count = batch.assignments.count()
        items = batch.assignments.values("summary").distinct().count()
        self.stdout.write(
            f"Created batch {batch.name!r} ({batch.kind}, {o['design']}): "
            f"{items} summaries, {count} assignments for {len(names)} raters."
        )
