"""Whether a model's answer means anything: checks of meaning, after the checks of shape.

A well-formed answer can still be empty of meaning: the prompt's own placeholder sent
back (`{"synthesis": "...", "tldr": "..."}`), a copy of the prompt's example, a "claim"
that is only a reference ("PMC1087853") or a measurement ("10 dB"). Such an answer is
unusable with its reason in words: it is never verified, scored or stored as ok.

Pure functions over text; the steps that read answers (generation.pipelines,
generation.questions, generation.evaluators) call them.
"""

from __future__ import annotations

import re
from functools import cache

from generation.answer_text import excerpt
from generation.prompting import get_prompt

# Function words, and the words of an answer that says nothing about the world ("yes",
# "none", "unknown"): a claim made only of these has nothing to check.
_STOP = frozenset(
    """
    a about above after again against all also am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just me more most my no
    nor not now of off on once only or other our ours out over own same she should so some such than
    that the their theirs them then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yes none
    null unknown etc true false text claim claims statement summary answer example placeholder
    """.split()
)
# Units and their abbreviations: "10 dB" or "5 mg/kg" states no fact without its subject.
_UNITS = frozenset(
    """
    db mg kg mcg ml mmhg mmol mol cm mm km sec min hrs hour hours day days week weeks month months
    year years iu bpm kcal percent per
    """.split()
)
_WORD = re.compile(r"[^\W\d_][^\W\d_'-]*[^\W\d_]|[^\W\d_]")
# What an id looks like (the cited reference itself is no content): PMC123, PMID: 123, doi:10.x/y.
_IDS = re.compile(r"\bPMC\d+\b|\bPMID\s*:?\s*\d+\b|\b(?:doi:\s*)?10\.\d{4,9}/\S+", re.IGNORECASE)
_BRACKETS = re.compile(r"\[[^\]]*\]")
_QUOTED = re.compile(r'"([^"\n$]{1,200})"')
_TRIM = " \t\r\n.,;:!?\"'`()[]{}<>*_-–—…/\\|"


def content_words(text: str) -> list[str]:
    """The words of `text` that can carry a fact: at least two letters, not a function
    word, a unit or part of a citation id or bracket."""
    bare = _IDS.sub(" ", _BRACKETS.sub(" ", text))
    return [w for w in _WORD.findall(bare) if len(w) >= 2 and w.lower() not in _STOP and w.lower() not in _UNITS]


def _normal(text: str) -> str:
    return " ".join(_BRACKETS.sub(" ", text).split()).strip(_TRIM).lower()


@cache
def prompt_examples(prompt_id: str) -> frozenset[str]:
    """The example texts a prompt shows (each double-quoted text of its template, such as
    the `"..."` of its JSON shape or its sample sentence), normalised for comparison."""
    found = {_normal(m.group(1)) for m in _QUOTED.finditer(get_prompt(prompt_id).text)}
    return frozenset(found - {""})


def placeholder_problem(text: str, *, prompt_id: str | None = None, what: str = "answer") -> str:
    """Why `text` is a placeholder rather than an answer ("" when it is not): empty after
    stripping, only punctuation (`...`, `…`, `-`), or a copy of the prompt's own example."""
    if not text.strip():
        return f"the {what} was empty"
    if not text.strip(_TRIM):
        return f"the {what} was only a placeholder ({excerpt(text)})"
    if prompt_id is not None and _normal(text) in prompt_examples(prompt_id):
        return f"the {what} copied the prompt's own example ({excerpt(text)})"
    return ""


def meaning_problem(text: str, *, prompt_id: str | None = None, what: str = "answer") -> str:
    """Why `text` states nothing ("" when it does): a placeholder, or no content word
    (only a reference such as "PMC1087853", a number and unit such as "10 dB", "Yes.")."""
    problem = placeholder_problem(text, prompt_id=prompt_id, what=what)
    if problem:
        return problem
    if not content_words(text):
        return f"the {what} had no content words ({excerpt(text)})"
    return ""
