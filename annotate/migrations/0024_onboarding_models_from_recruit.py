# The onboarding models come over from recruit (recruit/migrations/0004): only Django's
# state changes, and the tables keep their names (db_table), so no row moves. The content
# types follow, so the permissions given on them (the admin site's) keep working.

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("onboarding", "consentversion", "consentdecision", "onboardingrecord")


def relabel_content_types(apps, schema_editor, source="recruit", target="annotate"):
    content_type = apps.get_model("contenttypes", "ContentType")
    taken = set(content_type.objects.filter(app_label=target, model__in=MOVED).values_list("model", flat=True))
    content_type.objects.filter(app_label=source, model__in=set(MOVED) - taken).update(app_label=target)


def relabel_content_types_back(apps, schema_editor):
    relabel_content_types(apps, schema_editor, source="annotate", target="recruit")


class Migration(migrations.Migration):

    dependencies = [
        ("annotate", "0023_study_language"),
        ("recruit", "0004_onboarding_models_move_to_annotate"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Onboarding",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "instructions",
                            models.TextField(blank=True, help_text="Opened and acknowledged before the first item."),
                        ),
                        ("questionnaire", models.JSONField(blank=True, default=list)),
                        (
                            "study",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="onboarding",
                                to="annotate.study",
                            ),
                        ),
                    ],
                    options={"db_table": "recruit_onboarding"},
                ),
                migrations.CreateModel(
                    name="ConsentVersion",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("uuid", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("number", models.PositiveIntegerField()),
                        ("text", models.TextField()),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "study",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="consent_versions",
                                to="annotate.study",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["study", "number"],
                        "db_table": "recruit_consentversion",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("study", "number"), name="consent_version_unique_study_number"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("number__gte", 1)), name="consent_version_number_positive"
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ConsentDecision",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("uuid", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("accepted", models.BooleanField()),
                        (
                            "rater",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="consent_decisions",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "study",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="consent_decisions",
                                to="annotate.study",
                            ),
                        ),
                        (
                            "version",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="decisions",
                                to="annotate.consentversion",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["study", "rater", "created_at", "pk"],
                        "db_table": "recruit_consentdecision",
                    },
                ),
                migrations.CreateModel(
                    name="OnboardingRecord",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("uuid", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("instructions_opened_at", models.DateTimeField(blank=True, null=True)),
                        ("instructions_acknowledged_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "answers",
                            models.JSONField(blank=True, help_text="Questionnaire key -> answer.", null=True),
                        ),
                        ("answered_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "rater",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="onboarding_records",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "study",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="onboarding_records",
                                to="annotate.study",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["study", "created_at"],
                        "db_table": "recruit_onboardingrecord",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("study", "rater"), name="onboarding_record_unique_study_rater"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("instructions_acknowledged_at__isnull", True),
                                    ("instructions_opened_at__isnull", False),
                                    _connector="OR",
                                ),
                                name="onboarding_acknowledged_after_opened",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel_content_types, relabel_content_types_back),
    ]
