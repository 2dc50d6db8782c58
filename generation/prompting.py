"""Prompt templates: versioned text files under generation/prompts/.

A template's version is the SHA-256 of its file content, so any edit, even a comma,
gives a new version; every LLMCall records the id and version it was built from, and
the pipeline version (which decides idempotency of runs) includes them all.
Templates use `$name` placeholders (string.Template) so JSON examples inside a
prompt need no escaping.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str

    @property
    def version(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]

    def render(self, **variables: str) -> str:
        # substitute (not safe_substitute): a missing variable is a bug, not a blank.
        return Template(self.text).substitute(**variables)


@cache
def _read(prompt_id: str) -> str:
    path = PROMPT_DIR / f"{prompt_id}.txt"
    return path.read_text(encoding="utf-8")


def get_prompt(prompt_id: str) -> Prompt:
    return Prompt(id=prompt_id, text=_read(prompt_id))


def prompt_versions(prompt_ids: list[str]) -> dict[str, str]:
    return {pid: get_prompt(pid).version for pid in prompt_ids}
