"""A source's and a summary's study key lose their own index: the
unique (study, key) index starts with it and answers the same lookups, so each new row had
two indexes to update for one use. SQLite rebuilds the two tables, as it does for any
altered field."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0015_lz4_for_source_and_summary_texts"),
    ]

    operations = [
        migrations.AlterField(
            model_name="source",
            name="study",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name="sources", to="annotate.study"
            ),
        ),
        migrations.AlterField(
            model_name="summary",
            name="study",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="summaries",
                to="annotate.study",
            ),
        ),
    ]
