"""Property-based: posts generated for the platform's own HTML forms (the rating page's
buttons and skip form, the batch builder, a batch's withdraw/move/re-rate buttons, an item's note,
expected-answer and consensus forms, the disagreement filters, the login form) never get
a server error. The schemathesis test does the same for the API.

Field values mix what the form expects (its choices, real uuids and versions) with
hostile input: any text (NUL included), huge and odd numbers, 5,000-level JSON, JSON
escapes of lone surrogates, overlong names. Runs through Django's test client, on
SQLite and on PostgreSQL (where NUL and overlong text reached the database as a 500).
Each example runs in a savepoint that is rolled back, so examples do not see each other.
"""

import json
import uuid

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotate.services.batches import create_batch
from tests.annotate.factpico import make_factpico_assignment
from tests.factories import PASSWORD, AssignmentFactory, SummaryFactory, UserFactory

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

SPECIAL = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "0",
    "-1",
    "1.5",
    "1e309",
    "nan",
    "inf",
    "-inf",
    str(2**31),
    str(2**63),
    str(10**30),
    "-" + str(10**30),
    "x" * 5000,
    "q" * 150,
    "[" * 5000 + "]" * 5000,
    '{"a": ' * 300 + "1" + "}" * 300,
    '"\\ud83d"',
    '{"\\udc00": 1}',
    '{"feedback": "half \\ud83d"}',
    '{"overall": 3}',
    '{"overall": "na"}',
    '[{"start": 0, "end": 3, "text": "Gro", "answers": {"factual": "\\ud83d"}}]',
    '[{"start": 0, "end": 99999, "text": "x"}]',
    "[]",
    "{}",
    "null",
    "generator,source.x,bogus",
    "source.",
    "rna_type=lncRNA",
    "=",
    "not-a-uuid",
    "00000000-0000-0000-0000-000000000000",
    "<script>alert(1)</script>",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3),
    max_leaves=8,
).map(json.dumps)

specials = st.sampled_from(SPECIAL)
hostile = st.one_of(
    specials,  # twice: the known troublemakers are drawn as often as the rest together
    specials,
    st.text(max_size=200),  # any characters a browser can send, NUL included
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    json_values,
)


def field(*valid) -> tuple[st.SearchStrategy, bool]:
    """A field and the values the form expects in it."""
    return st.sampled_from(valid), False


def several(*valid) -> tuple[st.SearchStrategy, bool]:
    """A field that may be repeated (checkboxes, a multiple choice)."""
    return st.lists(st.sampled_from(valid), min_size=1, max_size=3), True


def form_posts(fields: dict[str, tuple[st.SearchStrategy, bool]]) -> st.SearchStrategy:
    """Posts that are valid but for one hostile field, so that the bad value reaches the
    deepest code that reads it; and posts in which any field may be missing or hostile."""

    def bad(is_list: bool) -> st.SearchStrategy:
        return st.lists(hostile, max_size=3) if is_list else hostile

    @st.composite
    def one_bad_field(draw):
        data = {name: draw(valid) for name, (valid, _) in fields.items()}
        target = draw(st.sampled_from(sorted(fields)))
        data[target] = draw(bad(fields[target][1]))
        return data

    anything = st.fixed_dictionaries(
        {}, optional={name: st.one_of(valid, bad(is_list)) for name, (valid, is_list) in fields.items()}
    )
    return st.one_of(one_bad_field(), anything)


def run(client: Client, method: str, url: str, data: dict) -> None:
    with transaction.atomic():
        response = client.post(url, data) if method == "post" else client.get(url, data)
        assert response.status_code < 500, (method, url, data, response.status_code)
        transaction.set_rollback(True)


def fuzz(client: Client, method: str, url: str, fields: dict) -> None:
    @SETTINGS
    @given(form_posts(fields))
    def check(data):
        run(client, method, url, data)

    check()


