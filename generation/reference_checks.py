"""LitSumm's five reference checks, as pure functions over text.

Sentences come from core.sentences.split_spans (abbreviations such as "et al." and
"e.g." do not end a sentence; citations after the stop stay with their sentence).
A reference is one identifier inside square brackets: `[PMC1][PMC2].` cites two,
and so does `[PMC1, PMC2]` (one bracket holding two). Only brackets that hold a
citation id count: a PMCID, a PMID, a DOI, an id the context itself uses, or a number
or numeric range (`[1]`, `[1,2]`, `[1-3]`: found so that the format check can fail
them). Square brackets are also chemistry and editing (`[Ca2+]`, `[3H]thymidine`,
`[sic]`), and those are not references.

The thresholds are the paper's:
1. adequate: at least 0.5 references per sentence;
2. format: every cited identifier is a PMCID (or an id the context itself uses),
   never a number such as [1];
3. real: every cited identifier appears in the context;
4. location: at least half of the sentences end with a bracketed reference;
5. max_share: no single bracket holds more than 50% of all references.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from core.sentences import split_spans

CHECKS = ("adequate", "format", "real", "location", "max_share")
# The order in which failures are rescued: a numbered citation is also "not in the
# context", but the format rescue is the one that fixes it; references must be real
# before counting them makes sense.
RESCUE_ORDER = ("format", "real", "adequate", "location", "max_share")

MIN_REFS_PER_SENTENCE = 0.5
MIN_SENTENCES_ENDING_WITH_REF = 0.5
MAX_SHARE_PER_BRACKET = 0.5

BRACKET = re.compile(r"\[([^\[\]]*)\]")
PMCID = re.compile(r"^PMC\d+$")
# What a citation id looks like, besides the context's own ids.
_CITATION_ID = re.compile(
    r"""
    PMC\d+                                          # PMCID
    | PMID\s*:?\s*\d+                                # PMID
    | (?:doi\s*:\s*|https?://(?:dx\.)?doi\.org/)?10\.\d{4,9}/\S+   # DOI
    | \d+(?:\s*[-–]\s*\d+)?                           # numbered: [1], [1-3]
    """,
    re.IGNORECASE | re.VERBOSE,
)
_NUMBERED = re.compile(r"\d+(?:\s*[-–]\s*\d+)?")
# The brackets that close a sentence: before its stop ("x [PMC1][PMC2].") or after it
# ("x. [PMC1]").
_TRAILING_BRACKETS = re.compile(r"((?:\[[^\[\]]*\]\s*)+)[.!?;:]?[\"')]*\s*$")
_SEPARATOR = re.compile(r"\s*[,;]\s*")


@dataclass(frozen=True)
class Problem:
    check: str
    message: str

    def as_dict(self) -> dict:
        return {"check": self.check, "message": self.message}


@dataclass(frozen=True)
class ReferenceReport:
    sentences: int
    references: int
    checks: dict[str, bool]
    problems: list[Problem] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(self.checks.values())

    @property
    def failed(self) -> list[str]:
        return [name for name in RESCUE_ORDER if not self.checks[name]]

    def as_dict(self) -> dict:
        return {
            "sentences": self.sentences,
            "references": self.references,
            "checks": dict(self.checks),
            "passed": self.passed,
            "problems": [p.as_dict() for p in self.problems],
        }


def bracket_ids(content: str) -> list[str]:
    return [part for part in _SEPARATOR.split(content.strip()) if part]


def is_citation(ids: list[str], known: Collection[str] = ()) -> bool:
    """Whether a bracket holding `ids` is a citation: one of them is a PMCID, PMID,
    DOI, number or numeric range, or an id in `known`. All its ids then count, so a
    malformed id next to a good one is still reported."""
    return any(i in known or _CITATION_ID.fullmatch(i) for i in ids)


def reference_brackets(text: str, known: Collection[str] = ()) -> list[list[str]]:
    """The ids of every citation bracket in `text`, one list per bracket, in order."""
    brackets = (bracket_ids(m.group(1)) for m in BRACKET.finditer(text))
    return [ids for ids in brackets if ids and is_citation(ids, known)]


def cited_refs(text: str, known: Collection[str] = ()) -> list[str]:
    """Every cited identifier in `text`, in order, repeats kept. `known` are the
    context's ids, which count whatever they look like."""
    return [ref for ids in reference_brackets(text, known) for ref in ids]


def _trailing_ids(sentence: str) -> list[str]:
    match = _TRAILING_BRACKETS.search(sentence)
    if not match:
        return []
    return [ref for m in BRACKET.finditer(match.group(1)) for ref in bracket_ids(m.group(1))]


def ends_with_reference(sentence: str, known: Collection[str] = ()) -> bool:
    ids = _trailing_ids(sentence)
    return bool(ids) and is_citation(ids, known)


def context_refs(text: str) -> set[str]:
    """The identifiers a context cites (a context file: sentences ending in [ref]).

    A sentence's last bracket is its reference, whatever it looks like (a source's key
    can be its id). Elsewhere only PMCIDs, PMIDs and DOIs count: a number such as [12]
    inside a source sentence must not make a summary's [12] look real.
    """
    refs = {ref for ids in reference_brackets(text) for ref in ids if not _NUMBERED.fullmatch(ref)}
    for start, end in split_spans(text):
        match = _TRAILING_BRACKETS.search(text, start, end)
        if match:
            last = list(BRACKET.finditer(match.group(1)))[-1]
            refs.update(bracket_ids(last.group(1)))
    return refs


def check_references(summary: str, known_refs: set[str]) -> ReferenceReport:
    spans = split_spans(summary)
    sentences = [summary[start:end] for start, end in spans]
    brackets = reference_brackets(summary, known_refs)
    refs = [ref for ids in brackets for ref in ids]
    problems: list[Problem] = []

    n_sentences, n_refs = len(sentences), len(refs)
    adequate = n_sentences > 0 and n_refs / n_sentences >= MIN_REFS_PER_SENTENCE
    if not adequate:
        problems.append(
            Problem("adequate", f"{n_refs} reference(s) for {n_sentences} sentence(s); at least one per two needed")
        )

    badly_formatted = sorted({r for r in refs if not (PMCID.match(r) or r in known_refs)})
    if badly_formatted:
        problems.append(Problem("format", "not a PMCID: " + ", ".join(f"[{r}]" for r in badly_formatted)))

    unknown = sorted({r for r in refs if r not in known_refs})
    real = not unknown
    if unknown:
        problems.append(Problem("real", "not in the context: " + ", ".join(unknown)))

    ending = sum(1 for s in sentences if ends_with_reference(s, known_refs))
    location = n_sentences > 0 and ending / n_sentences >= MIN_SENTENCES_ENDING_WITH_REF
    if not location:
        problems.append(Problem("location", f"{ending} of {n_sentences} sentence(s) end with a reference"))

    # A bracket with a single id cannot be "many ids in one pair of brackets": a
    # one-reference summary would otherwise always fail (1 of 1 = 100%).
    crowded = [ids for ids in brackets if len(ids) > 1 and len(ids) / n_refs > MAX_SHARE_PER_BRACKET]
    if crowded:
        problems.append(
            Problem(
                "max_share", f"one bracket holds {len(crowded[0])} of {n_refs} references: [{', '.join(crowded[0])}]"
            )
        )

    return ReferenceReport(
        sentences=n_sentences,
        references=n_refs,
        checks={
            "adequate": adequate,
            "format": not badly_formatted,
            "real": real,
            "location": location,
            "max_share": not crowded,
        },
        problems=problems,
    )
