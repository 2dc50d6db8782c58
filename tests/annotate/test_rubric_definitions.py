import copy

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Rubric
from annotate.rubrics import RubricDefinition, RubricDefinitionError
from annotate.services.rubrics import builtin_rubric_path, load_builtin_rubric, load_rubric, read_rubric_file

BASE = {
    "key": "mini",
    "title": "Mini",
    "questions": [
        {
            "key": "score",
            "kind": "scale",
            "prompt": "Score",
            "required": True,
            "options": [{"value": 1, "label": "Bad"}, {"value": 2, "label": "Good"}],
        },
        {
            "key": "pick",
            "kind": "choice",
            "prompt": "Pick",
            "options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}],
        },
        {"key": "note", "kind": "text", "prompt": "Note"},
    ],
}


def with_change(change):
    raw = copy.deepcopy(BASE)
    change(raw)
    return raw


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda r: r["questions"][0].update(kind="slider"), "question 'score': kind must be one of"),
        (
            lambda r: r["questions"][0].update(options=[{"value": 1, "label": "x"}]),
            "question 'score': needs at least two",
        ),
        (
            lambda r: r["questions"][0]["options"].reverse(),
            "question 'score': scale options must be in increasing order",
        ),
        (
            lambda r: r["questions"][0]["options"][0].update(value="1"),
            "question 'score': scale values must be integers",
        ),
        (lambda r: r["questions"][1]["options"][1].update(value="a"), "question 'pick': option values must be unique"),
        (lambda r: r["questions"][1]["options"][1].pop("label"), "question 'pick': option 'b' has no label"),
        (lambda r: r["questions"][2].update(prompt=""), "question 'note': prompt is required"),
        (lambda r: r["questions"][2].update(rationale="maybe"), "question 'note': rationale must be one of"),
        (lambda r: r["questions"][2].update(key="score"), "rubric: duplicate question keys: score"),
        (lambda r: r["questions"][2].update(key="not valid"), "question 3: key must be an identifier"),
        (lambda r: r.update(questions=[]), "rubric: questions must be a non-empty list"),
    ],
)
def test_invalid_definitions_are_rejected_naming_the_question(change, message):
    with pytest.raises(RubricDefinitionError) as excinfo:
        RubricDefinition.from_dict(with_change(change))
    assert message in excinfo.value.message


def test_builtin_litsumm_rubric_has_the_papers_failure_modes():
    definition = RubricDefinition.from_dict(read_rubric_file(builtin_rubric_path("litsumm")))
    overall = definition.question("overall")
    assert overall.kind == "scale" and overall.values == (1, 2, 3, 4, 5) and overall.required
    assert all(o.label and o.description for o in overall.options)
    modes = definition.question("failure_modes").values
    assert set(modes) >= {
        "false_positive",
        "hallucination",
        "unsupported",
        "contradiction",
        "overly_specific",
        "bad_length",
        "mentions_ai",
        "context_too_short",
        "misattribution",
        "unsupported_inference",
    }
    assert definition.question("feedback").prompt == "Feedback"


@pytest.mark.django_db
def test_changed_definition_becomes_a_new_version_and_old_one_is_kept():
    first = load_rubric(definition=BASE)
    assert load_rubric(definition=copy.deepcopy(BASE)) == first
    changed = with_change(lambda r: r["questions"][2].update(prompt="A note"))
    second = load_rubric(definition=changed)
    assert (first.version, second.version) == (1, 2)
    first.refresh_from_db()
    assert first.definition == BASE


@pytest.mark.django_db
def test_load_rubric_command(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("key: bad\ntitle: Bad\nquestions:\n  - key: q\n    kind: scale\n    prompt: Q\n", "utf-8")
    with pytest.raises(CommandError, match="question 'q': needs at least two options"):
        call_command("load_rubric", str(path))
    assert not Rubric.objects.exists()
    call_command("load_rubric", str(builtin_rubric_path("litsumm")))
    assert "Rubric litsumm is at version 1" in capsys.readouterr().out
    assert load_builtin_rubric(key="litsumm").version == 1
