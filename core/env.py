"""Typed readers of environment variables: the one place that parses them.

config/settings.py and config/gunicorn.conf.py read the platform's variables once, at
start-up; generation/conf.py, analysis/conf.py and literature's NCBI client read theirs
when asked (so a worker or a test sees a changed environment on the next call). All go
through these helpers, so a variable is read the same way
wherever it is read: surrounding whitespace is ignored, an unset or blank variable
means the default, and a value that cannot be read is an ImproperlyConfigured that
names the variable. Every variable is documented in .env.example.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def env_str(name: str, default: str = "") -> str:
    return _raw(name) or default


def env_bool(name: str, default: bool = False) -> bool:
    raw = _raw(name)
    if not raw:
        return default
    if raw.lower() in TRUE:
        return True
    if raw.lower() in FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = _raw(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, positive: bool = False) -> float:
    """A number; with `positive`, one above zero (a duration, a rate)."""
    raw = _raw(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if positive and not value > 0:
        raise ImproperlyConfigured(f"{name} must be positive, got {raw!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; empty items are dropped."""
    raw = _raw(name)
    if not raw:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def local_secret_key(path: Path) -> str:
    """This machine's development secret key, generated on first use into `path` (0600).

    Two processes starting at once both try to create the file exclusively; the loser
    reads the winner's key, so every process of the machine signs with the same key.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = ""
        for _ in range(50):  # the winner may not have written it yet
            key = path.read_text(encoding="ascii").strip()
            if key:
                return key
            time.sleep(0.02)
        raise ImproperlyConfigured(f"{path} is empty: delete it or set SECRET_KEY.") from None
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return local_secret_key(path)
    key = secrets.token_urlsafe(50)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(key + "\n")
    return key
