import re

from django.core.management.base import BaseCommand, CommandError

from annotate.management.common import study_named
from core.exceptions import ApplicationError
from literature.ncbi import EutilsClient
from literature.pubmed import import_articles, import_by_pmcid


class Command(BaseCommand):
    help = (
        "Import articles into a study as sources: by PMID or a PubMed query (title and abstract), or by PMCID from "
        "PMC (title and abstract, with --full-text the body too when the article has an open licence). The "
        "open-access licence from PMC when there is one, otherwise none, so exports withhold the text. NCBI_* "
        "settings in docs/questions.md."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--pmid", action="append", default=[], help="a PubMed id (repeatable)")
        parser.add_argument("--pmcid", action="append", default=[], help="a PMC id such as PMC9101 (repeatable)")
        parser.add_argument("--query", help="a PubMed search; its best --max hits are imported")
        parser.add_argument("--max", type=int, default=20, help="with --query: at most this many (default 20)")
        parser.add_argument(
            "--full-text", action="store_true", help="with --pmcid: the article's body too, when its licence is open"
        )

    def handle(self, *args, study: str, pmid: list[str], pmcid: list[str], query: str | None, max: int, **options):
        if sum(map(bool, (pmid, pmcid, query))) != 1:
            raise CommandError("give one of --pmid (repeatable), --pmcid (repeatable) or --query, not both")
        if options["full_text"] and not pmcid:
            raise CommandError("--full-text goes with --pmcid")
        if not 1 <= max <= 10_000:
            raise CommandError("--max must be between 1 and 10000")
        bad = [p for p in pmid if not p.strip().isdigit()]
        bad += [p for p in pmcid if not re.fullmatch(r"(?i)(PMC)?\d+", p.strip())]
        if bad:
            raise CommandError(f"not a PubMed id or PMCID: {', '.join(bad)}")
        study_obj = study_named(study)
        if pmcid:
            return self.by_pmcid(study_obj, pmcid, options["full_text"])
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

    def by_pmcid(self, study, pmcids: list[str], full_text: bool) -> None:
        try:
            with EutilsClient.from_environment() as client:
                sources, result, missing, texts = import_by_pmcid(
                    study=study, pmcids=pmcids, client=client, full_text=full_text
                )
        except ApplicationError as exc:
            raise CommandError(f"{exc.message}. Nothing was imported.") from None
        open_access = sum(1 for t in texts if t.open_access)
        with_body = sum(1 for s in sources.values() if s.metadata.get("full_text"))
        self.stdout.write(
            f"Imported {len(sources)} article(s) into {study.slug}: {result.summary_line()}; {open_access} with an "
            f"open-access licence, {with_body} with their full text"
            + (f"; not found in PMC: {', '.join(missing)}" if missing else "")
            + "."
        )
