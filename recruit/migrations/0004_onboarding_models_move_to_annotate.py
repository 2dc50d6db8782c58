# The onboarding models (Onboarding, ConsentVersion, ConsentDecision, OnboardingRecord) are
# annotate's now (annotate/migrations/0024_onboarding_models_from_recruit.py). Only
# Django's state changes: the tables stay where they are, with their rows, under their names.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("recruit", "0003_link_changes_panel_calls_and_bonuses"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ConsentDecision"),
                migrations.DeleteModel(name="OnboardingRecord"),
                migrations.DeleteModel(name="Onboarding"),
                migrations.DeleteModel(name="ConsentVersion"),
            ],
            database_operations=[],
        ),
    ]
