"""Reading a JSON Lines import file and cleaning each record by its type (no database):
what every field may hold, with the line and field named in every error."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from annotate.models import (
    Claim,
)
from annotate.services.studies import RESERVED_SLUGS
from core.sentences import split_spans
from core.text_validation import MAX_ADMIN_TEXT_CHARS, length_problem
from datasets.pipeline import (
    Fields,
    ImportLineError,
    json_objects,
)

# A summary's pipeline flags (docs/import-format.md, docs/security.md "Limits").
MAX_FLAGS = 100
MAX_FLAG_CHARS = 100

RECORD_TYPES = ("study", "source", "summary", "claim", "finding", "comparison")
SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]+$")
VERDICTS = {choice.value for choice in Claim.Verdict}
NON_COMMERCIAL = re.compile(r"non-?commercial|not permit commercial|no commercial", re.IGNORECASE)


@dataclass
class Record:
    line: int
    type: str
    data: dict[str, Any]


def parse_lines(lines: Iterable[str]) -> Iterator[Record]:
    """Parse and shape-check each line as it comes (no database access)."""
    for number, data in json_objects(lines):
        kind = data.get("type")
        if kind not in RECORD_TYPES:
            raise ImportLineError(number, "type", f"must be one of {', '.join(RECORD_TYPES)}, got {kind!r}")
        yield Record(number, kind, data)


# --- per-type cleaning (no database) ---------------------------------------------------


def _clean_study(f: Fields) -> dict:
    f.unknown_fields({"slug", "title", "rubric", "guidelines", "description", "licence", "assisted"})
    assisted = f.data.get("assisted", False)
    if not isinstance(assisted, bool):
        f.fail("assisted", "must be true or false")
    # Whether the rubric exists is the writer's question (annotate.services.rubrics.rubric_by_key):
    # a built-in file or any rubric stored under that key.
    rubric = f.string("rubric", max_length=64, pattern=SLUG_RE)
    slug = f.string("slug", max_length=100, pattern=SLUG_RE)
    if slug in RESERVED_SLUGS:
        f.fail("slug", f"{slug!r} is the name of a page (/studies/{slug}/); choose another")
    cleaned = {
        "slug": slug,
        "title": f.string("title", max_length=300),
        "rubric": rubric,
        "guidelines": f.string("guidelines", required=False),
        "description": f.string("description", required=False),
        "licence": f.string("licence", required=False, max_length=100),
        "assisted": assisted,
    }
    # The settings the line gives: an existing study keeps every one it leaves out.
    cleaned["given"] = tuple(k for k in ("title", "guidelines", "description", "licence", "assisted") if k in f.data)
    return cleaned


def clean_source(f: Fields) -> dict:
    f.unknown_fields(
        {
            "study",
            "key",
            "title",
            "licence",
            "licence_url",
            "attribution",
            "copyright",
            "external_ids",
            "metadata",
            "sentences",
            "text",
            "ref",
        }
    )
    has_sentences, has_text = "sentences" in f.data, "text" in f.data
    if has_sentences == has_text:
        f.fail("sentences", 'give either "sentences" (a list) or "text" (a plain abstract), not both or neither')
    if has_sentences:
        raw = f.data["sentences"]
        if not isinstance(raw, list) or not raw:
            f.fail("sentences", "must be a non-empty list of {text, ref} objects")
        pieces = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
                f.fail(f"sentences[{i}].text", "must be a non-empty string")
            ref = item.get("ref", "")
            if not isinstance(ref, str) or len(ref) > 100:
                f.fail(f"sentences[{i}].ref", "must be a string of at most 100 characters")
            extra = sorted(set(item) - {"text", "ref"})
            if extra:
                f.fail(f"sentences[{i}].{extra[0]}", "is not a known field of a sentence")
            pieces.append((item["text"].strip(), ref))
        text, sentences, offset = "", [], 0
        for i, (sentence, ref) in enumerate(pieces):
            if i:
                text += " "
                offset += 1
            sentences.append([offset, offset + len(sentence), ref])
            text += sentence
            offset += len(sentence)
        if length_problem(text, "source"):
            f.fail("sentences", length_problem(text, "source"))
    else:
        text = f.string("text")
        if length_problem(text, "source"):  # before splitting it into sentences
            f.fail("text", length_problem(text, "source"))
        ref = f.string("ref", required=False, max_length=100)
        sentences = [[s, e, ref] for s, e in split_spans(text)]
        if not sentences:
            f.fail("text", "has no sentences")
    external_ids = f.mapping("external_ids")
    for k, v in external_ids.items():
        if not isinstance(v, str | int) or isinstance(v, bool):
            f.fail(f"external_ids.{k}", "must be a string or number")
    licence_url = f.string("licence_url", required=False, max_length=500)
    if licence_url and not licence_url.startswith(("http://", "https://")):
        f.fail("licence_url", "must be an http(s) URL")
    return {
        "study": f.string("study", pattern=SLUG_RE),
        "key": f.string("key", max_length=200),
        "title": f.string("title", required=False, max_length=1000),
        "licence": f.string("licence", required=False, max_length=200),
        "licence_url": licence_url,
        "attribution": f.string("attribution", required=False, max_length=MAX_ADMIN_TEXT_CHARS),
        "copyright": f.string("copyright", required=False, max_length=MAX_ADMIN_TEXT_CHARS),
        "external_ids": {k: str(v) for k, v in external_ids.items()},
        "metadata": f.mapping("metadata"),
        "text": text,
        "sentence_spans": sentences,
    }


def _clean_summary(f: Fields) -> dict:
    f.unknown_fields({"study", "source", "key", "text", "generator", "metadata", "flags", "parent"})
    text = f.string("text")
    if length_problem(text, "summary"):
        f.fail("text", length_problem(text, "summary"))
    return {
        "study": f.string("study", pattern=SLUG_RE),
        "source": f.string("source", max_length=200),
        "key": f.string("key", max_length=200),
        "text": text,
        "generator": f.string("generator", max_length=200),
        "metadata": f.mapping("metadata"),
        "flags": f.string_list("flags", max_items=MAX_FLAGS, max_length=MAX_FLAG_CHARS),
        "parent": f.string("parent", required=False, max_length=200),
    }


def _clean_claim(f: Fields) -> dict:
    f.unknown_fields(
        {"study", "summary", "index", "text", "start", "end", "refs", "verdict", "explanation", "probability"}
    )
    start, end = f.integer("start", required=False), f.integer("end", required=False)
    if (start is None) != (end is None):
        f.fail("end" if end is None else "start", "start and end go together")
    if start is not None and start >= end:
        f.fail("end", "must be greater than start")
    verdict = f.data.get("verdict", Claim.Verdict.UNVERIFIED)
    if verdict not in VERDICTS:
        f.fail("verdict", f"must be one of {', '.join(sorted(VERDICTS))}")
    probability = f.data.get("probability")
    if probability is not None and (
        not isinstance(probability, int | float) or isinstance(probability, bool) or not 0 <= probability <= 1
    ):
        f.fail("probability", "must be a number between 0 and 1")
    return {
        "study": f.string("study", pattern=SLUG_RE),
        "summary": f.string("summary", max_length=200),
        "index": f.integer("index"),
        "text": f.string("text"),
        "start": start,
        "end": end,
        "refs": f.string_list("refs"),
        "verdict": verdict,
        "explanation": f.string("explanation", required=False),
        "probability": probability,
    }


def _clean_comparison(f: Fields) -> dict:
    f.unknown_fields({"study", "key", "source", "summaries"})
    summaries = f.string_list("summaries")
    if len(summaries) < 2:
        f.fail("summaries", "must list at least two summary keys to compare")
    if len(set(summaries)) != len(summaries):
        f.fail("summaries", "names a summary twice")
    return {
        "study": f.string("study", pattern=SLUG_RE),
        "key": f.string("key", max_length=200),
        "source": f.string("source", max_length=200),
        "summaries": summaries,
    }


def _clean_finding(f: Fields) -> dict:
    """A result the source reports (what a per-finding question asks about, as the Evidence
    Inference importer makes them): its intervention, comparator, outcome, the reported
    result (`label`) and the evidence span of the source's text. `start` and `end` may be
    left out when the evidence occurs exactly once in the text (found when written)."""
    f.unknown_fields(
        {"study", "source", "index", "external_id", "intervention", "comparator", "outcome", "label", "evidence"}
        | {"start", "end"}
    )
    start, end = f.integer("start", required=False), f.integer("end", required=False)
    if (start is None) != (end is None):
        f.fail("end" if end is None else "start", "start and end go together")
    if start is not None and start >= end:
        f.fail("end", "must be greater than start")
    return {
        "study": f.string("study", pattern=SLUG_RE),
        "source": f.string("source", max_length=200),
        "index": f.integer("index"),
        "external_id": f.string("external_id", required=False, max_length=100),
        "intervention": f.string("intervention"),
        "comparator": f.string("comparator", required=False),
        "outcome": f.string("outcome"),
        "label": f.string("label", required=False, max_length=100),
        "evidence": f.string("evidence"),
        "start": start,
        "end": end,
    }


CLEANERS = {
    "study": _clean_study,
    "source": clean_source,
    "summary": _clean_summary,
    "claim": _clean_claim,
    "finding": _clean_finding,
    "comparison": _clean_comparison,
}
