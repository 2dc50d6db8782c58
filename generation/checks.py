"""LitSumm's five reference checks, as pure functions over text.

Sentences come from annotate.text.split_spans (abbreviations such as "et al." and
"e.g." do not end a sentence; citations after the stop stay with their sentence).
A reference is one identifier inside square brackets: `[PMC1][PMC2].` cites two,
and so does `[PMC1, PMC2]` (one bracket holding two).

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
from dataclasses import dataclass, field

from annotate.text import split_spans

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
_ENDS_WITH_REF = re.compile(r"\][.!?;:]?[\"')]*\s*$")
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


def cited_refs(text: str) -> list[str]:
    """Every cited identifier in `text`, in order, repeats kept."""
    return [ref for match in BRACKET.finditer(text) for ref in bracket_ids(match.group(1))]


def context_refs(text: str) -> set[str]:
    """The identifiers a context cites (a context file: sentences ending in [ref])."""
    return set(cited_refs(text))


def check_references(summary: str, known_refs: set[str]) -> ReferenceReport:
    spans = split_spans(summary)
    sentences = [summary[start:end] for start, end in spans]
    brackets = [bracket_ids(m.group(1)) for m in BRACKET.finditer(summary)]
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

    ending = sum(1 for s in sentences if _ENDS_WITH_REF.search(s))
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
