"""The splitter's rules, held by both of its implementations: the Python definition and
the same rules in C (native/spans), which the platform uses where it is built."""

import pytest

from core import sentences


@pytest.fixture(params=["python", "native"])
def split_spans(request):
    if request.param == "python":
        return sentences.python_split_spans
    # `make install` builds it; a missing build is a failure here, not a skip
    assert sentences.NATIVE, "native/spans is not built (make install builds it; it needs a C compiler)"
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
    without its regular expressions (issue 30); these texts go through both the short
    paths and the full ones, and each expected split is worked by hand from the rules in
    the module's docstring."""
    assert split_sentences(split_spans, text) == expected
