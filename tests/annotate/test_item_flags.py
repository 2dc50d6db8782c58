"""Questions to the admin (docs/monitoring.md): a rater flags an item with a note, the
admins answer from the study's inbox, the answer shows to that rater on the item (and, when
shared, to every rater as a guideline note); flags and exclusions go into the export."""

import json

import pytest

from annotate.models import ItemFlag, StudyMembership
from annotate.services.batches import create_batch
from annotate.services.members import add_study_member
from annotate.services.monitoring import answer_flag, exclude_rater, raise_flag
from annotate.services.ratings import submit_rating
from datasets.exporting import export_dataset
from tests.factories import SummaryFactory, UserFactory


@pytest.fixture
def world(study, rater_a, rater_b):
    admin = UserFactory(username="boss")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    for i in range(2):
        SummaryFactory(source__study=study, key=f"s{i + 1}")
    batch = create_batch(study=study, name="main", raters=[rater_a, rater_b], design="k_raters", k=2, seed=1)
    return study, admin, batch


def item_of(batch, rater, key="s1"):
    return batch.assignments.get(rater=rater, summary__key=key)


@pytest.mark.django_db
def test_a_rater_flags_an_item_the_admin_answers_and_the_rater_sees_it(client, world, rater_a, rater_b):
    study, admin, batch = world
    mine = item_of(batch, rater_a)
    client.force_login(rater_a)
    note = {"kind": "broken_source", "note": "The <b>table</b> is cut off."}
    response = client.post(f"/rate/{mine.uuid}/flag/", note)
    assert response.status_code == 302 and response["Location"].endswith(f"/rate/{mine.uuid}/#item-flags")
    flag = ItemFlag.objects.get()
    assert (flag.study, flag.assignment, flag.raised_by, flag.kind) == (study, mine, rater_a, "broken_source")
    page = client.get(f"/rate/{mine.uuid}/").content.decode()
    assert "The &lt;b&gt;table&lt;/b&gt; is cut off." in page and "Not answered yet." in page
    # The admin's inbox lists it, escaped, with who asked.
    client.force_login(admin)
    inbox = client.get(f"/studies/{study.slug}/flags/").content.decode()
    assert "The &lt;b&gt;table&lt;/b&gt; is cut off." in inbox and "rater_a" in inbox
    response = client.post(f"/studies/{study.slug}/flags/", {"flag": flag.uuid, "answer": "Use the PDF's table 2."})
    assert response.status_code == 302
    flag.refresh_from_db()
    assert (flag.answer, flag.answered_by, flag.shared) == ("Use the PDF's table 2.", admin, False)
    assert "Use the PDF&#x27;s table 2." not in client.get(f"/studies/{study.slug}/flags/?status=open").content.decode()
    # The rater sees the answer on the item; the other rater of the item sees neither.
    client.force_login(rater_a)
    assert "Use the PDF&#x27;s table 2." in client.get(f"/rate/{mine.uuid}/").content.decode()
    client.force_login(rater_b)
    theirs = client.get(f"/rate/{item_of(batch, rater_b).uuid}/").content.decode()
    assert "cut off" not in theirs and "table 2" not in theirs


@pytest.mark.django_db
def test_a_shared_answer_shows_to_every_rater_as_a_guideline_note(client, world, rater_a, rater_b):
    study, admin, batch = world
    flag = raise_flag(assignment=item_of(batch, rater_a), rater=rater_a, kind="guideline", note="Count tables?")
    answer_flag(flag=flag, answered_by=admin, answer="Tables count as context.", shared=True)
    client.force_login(rater_b)
    page = client.get(f"/rate/{item_of(batch, rater_b, 's2').uuid}/").content.decode()
    assert 'id="guideline-notes"' in page and "Tables count as context." in page
    assert "Count tables?" not in page  # the question and who asked stay private


@pytest.mark.django_db
@pytest.mark.parametrize(
    "post, field",
    [
        ({"kind": "rant", "note": "x"}, "kind"),
        ({"note": "x"}, "kind"),
        ({"kind": "other", "note": "   "}, "note"),
        ({"kind": "other"}, "note"),
        ({"kind": "other", "note": "bad\x00byte"}, "note"),
        ({"kind": "other", "note": "x" * 4001}, "note"),
    ],
)
def test_a_bad_flag_is_a_400_naming_the_field_and_stores_nothing(client, world, rater_a, post, field):
    _, _, batch = world
    client.force_login(rater_a)
    response = client.post(f"/rate/{item_of(batch, rater_a).uuid}/flag/", post)
    assert response.status_code == 400
    assert field in response.content.decode().split('id="flag-error">')[1].split("</p>")[0]
    assert not ItemFlag.objects.exists()


