"""The releases page: study admins only (viewers, raters and outsiders get 404, anonymous
users the sign-in page), CSRF on every form; making a release, and pushing it to the Hub and
depositing it on Zenodo as background runs against the scripted servers, with the outcome
of every remote call on the page."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from core.background import wait_for_pool
from datasets.models import PublishRun, Release, RemoteCall
from datasets.tasks import PUBLISH_POOL
from tests.analysis.reports import rated_study
from tests.datasets.hub_server import TOKEN as HUB_TOKEN
from tests.datasets.hub_server import HubServer
from tests.datasets.test_releases import finished_export
from tests.datasets.test_releases_hub import hub_environment  # noqa: F401 - the Hub client's environment
from tests.datasets.zenodo_server import TOKEN as ZENODO_TOKEN
from tests.datasets.zenodo_server import ZenodoServer
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the runs' thread reads what the test wrote
REPO = "lab/summaries-ratings"


@pytest.fixture
def study_and_admin():
    study, admin = rated_study(n_summaries=3, raters=("ra", "rb"))
    export = finished_export(study)
    client = Client()
    client.force_login(admin)
    return study, admin, export, client


def url(study, tail=""):
    return f"/studies/{study.slug}/releases/{tail}"


def test_only_the_studys_admins_reach_the_page_and_its_buttons(study_and_admin):
    study, admin, export, admin_client = study_and_admin
    release = Release.objects.create(
        study=study, export=export, version="1.0", changelog="First.", sha256sums="", created_by="a"
    )
    viewer, outsider = UserFactory(username="viewer"), UserFactory(username="outsider")
    add_study_member(study=study, user=viewer, role=StudyMembership.Role.VIEWER)
    rater = study.memberships.filter(role="rater").first().user
    assert admin_client.get(url(study)).status_code == 200
    for user in (viewer, rater, outsider):
        client = Client()
        client.force_login(user)
        assert client.get(url(study)).status_code == 404
        data = {"export": str(export.uuid), "version": "2.0", "changelog": "Mine."}
        assert client.post(url(study), data).status_code == 404
        assert client.post(url(study, f"{release.uuid}/hub/"), {"repo": REPO}).status_code == 404
        assert client.post(url(study, f"{release.uuid}/zenodo/"), {"creators": "A, B"}).status_code == 404
    anonymous = Client().get(url(study))
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    assert not PublishRun.objects.exists() and Release.objects.count() == 1
    # Forms need the CSRF token, even for a study admin.
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin)
    page = strict.get(url(study)).content.decode()
    assert 'name="csrfmiddlewaretoken"' in page
    assert strict.post(url(study), {"version": "2.0", "changelog": "x"}).status_code == 403
    assert strict.post(url(study, f"{release.uuid}/hub/"), {"repo": REPO}).status_code == 403
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
    response = strict.post(url(study, f"{release.uuid}/hub/"), {"repo": "no owner", "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and not PublishRun.objects.exists()  # bad input: nothing started


def test_an_admin_makes_a_release_and_bad_input_changes_nothing(study_and_admin):
    study, admin, export, client = study_and_admin
    exports_page = client.get(f"/studies/{study.slug}/exports/").content.decode()
    assert f'href="/studies/{study.slug}/releases/"' in exports_page
    bad = client.post(url(study), {"export": str(export.uuid), "version": "v1", "changelog": "First."})
    assert bad.status_code == 400 and "a version number such as 1, 1.1 or 1.1.0" in bad.content.decode()
    bad = client.post(
        url(study), {"export": str(export.uuid), "version": "1.0", "changelog": "First.", "creators": "Marie Curie"}
    )
    assert bad.status_code == 400 and "write a creator as &#x27;Family, Given&#x27;" in bad.content.decode()
    assert not Release.objects.exists()
    data = {
        "export": str(export.uuid),
        "version": "1.0",
        "changelog": "First <release>.",
        "creators": "Curie, Marie; Lab of Summaries\nNoether, Emmy",
    }
    response = client.post(url(study), data, follow=True)
    page = response.content.decode()
    release = Release.objects.get(study=study)
    assert release.creators == [{"name": "Curie, Marie", "affiliation": "Lab of Summaries"}, {"name": "Noether, Emmy"}]
    assert "Release 1.0 made." in page and "First &lt;release&gt;." in page and "<release>" not in page
    assert release.sha256sums.splitlines()[0] in page  # the checksums are shown


def test_the_page_pushes_and_deposits_in_the_background_and_shows_each_calls_outcome(study_and_admin, monkeypatch):
    study, admin, export, client = study_and_admin
    client.post(
        url(study), {"export": str(export.uuid), "version": "1.0", "changelog": "First.", "creators": "Curie, Marie"}
    )
    release = Release.objects.get(study=study)
    with ZenodoServer() as zenodo, HubServer(lfs_threshold=4096) as hub:
        monkeypatch.setenv("ZENODO_URL", zenodo.url)
        monkeypatch.setenv("ZENODO_TOKEN", ZENODO_TOKEN)
        monkeypatch.setenv("ZENODO_MAX_RETRIES", "0")
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", HUB_TOKEN)
        # A refusal first: the run fails with Zenodo's answer, shown on the page.
        zenodo.faults.append(("POST", r"/api/deposit/depositions", "403"))
        response = client.post(url(study, f"{release.uuid}/zenodo/"), {"keywords": "summaries, ratings"}, follow=True)
        assert "publishing on Zenodo has started" in response.content.decode()
        wait_for_pool(PUBLISH_POOL, timeout=600)
        page = client.get(url(study)).content.decode()
        assert "Zenodo refused a new deposition: HTTP 403" in page and "refused: Scripted fault." in page
        assert PublishRun.objects.get().status == "failed"
        # Again: the deposit is published, with the creators entered on the release form.
        client.post(url(study, f"{release.uuid}/zenodo/"), {"related": f"{hub.url}/datasets/{REPO}"})
        wait_for_pool(PUBLISH_POOL, timeout=600)
        release.refresh_from_db()
        assert release.zenodo_state == "published" and release.doi
        (deposition,) = [d for d in zenodo.depositions.values() if d["submitted"]]
        assert deposition["metadata"]["creators"] == [{"name": "Curie, Marie"}]
        related = {"identifier": f"{hub.url}/datasets/{REPO}", "relation": "isSupplementTo"}
        assert deposition["metadata"]["related_identifiers"] == [related]
        # Then the Hub: the card pushed cites the DOI.
        client.post(url(study, f"{release.uuid}/hub/"), {"repo": REPO, "visibility": "private"})
        wait_for_pool(PUBLISH_POOL, timeout=600)
        release.refresh_from_db()
        assert (
            release.hub_state == "tagged"
            and hub.repos[REPO].private
            and hub.repos[REPO].tags == {"1.0": release.hub_commit}
        )
        assert release.doi in hub.files_at(REPO, "1.0")["README.md"].decode()
    page = client.get(url(study)).content.decode()
    assert f'href="https://doi.org/{release.doi}"' in page
    assert f'href="{release.hub_url}/tree/1.0"' in page and release.hub_commit[:12] in page
    assert "Push to the Hub" not in page and "Deposit on Zenodo" not in page  # both done
    for call in RemoteCall.objects.filter(release=release):
        assert f"<code>{call.method} {call.path}</code>" in page
    assert list(PublishRun.objects.order_by("created_at").values_list("target", "status")) == [
        ("zenodo", "failed"),
        ("zenodo", "done"),
        ("hub", "done"),
    ]


def test_the_page_reads_a_fixed_number_of_queries(study_and_admin):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    study, admin, export, client = study_and_admin

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url(study)).status_code == 200
        return len(captured)

    Release.objects.create(study=study, export=export, version="1.0", changelog="1.", sha256sums="", created_by="a")
    one = queries()
    for version in ("1.1", "1.2", "2.0"):
        release = Release.objects.create(
            study=study, export=export, version=version, changelog="x", sha256sums="", created_by="a"
        )
        RemoteCall.objects.create(release=release, service="hub", method="GET", path="/api/x", outcome="ok")
        PublishRun.objects.create(study=study, release=release, target="hub", requested_by="a", status="done")
    assert queries() == one
