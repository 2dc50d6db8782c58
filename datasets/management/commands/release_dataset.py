"""Release a finished export of a study, deposit a release on Zenodo and push it to the
Hugging Face Hub (docs/publishing.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotate.management.common import study_named
from core.commands import usage_error, usage_errors
from core.exceptions import ApplicationError
from datasets.models import ExportRun, Release
from datasets.releases import create_release, deposit_on_zenodo, parse_creators, push_to_hub


class Command(BaseCommand):
    help = (
        "Make a release of a study's newest finished export, deposit a release on Zenodo (--zenodo) "
        "or push it to a Hugging Face Hub dataset repository (--hub owner/name)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--release", required=True, help="its version: 1, 1.1 or 1.1.0, above the last release's")
        parser.add_argument("--changelog", default="", help="what this release is (to make a release)")
        parser.add_argument("--export", default="", help="the export's id (default: the newest finished one)")
        parser.add_argument("--zenodo", action="store_true", help="deposit the release on Zenodo and publish it")
        parser.add_argument(
            "--creator",
            action="append",
            default=[],
            help="'Family, Given; Affiliation' (repeat for each; kept with a new release)",
        )
        parser.add_argument("--keyword", action="append", default=[])
        parser.add_argument("--related", action="append", default=[], help="a URL this dataset supplements")
        parser.add_argument("--hub", default="", metavar="OWNER/NAME", help="push the release to this Hub dataset repo")
        visibility = parser.add_mutually_exclusive_group()
        visibility.add_argument("--private", dest="private", action="store_true", help="a private repo (with --hub)")
        visibility.add_argument("--public", dest="private", action="store_false", help="a public repo (the default)")

    def handle(self, *args, **o):
        with usage_errors():
            study = study_named(o["study"])
        if o["zenodo"] or o["hub"]:
            release = Release.objects.filter(study=study, version=o["release"]).first()
            if release is None:
                raise usage_error(f"--release: {study.slug} has no release {o['release']!r}")
            if o["zenodo"]:
                self._deposit(release, o)
            if o["hub"]:
                try:
                    push_to_hub(release=release, repo=o["hub"], private=o["private"])
                except ApplicationError as exc:
                    raise usage_error(exc.message) from None
                self.stdout.write(
                    f"Pushed release {release.version} to {release.hub_url} "
                    f"(tag {release.version}, commit {release.hub_commit[:12]})"
                )
            return
        self._release(study, o)

    def _deposit(self, release: Release, o: dict) -> None:
        related = [{"identifier": url, "relation": "isSupplementTo"} for url in o["related"]]
        try:
            deposit_on_zenodo(
                release=release,
                creators=parse_creators("\n".join(o["creator"])),
                keywords=o["keyword"],
                related=related,
            )
        except ApplicationError as exc:
            raise usage_error(exc.message) from None
        self.stdout.write(f"Published on Zenodo: DOI {release.doi}")

    def _release(self, study, o: dict) -> None:
        exports = ExportRun.objects.filter(study=study, status=ExportRun.Status.DONE).order_by("-finished_at")
        export = exports.filter(uuid=o["export"]).first() if o["export"] else exports.first()
        if export is None:
            raise usage_error("--export: no finished export of the study (run export_dataset or the Export page)")
        try:
            release = create_release(
                study=study,
                export=export,
                version=o["release"],
                changelog=o["changelog"],
                by="command line",
                creators=parse_creators("\n".join(o["creator"])),
            )
        except ApplicationError as exc:
            raise usage_error(exc.message) from None
        changed = ", ".join(f"{t} {a}→{b}" for t, (a, b) in release.changes.get("tables", {}).items()) or "nothing"
        self.stdout.write(f"Release {release.version} of {study.slug} (export {export.uuid}); changed: {changed}")
