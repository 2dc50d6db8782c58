"""Existing API tokens keep working: each DRF token (stored in clear in authtoken_token)
becomes an ApiToken holding only the SHA-256 of its key, bound to its owner's current
password, with its creation time (so it expires when it would have); then the clear keys
are deleted. Going back cannot restore them: their owners obtain new ones."""

import hashlib

from django.conf import settings
from django.db import migrations
from django.utils.crypto import salted_hmac


def session_auth_hash(password_hash: str) -> str:
    # Django's AbstractBaseUser.get_session_auth_hash (historical models have no methods).
    return salted_hmac(
        "django.contrib.auth.models.AbstractBaseUser.get_session_auth_hash", password_hash, algorithm="sha256"
    ).hexdigest()


def hash_existing_tokens(apps, schema_editor):
    Token = apps.get_model("authtoken", "Token")
    ApiToken = apps.get_model("annotate", "ApiToken")
    for old in Token.objects.select_related("user").iterator():
        new = ApiToken.objects.create(
            user_id=old.user_id,
            name="made before tokens were hashed",
            prefix=old.key[:8],
            digest=hashlib.sha256(old.key.encode()).hexdigest(),
            password_fingerprint=session_auth_hash(old.user.password),
        )
        ApiToken.objects.filter(pk=new.pk).update(created_at=old.created)
    Token.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0008_api_tokens_hashed_and_login_throttle"),
        ("authtoken", "0003_tokenproxy"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(hash_existing_tokens, migrations.RunPython.noop)]
