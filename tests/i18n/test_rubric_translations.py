"""A rubric's texts in other languages (docs/rubric-format.md#translations): checked when the
rubric is read, part of its content hash, and shown where the page's language has them;
LitSumm ships Spanish and German ones; a right-to-left rubric reads right to left."""

import copy
import re
from pathlib import Path

import pytest
import yaml

from annotate.rubrics import RubricDefinition, RubricDefinitionError
from annotate.services.rubrics import builtin_rubric_path, load_rubric, read_rubric_file
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory

RTL_RUBRIC = Path(__file__).with_name("rtl_rubric.yaml")


def litsumm() -> RubricDefinition:
    return RubricDefinition.from_dict(read_rubric_file(builtin_rubric_path("litsumm")), known_keys_only=True)


def small(**translations) -> dict:
    return {
        "key": "small",
        "title": "Small",
        "questions": [
            {
                "key": "overall",
                "kind": "scale",
                "prompt": "How good?",
                "scale": {"from": 1, "to": 3},
                "na": True,
                "rationale": "optional",
            },
            {
                "key": "spans",
                "kind": "span",
                "prompt": "Mark errors",
                "span_questions": [
                    {
                        "key": "why",
                        "kind": "choice",
                        "prompt": "Why?",
                        "options": [{"value": "wrong", "label": "Wrong"}, {"value": "vague", "label": "Vague"}],
                    }
                ],
            },
        ],
        "rules": [
            {
                "when": {"question": "overall", "in": [1]},
                "then": {"question": "overall", "not_in": [1]},
                "message": "Never one.",
            }
        ],
        "translations": translations,
    }


@pytest.mark.parametrize("language", ["es", "de"])
def test_litsumm_translates_every_text_a_rater_reads(language):
    definition = litsumm()
    shown = definition.translated(language)
    assert shown.title != definition.title
    for q, t in zip(definition.questions, shown.questions, strict=True):
        assert (t.key, t.kind, t.values) == (q.key, q.kind, q.values)
        assert t.prompt != q.prompt and t.help != q.help
        for o, to in zip(q.options, t.options, strict=True):
            assert to.label != o.label and (to.description != o.description or not o.description)
    assert [r.message != t.message for r, t in zip(definition.rules, shown.rules, strict=True)] == [True]


def test_a_translation_changes_texts_only_and_keeps_the_content_hash():
    definition = RubricDefinition.from_dict(
        small(
            es={
                "title": "Pequeña",
                "questions": {
                    "overall": {"prompt": "¿Qué tal?", "options": {"2": {"label": "Dos"}}, "na": {"label": "N/D"}},
                    "spans": {
                        "span_questions": {"why": {"prompt": "¿Por qué?", "options": {"vague": {"label": "Vago"}}}}
                    },
                },
                "rules": {"1": "Nunca uno."},
            }
        ),
        known_keys_only=True,
    )
    shown = definition.translated("es")
    overall, spans = shown.questions
    assert (shown.title, overall.prompt, overall.na.label) == ("Pequeña", "¿Qué tal?", "N/D")
    assert [o.label for o in overall.options] == ["1", "Dos", "3"]
    assert spans.span_questions[0].prompt == "¿Por qué?"
    assert [o.label for o in spans.span_questions[0].options] == ["Wrong", "Vago"]
    assert shown.rules[0].message == "Nunca uno." and shown.rules[0].then == definition.rules[0].then
    assert shown.content_hash == definition.content_hash and shown.raw is definition.raw
    # A regional variant reads its language's texts; a language without any, the rubric's own.
    assert definition.translated("es-mx").title == "Pequeña"
    assert definition.translated("de") is definition and definition.translated("en") is definition


def test_a_changed_translation_is_a_new_version_of_the_rubric(db):
    first = load_rubric(definition=small(es={"title": "Pequeña"}))
    again = load_rubric(definition=small(es={"title": "Pequeña"}))
    changed = load_rubric(definition=small(es={"title": "Chica"}))
    assert (first.version, again.version, changed.version) == (1, 1, 2)


@pytest.mark.parametrize(
    ("translations", "message"),
    [
        ({"ES": {"title": "x"}}, "a language code is lower case"),
        ({"es": {"titel": "x"}}, "unknown key 'titel'"),
        ({"es": {"questions": {"overal": {"prompt": "x"}}}}, "'overal' is not a question of the rubric"),
        ({"es": {"questions": {"overall": {"options": {"7": {"label": "x"}}}}}}, "'7' is not an option"),
        ({"es": {"questions": {"overall": {"options": {"2": {"value": 3}}}}}}, "unknown key 'value'"),
        ({"es": {"questions": {"overall": {"prompt": ""}}}}, "prompt: must be non-empty text"),
        ({"es": {"questions": {"overall": {"kind": "text"}}}}, "unknown key 'kind'"),
        (
            {"es": {"questions": {"spans": {"span_questions": {"how": {"prompt": "x"}}}}}},
            "'how' is not a span question",
        ),
        ({"es": {"rules": {"2": "x"}}}, "rules are numbered 1 to 1"),
        ({"es": ["x"]}, "must be a mapping"),
    ],
)
def test_a_translation_that_does_not_fit_the_rubric_is_refused_naming_it(translations, message):
    with pytest.raises(RubricDefinitionError, match=re.escape(message)):
        RubricDefinition.from_dict(small(**translations), known_keys_only=True)


def test_a_rubric_file_takes_its_translations_from_the_translations_folder_beside_it(tmp_path):
    rubric = small()
    del rubric["translations"]
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(rubric))
    assert "translations" not in read_rubric_file(tmp_path / "small.yaml")
    (tmp_path / "translations").mkdir()
    (tmp_path / "translations" / "small.yaml").write_text(yaml.safe_dump({"de": {"title": "Klein"}}))
    assert RubricDefinition.from_dict(read_rubric_file(tmp_path / "small.yaml")).translated("de").title == "Klein"
    both = copy.deepcopy(rubric) | {"translations": {"es": {"title": "Pequeña"}}}
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(both))
    with pytest.raises(RubricDefinitionError, match="translations both in the file and in"):
        read_rubric_file(tmp_path / "small.yaml")


@pytest.mark.django_db
def test_a_right_to_left_rubric_is_shown_with_dir_auto_in_any_page_language(client, rater_a):
    rubric = load_rubric(definition=yaml.safe_load(RTL_RUBRIC.read_text(encoding="utf-8")))
    item = AssignmentFactory(summary=SummaryFactory(source__study=StudyFactory(rubric=rubric)), rater=rater_a)
    client.force_login(rater_a)
    html = client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    fieldset = re.search(r'<fieldset class="question kind-scale" id="question-overall"[^>]*>', html).group(0)
    assert 'dir="auto"' in fieldset
    assert "מהי איכות הסיכום?" in html and "עובדות מומצאות" in html
    # Its English translation, partial: what it translates in English, the rest as written.
    english = client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "How good is the summary?" in english and ">Fair</strong>" in english and "גרוע" in english
