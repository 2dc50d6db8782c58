"""The splitter in C (native/spans) gives the spans of the Python definition (core.sentences),
on texts nobody here wrote: the evidence-inference abstracts, the seed papers, and random
texts made of the characters and words the rules look at (stops, closers, citations, line
breaks, every kind of space, initials, abbreviations, cased and uncased letters, digits that
are not decimals)."""

import json
import random
from pathlib import Path

import pytest

from core import sentences

ROOT = Path(__file__).resolve().parents[2]

# Single characters and pieces the rules react to; random texts are drawn from them.
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
    "𝐀",  # outside the BMP: the text is stored four bytes a character
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


@pytest.fixture(scope="module")
def native():
    assert sentences.NATIVE, "native/spans is not built (make install builds it; it needs a C compiler)"
    return sentences.split_spans


def test_the_platform_splits_with_the_compiled_rules(native):
    import litsum_spans

    assert native is litsum_spans.split_spans
    assert sentences.python_split_spans is not native


def _corpus():
    texts = [
        json.loads(line)["abstract"]
        for line in (ROOT / "fixtures" / "evidence_inference" / "abstracts.jsonl").read_text("utf-8").splitlines()
    ]
    for path in sorted((ROOT / "fixtures" / "demo").glob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            record = json.loads(line)
            texts += [record[k] for k in ("text", "abstract") if isinstance(record.get(k), str)]
    return texts


def test_the_same_spans_on_published_abstracts(native):
    texts = _corpus()
    assert len(texts) > 150
    differ = [text[:80] for text in texts if native(text) != sentences.python_split_spans(text)]
    assert differ == []


@pytest.mark.parametrize("seed,count,longest", [(1, 60_000, 40), (2, 20_000, 120), (3, 3_000, 600)])
def test_the_same_spans_on_random_texts(native, seed, count, longest):
    """Short texts reach every branch often; long ones reach past the 64-character
    look-backs. The seed is fixed, so a failure names a text that can be run again."""
    rng = random.Random(seed)
    differ = []
    for _ in range(count):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, longest)))
        if native(text) != sentences.python_split_spans(text):
            differ.append(text)
    assert differ[:3] == []


def test_the_same_spans_on_each_kind_of_stored_text(native):
    """CPython keeps a text in 1, 2 or 4 bytes a character, by its widest character."""
    base = "Smith et al. found it [PMC1]. Dr. A. Smith agreed.\nTook vitamin D. Supplements stopped."
    for extra in ("", "é", "中", "𝐀"):
        text = base.replace("found", "found" + extra)
        assert native(text) == sentences.python_split_spans(text)
        assert len(native(text)) == 4


def test_bad_arguments_are_refused_not_crashed(native):
    import litsum_spans

    with pytest.raises(TypeError):
        native(b"bytes. Not text.")
    try:
        with pytest.raises(ValueError):
            litsum_spans.configure(["x" * 33], [])
        with pytest.raises(ValueError):
            litsum_spans.configure(["é"], [])
        # a refused configure leaves the splitter unconfigured rather than half-configured
        with pytest.raises(RuntimeError):
            native("One. Two.")
    finally:
        litsum_spans.configure(sentences.ABBREVIATIONS, sentences._NAME_INTRODUCERS)
    assert native("Smith et al. came. Next.") == [(0, 18), (19, 24)]
