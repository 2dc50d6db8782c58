"""Prompt templates: versioned text files under generation/prompts/.

A template's version is the SHA-256 of its file content (and of its answer schema), so
any edit, even a comma, gives a new version; every LLMCall records the id and version it
was built from, and the pipeline version (which decides idempotency of runs) includes
them all. Templates use `$name` placeholders (string.Template) so JSON examples inside a
prompt need no escaping.

A prompt whose answer is JSON declares the JSON Schema of that answer beside it, in
`<id>.schema.json`. The gateway sends it as structured output where the endpoint takes
one (generation.llm); the parsers stay tolerant, since a schema is a request that weak
models and some servers do not keep. Every schema keeps OpenAI's strict rules (every
object lists all its properties as required and allows no others), which vLLM, llama.cpp
and Ollama accept as well.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    schema_text: str = ""  # the answer's JSON Schema as written in <id>.schema.json, or ""

    @property
    def version(self) -> str:
        content = self.text if not self.schema_text else f"{self.text}\n{self.schema_text}"
        return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]

    @property
    def schema(self) -> dict | None:
        """The JSON Schema of the answer, or None for a prompt answered in prose."""
        return json.loads(self.schema_text) if self.schema_text else None

    @property
    def asks_for_json(self) -> bool:
        """Whether the prompt's own words ask for JSON (OpenAI's JSON mode refuses a
        request whose messages never say "JSON")."""
        return "JSON" in self.text

    def render(self, **variables: str) -> str:
        # substitute (not safe_substitute): a missing variable is a bug, not a blank.
        return Template(self.text).substitute(**variables)


@cache
def _read(prompt_id: str) -> tuple[str, str]:
    path = PROMPT_DIR / f"{prompt_id}.txt"
    schema = PROMPT_DIR / f"{prompt_id}.schema.json"
    return path.read_text(encoding="utf-8"), schema.read_text(encoding="utf-8") if schema.exists() else ""


def get_prompt(prompt_id: str) -> Prompt:
    text, schema = _read(prompt_id)
    return Prompt(id=prompt_id, text=text, schema_text=schema)


def prompt_versions(prompt_ids: list[str]) -> dict[str, str]:
    return {pid: get_prompt(pid).version for pid in prompt_ids}


def schema_problem(schema: dict, where: str = "answer") -> str | None:
    """Why `schema` breaks OpenAI's strict structured-output rules, or None: every object
    must list all its properties as required and set additionalProperties to false.
    (A schema that broke them would make OpenAI refuse the request, and the gateway would
    then stop asking that endpoint for schemas at all.)"""
    stack = [(schema, where)]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, dict):
            continue
        types = node.get("type")
        types = types if isinstance(types, list) else [types]
        if "object" in types:
            properties = node.get("properties", {})
            if node.get("additionalProperties") is not False:
                return f"{path}: an object must set additionalProperties to false"
            if sorted(node.get("required", [])) != sorted(properties):
                return f"{path}: an object must list every property as required"
            stack.extend((child, f"{path}.{key}") for key, child in properties.items())
        if "array" in types:
            stack.append((node.get("items"), f"{path}[]"))
        for key in ("anyOf",):
            stack.extend((child, f"{path}|{i}") for i, child in enumerate(node.get(key, [])))
    return None
