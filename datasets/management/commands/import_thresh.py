import json
from pathlib import Path

import yaml
from django.core.management.base import BaseCommand, CommandError

from annotate.exceptions import ApplicationError
from annotate.models import Study
from annotate.text_validation import InvalidTextError, loads
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
        found = Study.objects.select_related("rubric").filter(slug=study).first()
        if found is None:
            raise CommandError(f"no study {study!r}")
        try:
            entries = loads(file.read_text(encoding="utf-8"))
            mapping = yaml.safe_load(rubric_map.read_text(encoding="utf-8")) if rubric_map else None
        except FileNotFoundError as exc:
            raise CommandError(f"{exc.filename}: no such file") from None
        except UnicodeDecodeError as exc:
            raise CommandError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise CommandError(f"not valid JSON or YAML: {exc}") from None
        except InvalidTextError as exc:
            raise CommandError(f"{file}: {exc.message}. Nothing was imported.") from None
        try:
            result = import_thresh(study=found, entries=entries, rubric_map=mapping, batch_name=batch)
        except ApplicationError as exc:
            raise CommandError(f"{file}: {exc.message}. Nothing was imported.") from None
        self.stdout.write(result.summary_line())
