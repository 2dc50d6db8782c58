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
# optional citations placed after the stop, then whitespace within the line (any but
# "\n": none reaches across a line break). The look-ahead also captures the first
# character after the whitespace (on this line or a later one), which decides whether a
# new sentence begins there.
_BOUNDARY = re.compile(r"""[.!?]+["')\]]*(?:[^\S\n]*(?:\[[^\[\]\s]{1,40}\])+)?(?=[^\S\n]\s*(\S)?)""")
# Characters that open a sentence besides capitals and digits.
_OPENERS = frozenset("\"'([“‘")
# The word right before a stop: letters and inner dots. A match can start only where no
# letter precedes it, so a search over the look-back window fails at once at every
# position inside a word and reads each character about once (without the look-behind,
# it read each word again from every one of its letters: about 20 µs a stop, most of
# the importer's splitting time). \Z, not $: $ also matches before a final newline, which
# took the last word of the line above for the word before a stop that starts a line.
_WORD_BEFORE = re.compile(r"(?<![A-Za-z])([A-Za-z][A-Za-z.]*)\Z")
_LOOKBACK = 64
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
    if text[stop] != "." or stop == 0 or not text[stop - 1].isalpha():
        return False
    # Only the last few characters matter; searching from 0 would make a long text
    # quadratic in its number of full stops. The word cannot reach past a space.
    lower = stop - _LOOKBACK if stop > _LOOKBACK else 0
    begin = text.rfind(" ", lower, stop) + 1
    word = text[begin:stop] if begin or not lower else ""
    if word.isalpha() and word.isascii():
        # The common case, a plain word after a space (or at the start): the word the
        # search below would find is all of it, and it has no inner dots.
        if len(word) > 1:
            return word.lower() in ABBREVIATIONS
        start = begin
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


def split_spans(text: str) -> list[tuple[int, int]]:
    """Split `text` into sentence spans (start, end), whitespace-trimmed, in order."""
    # The stops are found with str.find (far faster than a regular expression's scan of
    # every character); "!" and "?" are looked for as "." in a copy of the same length.
    probe = text.replace("!", ".").replace("?", ".") if "!" in text or "?" in text else text
    find = probe.find
    match_at = _BOUNDARY.match
    size = len(text)
    spans: list[tuple[int, int]] = []
    append = spans.append
    start = 0
    newline = text.find("\n")
    stop = find(".")
    # Each stop is tried in turn, after the end of the last boundary: the boundaries a scan
    # of the text with _BOUNDARY finds (a boundary can only begin at a stop).
    while stop >= 0:
        if stop + 2 < size and text[stop + 1] == " " and (first := text[stop + 2]) != "[" and not first.isspace():
            # The common case, a lone stop, one space and the next word: the boundary is
            # the stop alone.
            end, after = stop + 1, stop + 2
            cited = False
        else:
            match = match_at(text, stop)
            if match is None:
                stop = find(".", stop + 1)
                continue
            end = after = match.end()
            first = match.group(1)
            cited = "[" in match.group(0)
        # A line break ends a sentence: the lines before this stop are done.
        while 0 <= newline < stop:
            _append_trimmed(text, append, start, newline)
            start = newline + 1
            newline = text.find("\n", start)
        # A new sentence must plausibly begin after the whitespace (nothing after it: yes),
        # and the stop must not end an abbreviation, unless citations follow it.
        if (first is None or first.isupper() or first.isdigit() or first in _OPENERS) and (
            cited or not _is_abbreviation(text, stop)
        ):
            # The span ends on its stop or citation, never on a space; the next one starts
            # at `after` (or later, past more whitespace).
            while text[start].isspace():
                start += 1
            append((start, end))
            start = after
        stop = find(".", end)
    while newline >= 0:
        _append_trimmed(text, append, start, newline)
        start = newline + 1
        newline = text.find("\n", start)
    _append_trimmed(text, append, start, size)
    return spans


def _append_trimmed(text: str, append, start: int, end: int) -> None:
    """Append the span (start, end) without its leading and trailing whitespace, if any
    text is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        append((start, end))
