from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.exceptions import ApplicationError
from literature.europepmc import EuropePmcClient, acquire_sentences


class Command(BaseCommand):
    help = (
        "LitSumm's literature acquisition: search Europe PMC's open-access subset for an identifier (and its other "
        "names), fetch each article's full text, keep the sentences that mention it (the mention checked in the "
        "sentence) and import them as one source of the study, each sentence referenced by its article's PMCID, "
        "with the articles' licence (docs/questions.md, Europe PMC). EUROPEPMC_* settings there."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--term", action="append", required=True, help="the identifier; repeat for other names")
        parser.add_argument("--key", default="", help="the source's key (default: the first --term)")
        parser.add_argument("--query", default="", help="a Europe PMC query instead of LitSumm's")
        parser.add_argument("--max", type=int, default=50, help="at most this many articles (default 50)")

    def handle(self, *args, study: str, term: list[str], key: str, query: str, max: int, **options):
        if not 1 <= max <= 1000:
            raise CommandError("--max must be between 1 and 1000")
        study_obj = study_named(study)
        try:
            with EuropePmcClient.from_environment() as client:
                acquired = acquire_sentences(
                    study=study_obj, terms=term, client=client, key=key, query=query, limit=max
                )
        except ApplicationError as exc:
            raise CommandError(f"{exc.message}. Nothing was imported.") from None
        left = "; ".join(f"{k}: {why}" for k, why in acquired.left_out.items())
        if acquired.source is None:
            raise CommandError(
                f"no article of the {acquired.found} found has a sentence mentioning {term[0]!r}"
                + (f" ({left})" if left else "")
                + ". Nothing was imported."
            )
        sentences = sum(len(a.sentences) for a in acquired.articles)
        self.stdout.write(
            f"Imported source {acquired.source.key!r} into {study}: {sentences} sentence(s) from "
            f"{len(acquired.articles)} of {acquired.found} article(s) found, licence "
            f"{acquired.source.licence or 'none (the articles differ)'}; {acquired.result.summary_line()}"
            + (f"; left out: {left}" if left else "")
            + "."
        )
