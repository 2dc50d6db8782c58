"""PostgreSQL compresses a long text (over about 2 KB, most abstracts) when the row is
written. Its default method, pglz, took half of a 500-source import's time on the server
(docs/performance.md). lz4 compresses faster and reads back
faster, at a slightly lower ratio. Rows stored before keep their method; PostgreSQL reads
both.

Only on PostgreSQL 14 and later, built with lz4 (Debian's and the official images are):
elsewhere the migration changes nothing. SQLite does not compress."""

from django.db import migrations

COLUMNS = [("annotate_source", "text"), ("annotate_summary", "text")]


def _lz4_available(cursor) -> bool:
    cursor.execute("SELECT current_setting('server_version_num')::int >= 140000")
    if not cursor.fetchone()[0]:
        return False
    # built without lz4, PostgreSQL refuses the method: try it in a savepoint
    cursor.execute("SAVEPOINT lz4_probe")
    try:
        cursor.execute("SET LOCAL default_toast_compression = 'lz4'")
    except Exception:
        cursor.execute("ROLLBACK TO SAVEPOINT lz4_probe")
        return False
    cursor.execute("SET LOCAL default_toast_compression TO DEFAULT")
    cursor.execute("RELEASE SAVEPOINT lz4_probe")
    return True


def _set(schema_editor, method: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        if method == "lz4" and not _lz4_available(cursor):
            return
        for table, column in COLUMNS:
            cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')


def forwards(apps, schema_editor):
    _set(schema_editor, "lz4")


def backwards(apps, schema_editor):
    _set(schema_editor, "DEFAULT")


class Migration(migrations.Migration):
    dependencies = [("annotate", "0014_sentences_in_the_source_row")]

    operations = [migrations.RunPython(forwards, backwards)]
