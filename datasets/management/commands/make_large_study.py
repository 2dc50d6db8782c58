"""Generate a large synthetic study to measure the admin's pages on (docs/performance.md).

manage.py make_large_study [--slug large] [--sources 2000] [--raters 60] [--scale 1.0] [--seed 0]
"""

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from datasets.large_study import FULL_RATERS, FULL_SOURCES, RATERS_PER_ITEM, make_large_study


class Command(BaseCommand):
    help = (
        "Generate a large study: 2,000 sources, 6,000 summaries from six systems, 60 raters, every summary rated "
        "by three on ten questions with spans, a third of the items adjudicated (about 150,000 answers). "
        "--scale or --sources/--raters make it smaller."
    )

    def add_arguments(self, parser):
        parser.add_argument("--slug", default="large", help="the new study's slug (default: large)")
        parser.add_argument("--scale", type=float, default=1.0, help="a fraction of the full size (default: 1)")
        parser.add_argument(
            "--sources", type=int, help=f"sources, three summaries each (default: {FULL_SOURCES} x scale)"
        )
        parser.add_argument("--raters", type=int, help=f"raters (default: {FULL_RATERS} x scale, at least 3)")
        parser.add_argument("--seed", type=int, default=0, help="the same seed gives the same study")

    def handle(self, *args, slug: str, scale: float, sources: int | None, raters: int | None, seed: int, **options):
        if not 0 < scale <= 10:
            raise CommandError("--scale must be above 0 and at most 10")
        sources = sources if sources is not None else max(1, round(FULL_SOURCES * scale))
        raters = raters if raters is not None else max(RATERS_PER_ITEM, round(FULL_RATERS * scale))
        try:
            result = make_large_study(slug=slug, sources=sources, raters=raters, seed=seed)
        except ApplicationError as exc:
            raise CommandError(f"{exc.message}. Nothing was created.") from None
        self.stdout.write(result.summary_line())
