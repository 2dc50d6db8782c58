from pathlib import Path

from django.core.management.base import BaseCommand

from annotate.management.common import study_named
from datasets.importing import import_evidence_inference
from datasets.messages import importing, open_text


class Command(BaseCommand):
    help = (
        "Import Evidence Inference 2.0 abstracts (fixtures/evidence_inference/abstracts.jsonl) into a study: "
        "each abstract becomes a source, each prompt a finding."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--study", required=True, help="slug of an existing study")
        parser.add_argument("--pmcid", action="append", help="import only these PMCIDs (repeatable)")

    def handle(self, *args, path: Path, study: str, pmcid: list[str] | None, **options):
        study_obj = study_named(study, ": create it first (import_jsonl with a study line)")
        with importing(path), open_text(path) as handle:
            result = import_evidence_inference(study=study_obj, lines=handle, only=set(pmcid) if pmcid else None)
        self.stdout.write(f"Imported {path}: {result.summary_line()}.")
