"""DRF's token app (rest_framework.authtoken) is no longer installed: its clear-text
tokens authenticated no one since 0009_hash_existing_api_tokens moved them to ApiToken.
Its table goes, where an older database still has it, and so do the content types and
permissions of its models (what `manage.py remove_stale_contenttypes` would delete), so
that no permission list offers rights over models that no longer exist. Going back
restores nothing."""

from django.db import migrations

DRF_TOKEN_TABLE = "authtoken_token"


def drop_drf_token_table(apps, schema_editor):
    connection = schema_editor.connection
    if DRF_TOKEN_TABLE in connection.introspection.table_names():
        schema_editor.execute(f"DROP TABLE {schema_editor.quote_name(DRF_TOKEN_TABLE)}")
    # Deleting a content type deletes its permissions, and their grants to users and groups.
    apps.get_model("contenttypes", "ContentType").objects.filter(app_label="authtoken").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0016_no_second_study_index"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(drop_drf_token_table, migrations.RunPython.noop)]
