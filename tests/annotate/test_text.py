import pytest

from annotate.text import split_sentences, split_spans


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
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_spans_are_exact_offsets_into_the_text():
    text = "  Első mondat [PMC1].  Második, e.g. ez [PMC2].\nHarmadik."
    spans = split_spans(text)
    assert [text[s:e] for s, e in spans] == ["Első mondat [PMC1].", "Második, e.g. ez [PMC2].", "Harmadik."]
    assert all(s < e for s, e in spans)