@pytest.mark.django_db
def test_a_rater_cannot_flag_or_read_another_raters_item(client, world, rater_a, rater_b, outsider):
    _, _, batch = world
    theirs = item_of(batch, rater_b)
    for who in (rater_a, outsider):
        client.force_login(who)
        assert client.get(f"/rate/{theirs.uuid}/flag/").status_code == 404
        assert client.post(f"/rate/{theirs.uuid}/flag/", {"kind": "other", "note": "x"}).status_code == 404
    assert not ItemFlag.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "post, field",
    [
        ({"flag": "not-a-uuid", "answer": "x"}, "flag"),
        ({"flag": "00000000-0000-0000-0000-000000000000", "answer": "x"}, "flag"),
        ({"answer": "x"}, "flag"),
        ({"FLAG": "", "answer": ""}, "flag"),
        ("EMPTY", "answer"),
        ("BAD", "answer"),
    ],
)
def test_a_bad_answer_is_a_400_naming_the_field(client, world, rater_a, post, field):
    study, admin, batch = world
    flag = raise_flag(assignment=item_of(batch, rater_a), rater=rater_a, kind="other", note="Hm?")
    if post == "EMPTY":
        post = {"flag": flag.uuid, "answer": "  "}
    elif post == "BAD":
        post = {"flag": flag.uuid, "answer": "a\x00"}
    client.force_login(admin)
    response = client.post(f"/studies/{study.slug}/flags/", post)
    assert response.status_code == 400
    error = response.content.decode().split('id="flags-error">')[1].split("</p>")[0]
    assert field in error
    flag.refresh_from_db()
    assert flag.answered_at is None and flag.answer == ""


@pytest.mark.django_db
def test_a_bad_inbox_filter_is_a_400_naming_the_field(client, world):
    study, admin, _ = world
    client.force_login(admin)
    response = client.get(f"/studies/{study.slug}/flags/", {"status": "everything"})
    assert response.status_code == 400 and "field &quot;status&quot;" in response.content.decode()


@pytest.mark.django_db
def test_the_export_keeps_flags_and_exclusions_with_pseudonyms(world, rater_a, rater_b, tmp_path):
    """rater_a answers first, so is rater-01 (the export numbers raters by their first
    answer); rater_b is rater-02. The admin never rated: study-admin. rater_a is excluded,
    so only rater_b's 2 answers to `overall` are left in the ratings table."""
    study, admin, batch = world
    for rater in (rater_a, rater_b):
        for key in ("s1", "s2"):
            a = item_of(batch, rater, key)
            submit_rating(assignment=a, rater=rater, answers={"overall": 3}, version=a.version)
    flag = raise_flag(assignment=item_of(batch, rater_b), rater=rater_b, kind="guideline", note="Is 3 right?")
    answer_flag(flag=flag, answered_by=admin, answer="Yes.", shared=True)
    exclude_rater(batch=batch, rater=rater_a, excluded_by=admin, reason="Answered without reading.")
    export_dataset(study=study, out_dir=tmp_path / "out", formats=["jsonl"])

    def table(name):
        return [json.loads(line) for line in (tmp_path / "out" / "jsonl" / f"{name}.jsonl").read_text().splitlines()]

    [exclusion] = table("exclusions")
    assert exclusion["batch"] == "main" and exclusion["rater"] == "rater-01"
    assert exclusion["reason"] == "Answered without reading." and exclusion["excluded_by"] == "study-admin"
    assert exclusion["items_left_out"] == 2 and exclusion["excluded_at"].endswith("Z")
    [row] = table("flags")
    assert (row["summary_key"], row["rater"], row["kind"]) == ("s1", "rater-02", "guideline")
    assert row["note"] == "Is 3 right?"
    assert (row["answer"], row["answered_by"], row["shared"]) == ("Yes.", "study-admin", True)
    overall = [r for r in table("ratings") if r["question"] == "overall"]
    assert sorted((r["rater"], r["summary_key"]) for r in overall) == [("rater-02", "s1"), ("rater-02", "s2")]
    for name in ("exclusions", "flags"):
        text = (tmp_path / "out" / "jsonl" / f"{name}.jsonl").read_text()
        assert "rater_a" not in text and "rater_b" not in text and "boss" not in text


@pytest.mark.django_db
def test_the_api_raises_and_lists_a_raters_flags(world, rater_a, rater_b):
    from tests.conftest import api_client_for

    study, admin, batch = world
    mine = item_of(batch, rater_a)
    client = api_client_for(rater_a)
    created = client.post(f"/api/assignments/{mine.uuid}/flags/", {"kind": "other", "note": "Typo?"}, format="json")
    assert created.status_code == 201 and created.json()["kind"] == "other" and created.json()["answer"] == ""
    answer_flag(flag=ItemFlag.objects.get(), answered_by=admin, answer="Not a typo.")
    [row] = client.get(f"/api/assignments/{mine.uuid}/flags/").json()
    assert (row["note"], row["answer"]) == ("Typo?", "Not a typo.")
    for body, field in (({"kind": "x", "note": "a"}, "kind"), ({"kind": "other", "note": ""}, "note")):
        response = client.post(f"/api/assignments/{mine.uuid}/flags/", body, format="json")
        assert response.status_code == 400 and field in response.json()["error"]["fields"]
    other = api_client_for(rater_b)
    assert other.get(f"/api/assignments/{mine.uuid}/flags/").status_code == 404
    assert ItemFlag.objects.count() == 1
