"""Recruitment links while they run (docs/recruitment.md): one stable URL each, limits,
codes, completion URL and messages changed on the page with each change recorded (who,
when, before, after), the codes shown, and a copy button without inline script."""

import re

import pytest
from django.core import signing

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from recruit.models import LinkChange, Participant
from recruit.services import links, participation
from tests.factories import UserFactory
from tests.recruit.helpers import COMPLETE, SCREENOUT, make_link, prolific_query

pytestmark = pytest.mark.django_db


@pytest.fixture
def boss(study):
    user = UserFactory(username="boss")
    add_study_member(study=study, user=user, role=StudyMembership.Role.ADMIN)
    return user


def _edit(link, **values):
    form = {f: getattr(link, f) for f in links.EDITABLE} | values
    return {f"{link.uuid}-{k}": v for k, v in form.items()}


def test_a_link_has_one_stable_url_that_carries_no_timestamp(client, study, boss):
    link = make_link(study)
    token = links.link_token(link)
    assert signing.Signer(salt=links.LINK_SALT).unsign(token) == str(link.uuid)
    client.force_login(boss)
    pages = [client.get(f"/studies/{study.slug}/recruitment/").content.decode() for _ in range(2)]
    urls = [re.findall(r'class="link-url" id="[^"]+" value="([^"]+)"', page) for page in pages]
    assert urls[0] == urls[1] and len(urls[0]) == 1 and f"/r/{token}/" in urls[0][0]


def test_a_url_handed_out_before_still_works(client, study):
    link = make_link(study)
    old = signing.dumps(str(link.uuid), salt=links.LINK_SALT, compress=False)
    assert client.get(f"/r/{old}/{prolific_query()}").status_code == 302
    assert Participant.objects.count() == 1


def test_the_page_shows_codes_completion_url_and_a_copy_button_without_inline_script(client, study, boss):
    link = make_link(study)
    client.force_login(boss)
    page = client.get(f"/studies/{study.slug}/recruitment/").content.decode()
    assert f"<code>{COMPLETE}</code>" in page and f"<code>{SCREENOUT}</code>" in page
    assert "http://127.0.0.1:9/complete" in page
    assert f'data-copy="url-{link.uuid}"' in page
    assert re.search(r'<script src="/static/js/copy\.js[^"]*" defer></script>', page)
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)  # no inline script
    assert "style=" not in page


def test_limits_codes_and_url_are_changed_on_the_page_and_recorded(client, study, boss):
    link = make_link(study, participants=1)
    participation.arrive(link=link, panel="prolific", external_id="FIRST")
    client.force_login(boss)
    url = f"/studies/{study.slug}/recruitment/{link.uuid}/edit/"
    response = client.post(
        url,
        _edit(
            link,
            max_participants=5,
            completion_code="NEWCODE",
            completion_url="https://example.org/done",
            left_code="BYE1",
        ),
        follow=True,
    )
    assert "changed" in response.content.decode()
    link.refresh_from_db()
    assert (link.max_participants, link.completion_code, link.left_code) == (5, "NEWCODE", "BYE1")
    change = LinkChange.objects.get()
    assert change.changed_by == boss
    assert change.changes == {
        "max_participants": [1, 5],
        "completion_url": ["http://127.0.0.1:9/complete", "https://example.org/done"],
        "completion_code": [COMPLETE, "NEWCODE"],
        "left_code": ["", "BYE1"],
    }
    page = client.get(f"/studies/{study.slug}/recruitment/").content.decode()
    assert "max_participants 1 → 5" in page and "boss" in page
    # The new limit lets the next participant in.
    participation.arrive(link=link, panel="prolific", external_id="SECOND")
    assert Participant.objects.count() == 2


def test_a_bad_change_is_refused_and_changes_nothing(client, study, boss, outsider):
    link = make_link(study)
    client.force_login(boss)
    url = f"/studies/{study.slug}/recruitment/{link.uuid}/edit/"
    response = client.post(url, _edit(link, screenout_code=COMPLETE), follow=True)
    assert "must differ from the completion code" in response.content.decode()
    response = client.post(url, _edit(link, max_participants=0), follow=True)
    assert "max_participants" in response.content.decode()
    same = client.post(url, _edit(link), follow=True)
    assert "nothing changed" in same.content.decode()
    assert not LinkChange.objects.exists()
    client.force_login(outsider)
    assert client.post(url, _edit(link, max_participants=9)).status_code == 404
    link.refresh_from_db()
    assert link.max_participants == 30
