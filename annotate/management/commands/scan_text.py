from django.core.management.base import BaseCommand, CommandError

from annotate.selectors.stored_text import bad_stored_text


class Command(BaseCommand):
    help = (
        "Find stored text that breaks the pages and exports that read it: a lone UTF-16 surrogate, a NUL "
        "character or bytes that are not UTF-8, in every text and JSON column of every table. Prints one line "
        "per value (table, row id and uuid, field) and exits non-zero if it finds any."
    )

    def handle(self, *args, **options):
        found = 0
        for bad in bad_stored_text():
            found += 1
            self.stdout.write(bad.describe())
        if found:
            raise CommandError(
                f"{found} stored value(s) hold text that cannot be read back; correct or remove them "
                "before exporting the study."
            )
        self.stdout.write("No bad text: every text and JSON column holds valid Unicode without NUL characters.")
