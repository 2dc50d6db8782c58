from pathlib import Path

import yaml
from django.core.management.base import BaseCommand

from annotate.management.common import study_named
from core.text_validation import loads
from datasets.messages import importing, read_text
from datasets.thresh import import_thresh


class Command(BaseCommand):
    help = (
        "Import span annotations made with Thresh (its JSON output) into a study, as one batch of "
        "submitted answers by pseudonymous raters. The map says which span question each Thresh edit "
        "category answers (docs/thresh-mapping.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="Thresh JSON output: a list of annotated entries")
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument(
            "--rubric-map", type=Path, help="YAML or JSON map (default: categories named like questions)"
        )
        parser.add_argument("--batch", default="thresh", help="name of the new batch (default: thresh)")

    def handle(self, *args, file: Path, study: str, rubric_map: Path | None, batch: str, **options):
        found = study_named(study)
        mapping = None
        if rubric_map:
            with importing(rubric_map):
                mapping = yaml.safe_load(read_text(rubric_map))
        with importing(file):
            entries = loads(read_text(file))
            result = import_thresh(study=found, entries=entries, rubric_map=mapping, batch_name=batch)
        self.stdout.write(result.summary_line())
