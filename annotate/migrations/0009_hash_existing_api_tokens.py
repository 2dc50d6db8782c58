"""Existing API tokens keep working: each DRF token (stored in clear in authtoken_token)
becomes an ApiToken holding only the SHA-256 of its key, bound to its owner's current
password, with its creation time (so it expires when it would have); then the clear keys
are deleted. Going back cannot restore them: their owners obtain new ones.

DRF's token app is no longer installed, so its table is read by SQL, and only where an
older database still has it; a new database never had it and has nothing to convert.
0017_drop_drf_token_table drops the table."""

import hashlib
from datetime import UTC, datetime

from django.conf import settings
from django.db import migrations
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.dateparse import parse_datetime

DRF_TOKEN_TABLE = "authtoken_token"


def session_auth_hash(password_hash: str) -> str:
    # Django's AbstractBaseUser.get_session_auth_hash (historical models have no methods).
    return salted_hmac(
        "django.contrib.auth.models.AbstractBaseUser.get_session_auth_hash", password_hash, algorithm="sha256"
    ).hexdigest()


def aware(created: datetime | str) -> datetime:
    # SQLite hands a raw cursor the stored UTC time without its zone (or as text).
    if isinstance(created, str):
        created = parse_datetime(created)
    return timezone.make_aware(created, UTC) if timezone.is_naive(created) else created


def hash_existing_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if DRF_TOKEN_TABLE not in connection.introspection.table_names():
        return
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {quote('key')}, {quote('created')}, {quote('user_id')} FROM {quote(DRF_TOKEN_TABLE)}")
        tokens = cursor.fetchall()
    User = apps.get_model(settings.AUTH_USER_MODEL)
    ApiToken = apps.get_model("annotate", "ApiToken")
    passwords = dict(User.objects.filter(pk__in={user_id for *_, user_id in tokens}).values_list("pk", "password"))
    for key, created, user_id in tokens:
        new = ApiToken.objects.create(
            user_id=user_id,
            name="made before tokens were hashed",
            prefix=key[:8],
            digest=hashlib.sha256(key.encode()).hexdigest(),
            password_fingerprint=session_auth_hash(passwords[user_id]),
        )
        ApiToken.objects.filter(pk=new.pk).update(created_at=aware(created))
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {quote(DRF_TOKEN_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0008_api_tokens_hashed_and_login_throttle"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(hash_existing_tokens, migrations.RunPython.noop)]
