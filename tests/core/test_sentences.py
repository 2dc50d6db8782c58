"""The splitter's rules (core.sentences): worked examples, and properties that hold for
any text, checked on random texts made of the characters and words the rules look at."""

import random

import pytest

from core import sentences


@pytest.fixture
def split_spans():
    return sentences.split_spans


def split_sentences(split_spans, text: str) -> list[str]:
    return [text[start:end] for start, end in split_spans(text)]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Smith et al. showed it [PMC1]. It works [PMC2].", ["Smith et al. showed it [PMC1].", "It works [PMC2]."]),
        ("Some cases, e.g. tumours, vs. controls. Next one.", ["Some cases, e.g. tumours, vs. controls.", "Next one."]),
        ("Significant (p < .001) and 0.5 mg. Then more.", ["Significant (p < .001) and 0.5 mg.", "Then more."]),
        ("Two refs [PMC1][PMC2]. Next.", ["Two refs [PMC1][PMC2].", "Next."]),
        ("Cited after the stop. [PMC1] Next sentence.", ["Cited after the stop. [PMC1]", "Next sentence."]),
        ("As J. Smith wrote. Fine.", ["As J. Smith wrote.", "Fine."]),
        ("HEADING:\nFirst line. Second!\n\nThird?", ["HEADING:", "First line.", "Second!", "Third?"]),
        ("Approx. five units were given, i.e. a low dose.", ["Approx. five units were given, i.e. a low dose."]),
        ("No final stop", ["No final stop"]),
        ("Déjà vu est là. Ça marche.", ["Déjà vu est là.", "Ça marche."]),
    ],
)
def test_split_sentences(text, expected, split_spans):
    assert split_sentences(split_spans, text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        # A capital letter after a lowercase word names a thing, and the stop ends the sentence.
        (
            "Patients took vitamin D. Supplements were stopped.",
            ["Patients took vitamin D.", "Supplements were stopped."],
        ),
        ("Most had hepatitis B. It was chronic.", ["Most had hepatitis B.", "It was chronic."]),
        ("They were in group A. The rest were in group B.", ["They were in group A.", "The rest were in group B."]),
        ("Some had diabetes type C. Others had none.", ["Some had diabetes type C.", "Others had none."]),
        ("Vaccinated against hepatitis B. [PMC1] Next.", ["Vaccinated against hepatitis B. [PMC1]", "Next."]),
    ],
)
def test_a_capital_letter_after_a_lowercase_word_ends_a_sentence(text, expected, split_spans):
    assert split_sentences(split_spans, text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("As J. Smith wrote. Fine.", ["As J. Smith wrote.", "Fine."]),
        ("J. R. R. Tolkien wrote it. Next.", ["J. R. R. Tolkien wrote it.", "Next."]),
        ("Smith J. et al. found it [PMC1]. Next.", ["Smith J. et al. found it [PMC1].", "Next."]),
        (
            "It was shown by J. Smith and by A. B. Jones. Next.",
            ["It was shown by J. Smith and by A. B. Jones.", "Next."],
        ),
        ("Dr. A. Smith agreed. Next.", ["Dr. A. Smith agreed.", "Next."]),
        (
            "See Fig. 2 for details, e.g. doses, i.e. all. Next.",
            ["See Fig. 2 for details, e.g. doses, i.e. all.", "Next."],
        ),
        ("Drug A vs. placebo was tested. Next.", ["Drug A vs. placebo was tested.", "Next."]),
        ("Taken with vitamin D. coli was absent.", ["Taken with vitamin D. coli was absent."]),
        ("Both agreed [PMC1][PMC2]. Next.", ["Both agreed [PMC1][PMC2].", "Next."]),
    ],
)
def test_initials_and_abbreviations_still_do_not_end_a_sentence(text, expected, split_spans):
    assert split_sentences(split_spans, text) == expected


def test_spans_are_exact_offsets_into_the_text(split_spans):
    text = "  Első mondat [PMC1].  Második, e.g. ez [PMC2].\nHarmadik."
    spans = split_spans(text)
    assert [text[s:e] for s, e in spans] == ["Első mondat [PMC1].", "Második, e.g. ez [PMC2].", "Harmadik."]
    assert all(s < e for s, e in spans)


@pytest.mark.parametrize("above", ["Plain words", "Smith et al.", "See e.g."])
def test_a_line_is_split_the_same_whatever_the_line_above_ends_with(above, split_spans):
    """A stop that starts a line has no word before it: the last word of the line above
    (here an abbreviation) must not make it one (it did, through a regex's `$`)."""
    line = ". Stray stop first. Then a sentence."
    text = f"{above}\n{line}"
    offset = len(above) + 1
    spans = [(s - offset, e - offset) for s, e in split_spans(text) if s >= offset]
    assert spans == split_spans(line)
    assert [line[s:e] for s, e in spans] == [".", "Stray stop first.", "Then a sentence."]


def test_the_word_before_a_stop_is_found_within_its_own_word_only(split_spans):
    """The look-back reads only the word before each stop: a long run of letters and dots
    before a stop is one word (not an abbreviation), and the abbreviations still hold."""
    text = "x" * 200 + ". Next one. Data (e.g. rates) fell. Done."
    assert split_sentences(split_spans, text) == ["x" * 200 + ".", "Next one.", "Data (e.g. rates) fell.", "Done."]


