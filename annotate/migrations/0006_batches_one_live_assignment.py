"""One live assignment per (summary, rater).

Before the constraint, databases could hold a rater's duplicate assignments of one
summary (a batch built with "Rated: Any" gave raters summaries they already had). The
data step keeps one of each such set live and WITHDRAWS the others, deleting nothing:
their revisions and answers stay stored, and the answer that counts is chosen as before
(annotate.selectors.counting). The one kept is the one with the most work: a submitted
revision first (the newest submitted), then one in progress, then the oldest.
"""

from django.conf import settings
from django.db import migrations, models
from django.db.models import Count, F, Max
from django.utils import timezone


def withdraw_duplicates(apps, schema_editor):
    Assignment = apps.get_model("annotate", "Assignment")
    live = Assignment.objects.exclude(state="withdrawn")
    duplicated = live.values("summary_id", "rater_id").annotate(n=Count("id")).filter(n__gt=1)
    now = timezone.now()
    for pair in duplicated.iterator():
        rows = list(
            live.filter(summary_id=pair["summary_id"], rater_id=pair["rater_id"]).annotate(
                last_submitted=Max("revisions__submitted_at")
            )
        )

        def work(a):
            submitted = a.last_submitted is not None
            return (submitted, a.last_submitted or now, a.state == "in_progress", -a.pk)

        keep = max(rows, key=work)
        Assignment.objects.filter(pk__in=[a.pk for a in rows if a.pk != keep.pk]).update(
            state="withdrawn", withdrawn_at=now, version=F("version") + 1, updated_at=now
        )


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0005_assisted_condition"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(withdraw_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="assignment",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "withdrawn"), _negated=True),
                fields=("summary", "rater"),
                name="assignment_one_live_per_summary_rater",
            ),
        ),
    ]
