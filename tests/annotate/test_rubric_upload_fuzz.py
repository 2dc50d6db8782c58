"""Property-based: no rubric file is a server error. Generated YAML (random nesting, anchors
and aliases, odd scalars, tags such as !!python/object, huge integers, non-mapping top
levels, binary junk, a valid rubric with junk appended) goes through the upload service,
which answers with a rubric or an ApplicationError (a 4xx), and through the Rubrics page,
which answers below 500. Keys go through the API that names a rubric by key
(`POST /api/studies/`). Each example runs in a savepoint that is rolled back."""

from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotate.services.rubrics import upload_rubric
from core.exceptions import ApplicationError
from tests.conftest import api_client_for
from tests.factories import UserFactory

SETTINGS = settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

LITSUMM = Path(django_settings.BASE_DIR) / "fixtures" / "rubrics" / "litsumm.yaml"
VALID = LITSUMM.read_text().replace("key: litsumm", "key: fuzzed")

TOKENS = [
    "[", "]", "{", "}", ":", ",", "- ", "? ", "\n", "  ", "key: ", "title: T\n", "questions:\n",
    "&a ", "*a", "&b [*a, *a]", "<<: ", "!!python/object:os.system ", "!!python/object/apply:os.system ",
    "!!binary ", "!!set ", "!!omap ", "!!timestamp ", "!local ", "! ",
    "!!int ", "!!float ", "!!bool ", "!!null ", "!!seq ", "!!map ", "!!str ",
    "9" * 60, "0x" + "f" * 40, "1_000", "190:20:30", ".inf", "-.inf", ".nan", "1.0e+999", "~", "null",
    "yes", "2024-01-01", "2001-12-14t21:59:43.10-05:00", "'", '"', '"\\0"', '"\\ud83d"', '"\\x00"',
    "|\n", ">-\n", "---\n", "...\n", "%YAML 1.1\n", "%TAG ! tag:x,2000:\n", "#", "\t", "\x85", "\ufeff",
    "=", "é", "м",
]  # fmt: skip

# An explicit tag on any scalar: PyYAML's own constructors trust the text they are given.
TAGS = ["!!int", "!!float", "!!bool", "!!null", "!!str", "!!seq", "!!map", "!!binary", "!!set", "!!timestamp",
        "!!python/tuple", "!local", "!"]  # fmt: skip
TAGGED = ['""', "''", "abc", ".", "0x", "0b2", "1:2", "9" * 40, ".inf", "[1]", "{a: 1}", "maybe", "~", "2024-01-01",
          '"\\0"', "1e5", "-0", "0o7"]  # fmt: skip
tagged = st.lists(st.tuples(st.sampled_from(TAGS), st.sampled_from(TAGGED)), min_size=1, max_size=4).map(
    lambda pairs: "".join(f"k{i}: {tag} {value}\n" for i, (tag, value) in enumerate(pairs))
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),
    st.text(max_size=20),
)
structures = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(scalars, children, max_size=4),
    max_leaves=20,
)


def dumped(value) -> str:
    return yaml.dump(value, Dumper=yaml.Dumper)  # the full dumper: it writes tags such as !!python/tuple


@st.composite
def nested(draw) -> str:
    depth = draw(st.integers(min_value=0, max_value=3000))
    opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ("- ", "")]))
    closed = draw(st.booleans())
    if opener == "- ":
        return "".join(f"{'  ' * i}- \n" for i in range(min(depth, 200)))
    return "key: x\nq: " + opener * depth + (closer * depth if closed else "")


yaml_texts = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=40).map("".join),
    structures.map(dumped),
    st.builds(dict, key=st.text(max_size=10), title=st.text(max_size=10), questions=structures).map(dumped),
    nested(),
    tagged,
    st.lists(st.sampled_from(TOKENS), max_size=10).map(lambda junk: VALID + "".join(junk)),
    st.binary(max_size=200).map(lambda data: data.decode("utf-8", errors="surrogateescape")),
    st.text(max_size=200),
)


@pytest.fixture
def uploader(db):
    user = UserFactory(username="pi")
    user.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))
    return user


def test_the_upload_service_answers_every_file_with_a_rubric_or_an_application_error(uploader):
    @SETTINGS
    @given(yaml_texts)
    def check(text):
        with transaction.atomic():
            try:
                upload_rubric(text=text, user=uploader)
            except ApplicationError as exc:
                assert 400 <= exc.http_status < 500 and exc.message
            transaction.set_rollback(True)

    check()


def test_the_rubric_page_answers_every_file_below_500(uploader):
    client = Client()
    client.force_login(uploader)

    @SETTINGS
    @given(st.one_of(yaml_texts.map(lambda text: text.encode("utf-8", errors="surrogatepass")), st.binary()))
    def check(data):
        with transaction.atomic():
            response = client.post("/studies/rubrics/", {"file": SimpleUploadedFile("r.yaml", data)})
            assert response.status_code in (302, 400, 403), response.status_code
            transaction.set_rollback(True)

    check()


def test_the_study_api_answers_every_rubric_key_below_500(uploader):
    client = api_client_for(uploader)
    keys = st.one_of(
        st.text(max_size=80),
        st.sampled_from(["LitSumm", "litsu\u043cm", "../litsumm", "litsumm\x00", "a" * 65, "fuzzed", "Fuzzed"]),
    )

    @SETTINGS
    @given(keys)
    def check(key):
        with transaction.atomic():
            body = {"slug": "fuzz", "title": "Fuzz", "rubric": key}
            response = client.post("/api/studies/", body, format="json")
            assert response.status_code in (201, 400), (key, response.status_code)
            transaction.set_rollback(True)

    check()