@pytest.fixture
def world(db, study, admin_user, rater_a, rater_b):
    for _ in range(3):
        SummaryFactory(source__study=study)
    batch = create_batch(study=study, name="main", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    own = batch.assignments.filter(rater=rater_a).first()
    fp_assignment, finding = make_factpico_assignment(rater_a)
    rater_client, admin_client = Client(), Client()
    rater_client.force_login(rater_a)
    admin_client.force_login(admin_user)
    return {
        "study": study,
        "batch": batch,
        "own": own,
        "summary": own.summary,
        "fp": fp_assignment,
        "finding": str(finding.uuid),
        "rater": rater_client,
        "admin": admin_client,
        "assignments": [str(a.uuid) for a in batch.assignments.all()],
        "users": [rater_a.pk, rater_b.pk, admin_user.pk],
    }


@pytest.mark.django_db
def test_the_litsumm_rating_form(world):
    fuzz(
        world["rater"],
        "post",
        f"/rate/{world['own'].uuid}/",
        {
            "action": field("save", "submit", "reopen"),
            "version": field("1", "2"),
            "active_seconds": field("0", "12"),
            "overall": field("1", "3", "5"),
            "failure_modes": several("hallucination", "misattribution"),
            "feedback": field("Cite it."),
            "feedback__rationale": field("Because."),
        },
    )


@pytest.mark.django_db
def test_the_skip_form(world):
    fuzz(
        world["rater"],
        "post",
        f"/rate/{world['own'].uuid}/",
        {"action": field("skip"), "version": field("1"), "skip_reason": field("Unclear.")},
    )


@pytest.mark.django_db
def test_the_factpico_rating_form(world):
    finding = world["finding"]
    fuzz(
        world["rater"],
        "post",
        f"/rate/{world['fp'].uuid}/",
        {
            "action": field("save", "submit"),
            "version": field("1"),
            "added_info__json": field('[{"start": 0, "end": 9, "text": "Grown-ups", "answers": {"factual": "yes"}}]'),
            "contradictions__json": field("[]"),
            "population": field("1", "4", "na"),
            "population__rationale": field("Adults."),
            f"evidence__{finding}": field("1", "3", "na"),
            f"evidence__{finding}__rationale": field("Right direction."),
            "outcome_exhaustive": field("yes", "no"),
            "comments": field("Fine."),
        },
    )


@pytest.mark.django_db
def test_the_batch_builder_form(world):
    fuzz(
        world["admin"],
        "post",
        f"/studies/{world['study'].slug}/batches/new/",
        {
            "name": field("new batch"),
            "kind": field("main", "calibration", "adjudication"),
            "raters": several(*[str(pk) for pk in world["users"]]),
            "design": field("k_raters", "balanced"),
            "k": field("1"),
            "share": field("0.5"),
            "m": field("1"),
            "n": field(""),
            "stratify_by": field("", "generator", "source.topic", "context_length"),
            "seed": field("0", "7"),
            "generator": field("", "secret-model-x"),
            "source_field": field(""),
            "min_context": field("", "1"),
            "max_context": field("", "10"),
            "rated": field("", "no"),
            "blinded": field("on", ""),
            "training": field("on", ""),
            "attention_every": field(""),
            "gold": field(""),
        },
    )


@pytest.mark.django_db
def test_the_batch_page_buttons(world):
    fuzz(
        world["admin"],
        "post",
        f"/studies/{world['study'].slug}/batches/{world['batch'].uuid}/",
        {
            "action": field("withdraw", "move", "rerate"),
            "assignment": field(*world["assignments"]),
            "to": field("rater_a", "rater_b", "admin", "nobody"),
        },
    )


ITEM_FORMS = {
    "note": {"text": field("Let us discuss."), "question": field("", "overall", "feedback")},
    "expected": {
        "purpose": field("gold", "attention", "training"),
        "answers": field('{"overall": 3}', '{"failure_modes": ["hallucination"]}'),
        "explanation": field("Because."),
    },
    "consensus": {
        "question": field("overall"),
        "value": field("1", "3", "5"),
        "rationale": field("Agreed."),
    },
    "consensus-text": {"question": field("feedback"), "value": field("Agreed."), "rationale": field("")},
}


@pytest.mark.django_db
@pytest.mark.parametrize("form", sorted(ITEM_FORMS))
def test_the_item_page_forms(world, form):
    fuzz(
        world["admin"],
        "post",
        f"/studies/{world['study'].slug}/batches/{world['batch'].uuid}/items/{world['summary'].uuid}/",
        {"action": field(form.split("-")[0]), **ITEM_FORMS[form]},
    )


@pytest.mark.django_db
def test_the_disagreement_filters(world):
    fuzz(
        world["admin"],
        "get",
        f"/studies/{world['study'].slug}/batches/{world['batch'].uuid}/disagreements/",
        {
            "question": field("overall", "failure_modes"),
            "threshold": field("0", "1", "2.5"),
            "phase": field("initial", "post_discussion"),
            "sort": field("spread", "item"),
        },
    )


@pytest.mark.django_db
def test_the_login_form(db):
    UserFactory(username="someone")
    fuzz(Client(), "post", "/accounts/login/", {"username": field("someone"), "password": field(PASSWORD, "wrong")})


@pytest.mark.django_db
def test_a_stale_or_foreign_assignment_in_a_form_is_a_4xx(world, rater_b):
    """The rating page of another rater's item, or of an item that does not exist."""
    other = AssignmentFactory(rater=rater_b)
    client = world["rater"]
    for url in (f"/rate/{other.uuid}/", f"/rate/{uuid.uuid4()}/"):
        assert client.post(url, {"action": "save", "version": "1"}).status_code == 404
