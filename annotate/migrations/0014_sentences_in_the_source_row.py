"""A source's sentences move from a row each (SourceSentence) into one JSON value of the
source's own row, Source.sentence_spans: [start, end, ref] per sentence, in order (issue
30). The sentence texts were copies of the source text's spans and are not kept; the
data migration checks that each one was its span, and stops (changing nothing) if not."""

from django.db import migrations, models

BATCH = 500


def rows_to_spans(apps, schema_editor):
    Source = apps.get_model("annotate", "Source")
    SourceSentence = apps.get_model("annotate", "SourceSentence")
    ids = list(Source.objects.order_by("pk").values_list("pk", flat=True))
    for first in range(0, len(ids), BATCH):
        batch = ids[first : first + BATCH]
        spans: dict[int, list] = {pk: [] for pk in batch}
        texts = dict(Source.objects.filter(pk__in=batch).values_list("pk", "text"))
        for source_id, start, end, text, ref in (
            SourceSentence.objects.filter(source_id__in=batch)
            .order_by("source_id", "index")
            .values_list("source_id", "start", "end", "text", "ref")
        ):
            if texts[source_id][start:end] != text:
                raise RuntimeError(
                    f"source {source_id}: the sentence at {start}-{end} is not that span of the source's text; "
                    "nothing was changed"
                )
            spans[source_id].append([start, end, ref])
        changed = [Source(pk=pk, sentence_spans=value) for pk, value in spans.items() if value]
        Source.objects.bulk_update(changed, ["sentence_spans"], batch_size=BATCH)


def spans_to_rows(apps, schema_editor):
    Source = apps.get_model("annotate", "Source")
    SourceSentence = apps.get_model("annotate", "SourceSentence")
    rows = []
    for source in Source.objects.order_by("pk").only("pk", "text", "sentence_spans").iterator(chunk_size=BATCH):
        for index, (start, end, ref) in enumerate(source.sentence_spans):
            rows.append(
                SourceSentence(
                    source_id=source.pk, index=index, start=start, end=end, text=source.text[start:end], ref=ref
                )
            )
        if len(rows) >= 5000:
            SourceSentence.objects.bulk_create(rows, batch_size=BATCH)
            rows = []
    SourceSentence.objects.bulk_create(rows, batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0013_monitoring_and_flags"),
    ]

    operations = [
        migrations.AddField(
            model_name="source",
            name="sentence_spans",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="[start, end, ref] per sentence: character spans of text, in order.",
            ),
        ),
        migrations.RunPython(rows_to_spans, spans_to_rows),
        migrations.DeleteModel(name="SourceSentence"),
    ]
