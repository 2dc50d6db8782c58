"""core.text_validation: what counts as text that cannot be stored, where it is
reported, and the nesting limit, checked against the standard library's own behaviour."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.text_validation import MAX_DEPTH, InvalidTextError, find_problem, loads, text_problem


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


@pytest.mark.parametrize("text", ["", "plain", "Café ≥ 3 🫁", "\ufffd", "\U0010ffff", "tab\tnew\nline"])
def test_unicode_text_is_fine(text):
    assert text_problem(text) is None


@pytest.mark.parametrize(("text", "words"), [("x\ud83d", "U+D83D"), ("\udc00y", "U+DC00"), ("a\x00b", "NUL")])
def test_surrogates_and_nul_are_named(text, words):
    problem = text_problem(text)
    assert problem and words in problem
    # The standard library agrees that the surrogates are not encodable text.
    if "NUL" not in problem:
        with pytest.raises(UnicodeEncodeError):
            text.encode("utf-8")


def test_the_place_is_a_path_and_a_bad_key_is_reported_at_its_object():
    value = {"answers": {"spans": [{"text": "ok"}, {"answers": {"why": "bad\ud83d"}}]}}
    assert find_problem(value)[0] == "answers.spans[1].answers.why"
    assert find_problem({"answers": {"ok": 1, "x\udfff": 2}}) == ("answers", find_problem({"x\udfff": 1})[1])
    assert find_problem({"x\udfff": 1})[1].startswith("has a key that contains a lone surrogate")


def test_nesting_up_to_the_limit_is_fine_and_one_more_level_is_refused():
    assert loads(nested(MAX_DEPTH)) == json.loads(nested(MAX_DEPTH))
    with pytest.raises(InvalidTextError) as error:
        loads(nested(MAX_DEPTH + 1))
    assert error.value.field == "" and "nested more than" in error.value.problem
    with pytest.raises(InvalidTextError) as error:
        loads('{"ok": 1, "answers": {"x": ' + nested(100_000) + "}}")
    assert error.value.field == "answers"


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = json.dumps({"a": "[" * 1000 + '\\"{' * 500, "b": ["]" * 1000]})
    assert loads(text) == json.loads(text)


json_text = st.text().filter(lambda s: text_problem(s) is None)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | json_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(json_text, children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None, database=None)
@given(json_values, st.booleans())
def test_storable_json_loads_exactly_as_the_standard_library_does(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert loads(text) == json.loads(text)


@settings(max_examples=200, deadline=None, database=None)
@given(json_values, st.sampled_from(["\ud83d", "\udc00", "\x00"]), st.data(), st.booleans())
def test_a_bad_character_anywhere_is_found(value, bad, data, ascii_only):
    """Put a bad character into a random string (or key) of a random value: it is found,
    and nothing is reported for the value without it."""
    assert find_problem(value) is None
    wrapped = {"field": [value, data.draw(json_text) + bad]}
    found = find_problem(wrapped)
    assert found is not None and found[0] == "field[1]"
    # Escaped (\\uD83D) or raw in the text given to loads (a str can hold a lone
    # surrogate): both reach the walk that names the field.
    with pytest.raises(InvalidTextError) as error:
        loads(json.dumps(wrapped, ensure_ascii=ascii_only))
    assert error.value.field == "field[1]"


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "\\\\u0000"}',  # an escaped backslash, then "u0000": plain text, storable
        '{"a": "caf\u00e9 \\\\u"}',  # an escaped backslash before a "u" after non-ASCII text
        '{"a": "café", "b": ["x", {"c": "≥ 3"}]}',
    ],
)
def test_storable_text_with_backslashes_and_non_ascii_loads_as_the_standard_library_does(text):
    assert loads(text) == json.loads(text)
    assert find_problem(json.loads(text)) is None


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"a": "x\\u0000"}', "a"),  # \u0000 escape: a NUL after decoding
        ('{"a": ["ok", "\\ud83d"]}', "a[1]"),  # an escaped lone surrogate
        ('{"a": {"b": "x\ud83d"}}', "a.b"),  # a raw lone surrogate in the str given to loads
    ],
)
def test_unstorable_text_is_refused_escaped_or_raw(text, field):
    with pytest.raises(InvalidTextError) as error:
        loads(text)
    assert error.value.field == field


@pytest.mark.parametrize(
    "text",
    [
        '{"x": 0.1, "y": 1e400, "z": -1e400}',  # infinities: orjson refuses, json.loads decides
        "[5e-324, 1.7976931348623157e308, 2.2250738585072014e-308, 9007199254740993]",
        "[-0, -0.0, 1E2, 1e-7, 123456789012345678901234567890]",  # an integer past 64 bits
        '{"a": NaN, "b": Infinity, "c": -Infinity}',  # not JSON; json.loads takes them, as before
        '{"k": 1, "k": 2}',
        '"just a string"',
        "  [1, 2]  ",
    ],
)
def test_numbers_and_edge_cases_load_exactly_as_the_standard_library_does(text):
    """The values and their types are json.loads's: a faster decoder must not change them
    (orjson, once tried here, decodes an integer past 64 bits to a float)."""
    got, want = loads(text), json.loads(text)
    assert json.dumps(got) == json.dumps(want)
    assert [type(v) for v in (got.values() if isinstance(got, dict) else got if isinstance(got, list) else [got])] == [
        type(v) for v in (want.values() if isinstance(want, dict) else want if isinstance(want, list) else [want])
    ]


@pytest.mark.parametrize("text", ['{"a": 1,}', "[1, 2", '{"a" 1}', "", "nul"])
def test_malformed_json_is_reported_as_the_standard_library_reports_it(text):
    with pytest.raises(json.JSONDecodeError) as ours:
        loads(text)
    with pytest.raises(json.JSONDecodeError) as standard:
        json.loads(text)
    assert (ours.value.msg, ours.value.colno) == (standard.value.msg, standard.value.colno)
