"""What a source answers to (no heavy imports: the web pages use it)."""

from __future__ import annotations


def source_identifiers(key: str, external_ids: dict) -> frozenset[str]:
    """Every name a source answers to: its key and its external ids (PMID, PMCID, DOI)."""
    names = {key}
    for value in (external_ids or {}).values():
        if isinstance(value, str | int) and str(value).strip():
            names.add(str(value).strip())
    return frozenset(names)
