"""The Rubrics page: a rubric file with a key the format does not have is refused, naming
it and the closest known key; a file is previewed as the rating form it makes before it is
saved; a scale may be written as a range; a version no study uses is renamed or deleted by
its owner (or a superuser), and by nobody else."""

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Rubric
from annotate.rubrics import RubricDefinition
from annotate.services.rubrics import read_rubric_file
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

RUBRIC = """\
key: lab-clarity
title: Lab clarity
questions:
  - key: clarity
    kind: scale
    prompt: How clear is the summary?
    required: true
    options:
      - {value: 1, label: Unclear}
      - {value: 2, label: Clear}
  - key: problems
    kind: checkboxes
    prompt: Problems
    options:
      - {value: jargon, label: Jargon}
      - {value: length, label: Too long}
"""


def creator(username="pi"):
    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))
    return user


def post_file(client, text: str, action: str | None = "preview"):
    data = {"file": SimpleUploadedFile("r.yaml", text.encode())}
    if action:
        data["action"] = action
    return client.post("/studies/rubrics/", data)


@pytest.mark.parametrize(
    "before, after, message",
    [
        (
            "    required: true\n    options:\n      - {value: 1",
            "    requird: true\n    options:\n      - {value: 1",
            "unknown key &#x27;requird&#x27; in question &#x27;clarity&#x27; (did you mean &#x27;required&#x27;?)",
        ),
        ("title: Lab clarity", "titel: Lab clarity", "unknown key &#x27;titel&#x27; in the rubric"),
        ("{value: 2, label: Clear}", "{value: 2, lable: Clear}", "(did you mean &#x27;label&#x27;?)"),
        (
            "{value: 2, label: Clear}",
            "{value: 2, label: Clear, description: All main results, most secondary}",
            "unknown key &#x27;most secondary&#x27; in question &#x27;clarity&#x27;, option 2",
        ),
        (
            "    prompt: Problems\n",
            "    prompt: Problems\n    shortcut_digit: true\n",
            "did you mean &#x27;shortcut_digits&#x27;?",
        ),
    ],
)
def test_an_unknown_key_is_refused_naming_it_and_the_closest_known_one(client, before, after, message):
    client.force_login(creator())
    assert before in RUBRIC
    for action in ("preview", None):
        response = post_file(client, RUBRIC.replace(before, after, 1), action)
        assert response.status_code == 400
        assert message in response.content.decode()
    assert not Rubric.objects.exists()


def test_unknown_keys_are_refused_in_span_questions_na_and_rules():
    base = {
        "key": "x",
        "title": "X",
        "questions": [
            {
                "key": "spans",
                "kind": "span",
                "prompt": "Mark",
                "span_questions": [{"key": "factual", "kind": "text", "prompt": "Why?", "requried": True}],
            }
        ],
    }
    from annotate.rubrics import RubricDefinitionError

    with pytest.raises(RubricDefinitionError, match=r"'requried' in question 'spans', span question 'factual'"):
        RubricDefinition.from_dict(base, known_keys_only=True)
    scale = {"key": "s", "kind": "scale", "prompt": "S", "rationale": "optional", "na": {"lable": "N/A"}}
    scale["options"] = [{"value": 1, "label": "a"}, {"value": 2, "label": "b"}]
    with pytest.raises(RubricDefinitionError, match=r"'lable' in question 's', na \(did you mean 'label'\?\)"):
        RubricDefinition.from_dict({"key": "x", "title": "X", "questions": [scale]}, known_keys_only=True)
    rules = [{"when": {"question": "s", "in": [1]}, "then": {"question": "s", "in": [1]}, "mesage": "m"}]
    del scale["na"]
    with pytest.raises(RubricDefinitionError, match=r"'mesage' in rule 1 \(did you mean 'message'\?\)"):
        RubricDefinition.from_dict(
            {"key": "x", "title": "X", "questions": [scale], "rules": rules}, known_keys_only=True
        )


@pytest.mark.parametrize("path", sorted((Path(django_settings.BASE_DIR) / "fixtures" / "rubrics").glob("*.yaml")))
def test_the_built_in_rubrics_hold_only_known_keys(path):
    read_rubric_file(path)  # raises RubricDefinitionError naming an unknown key


def test_preview_shows_the_rating_form_and_stores_nothing_until_save(client):
    client.force_login(creator())
    response = post_file(client, RUBRIC, "preview")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="rubric-preview"' in page and "Preview: Lab clarity (lab-clarity)" in page
    assert 'id="question-clarity"' in page and "How clear is the summary?" in page and "Too long" in page
    assert '<input type="radio" id="q-clarity-2" name="clarity" value="2"' in page
    assert not Rubric.objects.exists()
    saved = client.post("/studies/rubrics/", {"action": "save", "text": RUBRIC}, follow=True)
    assert "Rubric lab-clarity stored as version 1." in saved.content.decode()
    assert Rubric.objects.get(key="lab-clarity").title == "Lab clarity"


