"""An uploaded rubric file is read as the small tree a rubric is (docs/rubric-format.md,
"Uploaded files"): no YAML anchors or aliases (a few kilobytes of aliases expanded into a
definition of millions of characters), no nesting deeper than MAX_RUBRIC_DEPTH (20,000
`[` overflowed the recursive composer: a 500), no tags beyond JSON's kinds of value, at
most MAX_RUBRIC_BYTES. Each refusal is a 400 naming the problem and its line, and
nothing is stored."""

import html
from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotate.models import Rubric
from annotate.rubric_yaml import MAX_RUBRIC_BYTES, MAX_RUBRIC_DEPTH
from annotate.rubrics import RubricDefinitionError
from annotate.services.rubrics import upload_rubric
from tests.factories import UserFactory

LITSUMM = Path(django_settings.BASE_DIR) / "fixtures" / "rubrics" / "litsumm.yaml"


def creator(username="pi"):
    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))
    return user


def lab_yaml(**changes) -> str:
    definition = yaml.safe_load(LITSUMM.read_text())
    definition.update(key="labclarity", title="Lab clarity", **changes)
    return yaml.safe_dump(definition, sort_keys=False)


def post(client: Client, text: str | bytes):
    data = text.encode() if isinstance(text, str) else text
    return client.post("/studies/rubrics/", {"file": SimpleUploadedFile("r.yaml", data)})


def refused(client: Client, text: str, *fragments: str) -> str:
    """Post `text`; assert a 400 whose page holds every fragment and that nothing was stored."""
    before = Rubric.objects.count()
    response = post(client, text)
    page = html.unescape(response.content.decode())
    assert response.status_code == 400, page[-2000:]
    for fragment in fragments:
        assert fragment in page, (fragment, page[-2000:])
    assert Rubric.objects.count() == before
    return page


@pytest.fixture
def client(db) -> Client:
    client = Client()
    client.force_login(creator())
    return client


def billion_laughs(levels: int = 6) -> str:
    """The rubric's questions plus a tree of aliases: each level repeats the one before
    nine times, so the file stays a few hundred bytes and the value grows 9**levels."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return lab_yaml() + "\n".join(lines) + "\n"


def test_a_billion_laughs_rubric_is_refused_and_stores_nothing(client):
    text = billion_laughs()
    assert len(text) < 6000
    refused(client, text, "anchor", "line ")
    assert not Rubric.objects.filter(key="labclarity").exists()


def test_an_alias_alone_is_refused_with_its_line(client):
    # An alias whose anchor the scan has not seen is still an alias: refused at its line.
    text = lab_yaml() + "extra: *nowhere\n"
    line = text.count("\n")
    refused(client, text, f"line {line}", "alias")


def test_an_anchor_with_a_merge_key_is_refused(client):
    """The shape of fixtures/rubrics/factpico.yaml: built-in files may, uploads may not."""
    text = lab_yaml() + "base: &base {prompt: A}\nother:\n  <<: *base\n"
    refused(client, text, "anchor", f"line {text.count(chr(10)) - 2}")


def test_twenty_thousand_nested_brackets_are_a_400_not_a_500(client):
    text = lab_yaml() + "deep: " + "[" * 20_000 + "]" * 20_000 + "\n"
    refused(client, text, f"more than {MAX_RUBRIC_DEPTH} levels")


def test_unclosed_deep_nesting_is_refused_too(client):
    refused(client, "key: x\nq: " + "[" * 20_000 + "\n", "more than")


def test_deep_block_nesting_is_refused(client):
    text = lab_yaml() + "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_RUBRIC_DEPTH + 5)).replace("k0", "deep", 1)
    refused(client, text, f"more than {MAX_RUBRIC_DEPTH} levels")


def test_the_service_refuses_deep_nesting_before_composing(db):
    with pytest.raises(RubricDefinitionError, match="nested more than"):
        upload_rubric(text="{a: " * 50_000 + "1" + "}" * 50_000, user=creator())


def test_nesting_at_the_limit_is_read(client):
    # The top-level mapping is level 1; a list under it nested to exactly the limit.
    inner = MAX_RUBRIC_DEPTH - 1
    response = post(client, lab_yaml() + "deep: " + "[" * inner + "]" * inner + "\n")
    # Read to the end: what refuses it is the rubric's rule on keys, not the nesting.
    page = response.content.decode()
    assert "unknown key &#x27;deep&#x27; in the rubric" in page and "levels" not in page


def test_a_file_over_the_size_limit_is_refused_by_the_service(db):
    text = lab_yaml() + "pad: " + "x" * MAX_RUBRIC_BYTES + "\n"
    with pytest.raises(RubricDefinitionError, match="at most"):
        upload_rubric(text=text, user=creator())


@pytest.mark.parametrize(
    "extra,fragment",
    [
        ("x: !!python/object:os.system {}\n", "!!python/object"),
        ("x: !!python/name:os.system ''\n", "!!python/name"),
        ("x: !!binary aGVsbG8=\n", "!!binary"),
        ("x: !!set {a, b}\n", "!!set"),
        ("x: !custom 1\n", "!custom"),
        ("x: " + "9" * 5000 + "\n", "integer"),
        ("x: 0x" + "f" * 100 + "\n", "integer"),
        ("x: 1.0e+999\n", "infinite"),
        ("x: .nan\n", "infinite"),
        ("x: {1: a}\n", "keys must be text"),
        ("x: {null: a}\n", "keys must be text"),
        ('x: "a\\0b"\n', "NUL"),
    ],
    ids=[
        "python-object",
        "python-name",
        "binary",
        "set",
        "custom-tag",
        "huge-int",
        "huge-hex",
        "inf",
        "nan",
        "int-key",
        "null-key",
        "nul-escape",
    ],
)
def test_values_json_cannot_hold_are_refused_with_their_line(client, extra, fragment):
    text = lab_yaml() + extra
    refused(client, text, fragment)


def test_a_date_stays_text(client):
    text = lab_yaml().replace("title: Lab clarity", "title: 2024-05-01", 1)
    assert post(client, text).status_code == 302
    assert Rubric.objects.get(key="labclarity").definition["title"] == "2024-05-01"


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("- a\n- b\n", "must be a mapping"),
        ("just text\n", "must be a mapping"),
        ("~\n", "must be a mapping"),
        ("a: 1\n---\nb: 2\n", "single document"),
        ("key: [unclosed", "not valid YAML"),
    ],
)
def test_other_shapes_are_refused(client, text, fragment):
    refused(client, text, fragment)


def test_binary_junk_is_refused(client):
    before = Rubric.objects.count()
    response = post(client, bytes(range(256)) * 4)
    assert response.status_code == 400
    assert Rubric.objects.count() == before


def test_the_study_form_reads_no_rubric_definitions(client, django_assert_num_queries):
    """The New study page lists every stored key; it never needs their definitions."""
    post(client, lab_yaml())
    from annotate.study_views import rubric_choices

    with django_assert_num_queries(1) as captured:
        choices = rubric_choices()
    assert ("labclarity", "labclarity: Lab clarity (v1)") in choices
    assert '"definition"' not in captured.captured_queries[0]["sql"]
