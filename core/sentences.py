"""Sentence splitting for scientific text with bracketed citations.

A rule-based splitter, chosen over a statistical one so that it needs no model
download and behaves the same everywhere. The rules that matter here (the LitSumm
authors' splitter got them wrong):
- abbreviations such as "et al.", "e.g.", "i.e.", "vs." and initials ("J. R. R.
  Tolkien", "Smith J. et al.") do not end a sentence, but a capital letter after a
  lowercase word does ("... vitamin D. Supplements ...", "... hepatitis B. It ...");
- decimals and p-values ("p < .001", "0.5") do not end a sentence;
- citations written after the full stop ("... shown. [PMC1][PMC2] Next") stay with
  the sentence they follow;
- line breaks end a sentence (abstract headings sit on their own line).

"""

from __future__ import annotations

import re

# Words whose full stop does not end a sentence. Units ("mg", "min") are left out on
# purpose: in results sections they usually do end one ("... 40 mg.").
ABBREVIATIONS = frozenset(
    """
    al e.g eg i.e ie vs cf approx ca fig figs eq eqs ref refs no nos vol dr mr mrs prof st resp incl
    sp spp var inc ltd dept univ jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k ph.d n.b
    """.split()
)

# A candidate boundary: terminal punctuation, optional closing quotes/brackets, then
# optional citations placed after the stop, then whitespace.
_BOUNDARY = re.compile(r"""[.!?]+["')\]]*(?:\s*(?:\[[^\[\]\s]{1,40}\])+)?(?=\s)""")
# The word right before a stop: letters and inner dots. A match can start only where no
# letter precedes it, so a search over the look-back window fails at once at every
# position inside a word and reads each character about once (without the look-behind,
# it read each word again from every one of its letters: about 20 µs a stop, most of
# the importer's splitting time). \Z, not $: $ also matches before a final newline, which
# took the last word of the line above for the word before a stop that starts a line.
_WORD_BEFORE = re.compile(r"(?<![A-Za-z])([A-Za-z][A-Za-z.]*)\Z")
_LOOKBACK = 64
_NEXT_CHARACTER = re.compile(r"\s*(\S)")
# The word (letters only) right before an initial, separated by spaces alone.
_WORD_BEFORE_INITIAL = re.compile(r"(?<![\w.])([^\W\d_]+)[ \t]+$")
# Lowercase words after which a capital letter and a stop are a person's initial.
_NAME_INTRODUCERS = frozenset(
    """
    a an and as at by cf et for from in of on or per see than the to via vs with
    """.split()
)


def _is_abbreviation(text: str, stop: int) -> bool:
    """True when the full stop at `stop` ends a known abbreviation or an initial."""
    if text[stop] != ".":
        return False
    # Only the last few characters matter; searching from 0 would make a long text
    # quadratic in its number of full stops. The word cannot reach past a space.
    if stop == 0 or not text[stop - 1].isalpha():
        return False
    lower = max(0, stop - _LOOKBACK)
    begin = text.rfind(" ", lower, stop) + 1
    word = text[begin:stop] if begin or not lower else ""
    if word.isalpha() and word.isascii():
        # The common case, a plain word after a space (or at the start): the word the
        # search below would find is all of it, and it has no inner dots.
        start = begin
        if len(word) > 1:
            return word.lower() in ABBREVIATIONS
    else:
        match = _WORD_BEFORE.search(text, max(lower, begin), stop)
        if not match:
            return False
        word = match.group(1)
        if word.lower().rstrip(".") in ABBREVIATIONS or word.lower() in ABBREVIATIONS:
            return True
        start = match.start()
    if len(word) != 1 or not word.isupper():
        return False
    # A single capital letter is an initial ("J. Smith", "Smith J. et al."), unless it
    # names something after a lowercase word: "vitamin D.", "hepatitis B.", "type C."
    # end a sentence. Names follow small words too ("by J. Smith"), so those stay initials.
    before = _WORD_BEFORE_INITIAL.search(text, max(0, start - _LOOKBACK), start)
    if before is None:
        return True
    previous = before.group(1)
    return not previous.islower() or previous in _NAME_INTRODUCERS


def _next_starts_sentence(text: str, pos: int) -> bool:
    """After whitespace at `pos`, does a new sentence plausibly begin?"""
    first = text[pos + 1 : pos + 2]  # the common case: one space, then the next word
    if not first or first.isspace():
        found = _NEXT_CHARACTER.match(text, pos)  # not text[pos:]: a copy per boundary
        if not found:
            return True
        first = found.group(1)
    return first.isupper() or first.isdigit() or first in "\"'([“‘"


def split_spans(text: str) -> list[tuple[int, int]]:
    """Split `text` into sentence spans (start, end), whitespace-trimmed, in order."""
    spans: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", text):
        start = line.start()
        line_end = line.end()
        for match in _BOUNDARY.finditer(text, line.start(), line_end):
            stop = match.start()
            if _is_abbreviation(text, stop) and "[" not in match.group(0):
                continue
            if not _next_starts_sentence(text, match.end()):
                continue
            spans.append((start, match.end()))
            start = match.end()
        spans.append((start, line_end))
    trimmed = []
    for start, end in spans:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            trimmed.append((start, end))
    return trimmed
