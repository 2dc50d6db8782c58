from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.exceptions import ApplicationError
from literature.ncbi import EutilsClient
from literature.pubmed import import_articles


class Command(BaseCommand):
    help = (
        "Import PubMed articles into a study as sources (title and abstract; the open-access licence from PMC "
        "when there is one, otherwise none, so exports withhold the text). NCBI_* settings in docs/questions.md."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--pmid", action="append", default=[], help="a PubMed id (repeatable)")
        parser.add_argument("--query", help="a PubMed search; its best --max hits are imported")
        parser.add_argument("--max", type=int, default=20, help="with --query: at most this many (default 20)")

    def handle(self, *args, study: str, pmid: list[str], query: str | None, max: int, **options):
        if bool(pmid) == bool(query):
            raise CommandError("give --pmid (repeatable) or --query, not both")
        if not 1 <= max <= 10_000:
            raise CommandError("--max must be between 1 and 10000")
        bad = [p for p in pmid if not p.strip().isdigit()]
        if bad:
            raise CommandError(f"not a PubMed id: {', '.join(bad)}")
        study_obj = study_named(study)
        try:
            with EutilsClient.from_environment() as client:
                ids = list(client.esearch(query, retmax=max).ids) if query else [p.strip() for p in pmid]
                imported = import_articles(study=study_obj, pmids=ids, client=client)
        except ApplicationError as exc:
            raise CommandError(f"{exc.message}. Nothing was imported.") from None
        missing = [p for p in ids if p not in imported.sources]
        self.stdout.write(
            f"Imported {len(imported.sources)} article(s) into {study}: {imported.result.summary_line()}; "
            f"{len(imported.open_access)} with an open-access licence, {len(imported.without_abstract)} without an "
            "abstract" + (f"; not found in PubMed: {', '.join(missing)}" if missing else "") + "."
        )
