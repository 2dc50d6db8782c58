"""Release a finished export of a study, and deposit a release on Zenodo (docs/publishing.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotate.management.common import study_named
from core.commands import usage_error, usage_errors
from core.exceptions import ApplicationError
from datasets.models import ExportRun, Release
from datasets.releases import create_release, deposit_on_zenodo


def _creator(text: str) -> dict:
    name, _, affiliation = text.partition(";")
    return {"name": name.strip(), "affiliation": affiliation.strip()}


class Command(BaseCommand):
    help = "Make a release of a study's newest finished export, or deposit a release on Zenodo (--zenodo)."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--release", required=True, help="its version: 1, 1.1 or 1.1.0, above the last release's")
        parser.add_argument("--changelog", default="", help="what this release is (to make a release)")
        parser.add_argument("--export", default="", help="the export's id (default: the newest finished one)")
        parser.add_argument("--zenodo", action="store_true", help="deposit the release on Zenodo and publish it")
        parser.add_argument(
            "--creator", action="append", default=[], help="'Family, Given; Affiliation' (repeat for each)"
        )
        parser.add_argument("--keyword", action="append", default=[])
        parser.add_argument("--related", action="append", default=[], help="a URL this dataset supplements")

    def handle(self, *args, **o):
        with usage_errors():
            study = study_named(o["study"])
        if o["zenodo"]:
            release = Release.objects.filter(study=study, version=o["release"]).first()
            if release is None:
                raise usage_error(f"--release: {study.slug} has no release {o['version']!r}")
            related = [{"identifier": url, "relation": "isSupplementTo"} for url in o["related"]]
            try:
                deposit_on_zenodo(
                    release=release,
                    creators=[_creator(c) for c in o["creator"]],
                    keywords=o["keyword"],
                    related=related,
                )
            except ApplicationError as exc:
                raise usage_error(exc.message) from None
            self.stdout.write(f"Published on Zenodo: DOI {release.doi}")
            return
        exports = ExportRun.objects.filter(study=study, status=ExportRun.Status.DONE).order_by("-finished_at")
        export = exports.filter(uuid=o["export"]).first() if o["export"] else exports.first()
        if export is None:
            raise usage_error("--export: no finished export of the study (run export_dataset or the Export page)")
        try:
            release = create_release(
                study=study, export=export, version=o["release"], changelog=o["changelog"], by="command line"
            )
        except ApplicationError as exc:
            raise usage_error(exc.message) from None
        changed = ", ".join(f"{t} {a}→{b}" for t, (a, b) in release.changes.get("tables", {}).items()) or "nothing"
        self.stdout.write(f"Release {release.version} of {study.slug} (export {export.uuid}); changed: {changed}")
