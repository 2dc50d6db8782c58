"""Which source licences allow a source's text into a CC BY 4.0 dataset."""

from __future__ import annotations

import re

# --- licences -------------------------------------------------------------------------------

_RESTRICTING = {"NC", "ND", "SA", "NONCOMMERCIAL", "NODERIVS", "NODERIVATIVES", "SHAREALIKE"}


def licence_allows_text(licence: str) -> bool:
    """Whether a source's text may go into a CC BY 4.0 dataset: CC BY of any version
    (also "CC BY (version not stated)" and ported versions), CC0, or public domain.
    NC, ND and SA variants, other licences and a missing licence do not."""
    words = re.findall(r"[A-Z0-9.]+", licence.upper().replace("-", " ").replace("_", " "))
    if not words or _RESTRICTING & set(words):
        return False
    joined = " ".join(words)
    if joined.startswith(("CC BY", "CREATIVE COMMONS ATTRIBUTION")):
        return True
    if words[0] == "CC0" or joined.startswith(("CC 0", "CC ZERO", "PUBLIC DOMAIN", "PDM")):
        return True
    return "PUBLIC DOMAIN" in joined
