"""A running report is held under a lease its worker renews; one whose lease ran out has
lost its worker and is marked failed when next looked at (analysis.services)."""

from django.db import migrations, models
from django.utils import timezone


def expire_running_reports(apps, schema_editor):
    """Reports running now were claimed without a lease, by workers that the deploy of
    this migration stops: give them a lease that has already run out, so that the next
    look marks them failed (and the next request computes them anew)."""
    AnalysisResult = apps.get_model("analysis", "AnalysisResult")
    now = timezone.now()
    AnalysisResult.objects.filter(status="running").update(claimed_at=now, lease_expires_at=now)


class Migration(migrations.Migration):
    dependencies = [
        ("analysis", "0001_initial"),
        ("annotate", "0005_assisted_condition"),
    ]

    operations = [
        migrations.AddField(
            model_name="analysisresult",
            name="claimed_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When the worker computing it took it (identifies that worker's claim).",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="analysisresult",
            name="lease_expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="While running: the worker counts as gone if it has not renewed by then.",
                null=True,
            ),
        ),
        migrations.RunPython(expire_running_reports, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="analysisresult",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("status", "running"), _negated=True),
                    models.Q(("claimed_at__isnull", False), ("lease_expires_at__isnull", False)),
                    _connector="OR",
                ),
                name="analysis_result_running_has_lease",
            ),
        ),
    ]