@pytest.mark.parametrize(
    "text,expected",
    [
        # The word before the stop at the very start of the text (no space before it).
        ("Dr. Smith came. Then left.", ["Dr. Smith came.", "Then left."]),
        ("Ended. Then left.", ["Ended.", "Then left."]),
        # A word with inner dots or other characters goes through the full search.
        ("In the U.S. Army. Fine.", ["In the U.S. Army.", "Fine."]),
        ("It was (cf. Fig. 2) clear. Next.", ["It was (cf. Fig. 2) clear.", "Next."]),
        ("Il a dit café. Puis parti.", ["Il a dit café.", "Puis parti."]),
        # More than one space, a tab or a no-break space after the stop: the next
        # character is found past all of them.
        ("It ended.  Then more.", ["It ended.", "Then more."]),
        ("It ended.\tthen more.", ["It ended.\tthen more."]),
        ("It ended.\u00a0 Then more.", ["It ended.", "Then more."]),
        ("It ended. \u00a0then more.", ["It ended. \u00a0then more."]),
        # A word longer than the look-back (64 characters) before a stop.
        ("x" * 70 + ". Then more.", ["x" * 70 + ".", "Then more."]),
        ("By " + "y" * 70 + " J. Smith.", ["By " + "y" * 70 + " J. Smith."]),
    ],
)
def test_the_common_case_shortcuts_split_as_the_full_search(text, expected, split_spans):
    """The splitter reads a plain word after a space and a single space after a stop
    without its regular expressions; these texts go through both the short
    paths and the full ones, and each expected split is worked by hand from the rules in
    the module's docstring."""
    assert split_sentences(split_spans, text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Really? Yes! It works. Next.", ["Really?", "Yes!", "It works.", "Next."]),
        ("Wait... What?! Go.", ["Wait...", "What?!", "Go."]),
        ("Is it? [PMC2] Yes.", ["Is it? [PMC2]", "Yes."]),
        ('He said "Stop." Then left!', ['He said "Stop."', "Then left!"]),
        ("Dose 0.5 mg. 12 patients.", ["Dose 0.5 mg.", "12 patients."]),
        ("First.\nSecond. \nThird", ["First.", "Second.", "Third"]),
        ("One.\n\n\nTwo. Three.\n", ["One.", "Two.", "Three."]),
        ("A stop, then lowercase. next\nLine.", ["A stop, then lowercase. next", "Line."]),
        ("Ends with a stop. ", ["Ends with a stop."]),
    ],
)
def test_every_kind_of_stop_and_line_breaks_between_sentences(text, expected, split_spans):
    """The stops are found in one pass over the whole text ("!" and "?" as well as "."),
    and the line breaks between them still end sentences."""
    assert split_sentences(split_spans, text) == expected


# Single characters and pieces the rules react to; random texts are drawn from them
# (stops, closers, citations, line breaks, every kind of space, initials, abbreviations,
# cased and uncased letters, digits that are not decimals).
PIECES = [
    *"aAbBDeEgiJLlsuvxyz",
    *" " * 6,
    *".!?\"')][",
    "\n",
    "\t",
    "\r",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x85",
    "\u00a0",
    "\u2028",
    "\u3000",
    "é",
    "É",
    "ǅ",  # titlecase: neither upper nor lower
    "ß",
    "中",  # a letter with no case
    "0",
    "9",
    "²",  # a digit that is not a decimal
    "½",  # numeric, not a digit
    "_",
    "“",
    "‘",
    "”",
    "𝐀",  # outside the BMP
    "et al.",
    "e.g.",
    "i.e.",
    "vs.",
    "Fig.",
    " J. ",
    " by ",
    " vitamin ",
    " vitamin \n",  # the word before an initial, read across a line break
    "D.",
    " the ",
    " [PMC1]",
    "[x]",
    " Dr. ",
    "u.s.",
    "Ph.D.",
    "[" + "a" * 40 + "]",
    "[" + "a" * 41 + "]",
    "[]",
]


def _spans_problem(text: str, spans: list[tuple[int, int]]) -> str | None:
    """What in `spans` breaks the splitter's contract for `text`, or None."""
    end_before = 0
    for start, end in spans:
        if not end_before <= start < end <= len(text):
            return f"span {(start, end)} is empty, out of order or out of the text"
        if text[start].isspace() or text[end - 1].isspace():
            return f"span {(start, end)} is not trimmed"
        if "\n" in text[start:end]:
            return f"span {(start, end)} crosses a line break"
        if not text[end_before:start].isspace() and text[end_before:start]:
            return f"text {text[end_before:start]!r} before span {(start, end)} is in no sentence"
        end_before = end
    if text[end_before:] and not text[end_before:].isspace():
        return f"text {text[end_before:]!r} at the end is in no sentence"
    return None


@pytest.mark.parametrize("seed,count,longest", [(1, 20_000, 40), (2, 5_000, 120), (3, 1_000, 600)])
def test_any_text_is_split_into_ordered_trimmed_sentences_that_cover_it(split_spans, seed, count, longest):
    """For any text: the spans are in order and do not overlap, each is trimmed of
    whitespace and stays within one line, and every character that is not whitespace is
    in a sentence (nothing is dropped). Short texts reach every branch often; long ones
    reach past the 64-character look-backs. The seed is fixed, so a failure names a text
    that can be run again."""
    rng = random.Random(seed)
    broken = []
    for _ in range(count):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, longest)))
        problem = _spans_problem(text, split_spans(text))
        if problem is not None:
            broken.append((text, problem))
    assert broken[:3] == []


def test_the_properties_catch_a_splitter_that_breaks_them():
    """The check above fails a splitter that drops text, crosses a line or leaves spaces."""
    text = "One. Two.\nThree."
    assert _spans_problem(text, sentences.split_spans(text)) is None
    assert _spans_problem(text, [(0, 4)]) is not None  # drops the rest
    assert _spans_problem(text, [(0, 4), (5, 16)]) is not None  # crosses the line break
    assert _spans_problem(text, [(0, 5), (5, 9), (10, 16)]) is not None  # "One. " not trimmed