def test_a_saved_preview_is_checked_again(client):
    client.force_login(creator())
    response = client.post("/studies/rubrics/", {"action": "save", "text": RUBRIC.replace("required:", "requird:")})
    assert response.status_code == 400 and "did you mean &#x27;required&#x27;?" in response.content.decode()
    assert not Rubric.objects.exists()


def test_a_scale_written_as_a_range_with_labels():
    raw = {
        "key": "r",
        "title": "R",
        "questions": [
            {
                "key": "overall",
                "kind": "scale",
                "prompt": "Overall",
                "scale": {"from": 1, "to": 5, "labels": ["Bad", "Poor", "Fair", "Good", "Great"]},
            },
            {"key": "plain", "kind": "scale", "prompt": "Plain", "scale": {"from": 0, "to": 3}},
        ],
    }
    definition = RubricDefinition.from_dict(raw, known_keys_only=True)
    overall = definition.question("overall")
    assert [(o.value, o.label) for o in overall.options] == [
        (1, "Bad"),
        (2, "Poor"),
        (3, "Fair"),
        (4, "Good"),
        (5, "Great"),
    ]
    assert [o.label for o in definition.question("plain").options] == ["0", "1", "2", "3"]
    assert definition.validate({"overall": 4}, final=True).values == {"overall": 4}
    from annotate.rubrics import RubricDefinitionError

    raw["questions"][0]["scale"]["labels"] = ["Bad", "Great"]
    with pytest.raises(RubricDefinitionError, match="scale labels: 2 given for the 5 points 1-5"):
        RubricDefinition.from_dict(raw)


def test_the_owner_renames_and_deletes_a_rubric_no_study_uses(client):
    owner = creator("owner")
    client.force_login(owner)
    client.post("/studies/rubrics/", {"action": "save", "text": RUBRIC})
    rubric = Rubric.objects.get(key="lab-clarity")
    page = client.get("/studies/rubrics/").content.decode()
    assert "Delete lab-clarity v1" in page
    renamed = client.post(
        "/studies/rubrics/",
        {"action": "rename", "rubric": str(rubric.uuid), "title": "Lab clarity (draft)"},
        follow=True,
    )
    assert "is now titled &#x27;Lab clarity (draft)&#x27;" in renamed.content.decode()
    rubric.refresh_from_db()
    assert rubric.title == rubric.definition["title"] == "Lab clarity (draft)"
    assert rubric.content_hash == RubricDefinition.from_dict(rubric.definition).content_hash
    deleted = client.post("/studies/rubrics/", {"action": "delete", "rubric": str(rubric.uuid)}, follow=True)
    assert "Rubric lab-clarity v1 deleted." in deleted.content.decode()
    assert not Rubric.objects.exists()


def test_nobody_else_renames_or_deletes_and_a_used_rubric_is_kept(client):
    owner = creator("owner")
    client.force_login(owner)
    client.post("/studies/rubrics/", {"action": "save", "text": RUBRIC})
    rubric = Rubric.objects.get(key="lab-clarity")
    client.force_login(creator("other"))
    refused = client.post("/studies/rubrics/", {"action": "delete", "rubric": str(rubric.uuid)})
    assert refused.status_code == 403 and "only its owner or a superuser" in refused.content.decode()
    StudyFactory(slug="uses-it", rubric=rubric)
    client.force_login(owner)
    kept = client.post("/studies/rubrics/", {"action": "delete", "rubric": str(rubric.uuid)})
    assert kept.status_code == 409 and "is used by the study uses-it" in kept.content.decode()
    superuser = UserFactory(username="root", is_superuser=True)
    client.force_login(superuser)
    kept = client.post("/studies/rubrics/", {"action": "rename", "rubric": str(rubric.uuid), "title": "New"})
    assert kept.status_code == 409
    assert Rubric.objects.get(pk=rubric.pk).title == "Lab clarity"


def test_the_documented_example_is_a_valid_upload(client):
    """docs/rubric-format.md's complete small rubric, uploaded as a lab would."""
    import re

    docs = (Path(django_settings.BASE_DIR) / "docs" / "rubric-format.md").read_text()
    example = re.search(r"A complete small rubric:\n\n```yaml\n(.*?)```", docs, re.S).group(1)
    client.force_login(creator())
    saved = client.post("/studies/rubrics/", {"action": "save", "text": example}, follow=True)
    assert "Rubric lab-clarity stored as version 1." in saved.content.decode()
    clarity = RubricDefinition.from_dict(Rubric.objects.get(key="lab-clarity").definition).question("clarity")
    assert [o.value for o in clarity.options] == [1, 2, 3, 4, 5]
