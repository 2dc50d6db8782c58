"""What the recruit services share: a refused field's error, the shape of a panel's ids."""

from __future__ import annotations

import re

from core.exceptions import ApplicationError

# Panel identifiers: Prolific's are 24 hex digits; other panels use similar tokens. Anything
# else (spaces, markup, very long values) is refused with a 400 naming the parameter.
PANEL_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")


def invalid_field(field: str, message: str) -> ApplicationError:
    """The 400 naming the field; the caller raises it."""
    return ApplicationError(f"{field}: {message}", extra={"fields": {field: message}})
