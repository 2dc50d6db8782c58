"""A Prolific-style study in real Chromium, with CSP and CSRF on: a participant arrives with
the panel's identifiers, consents, reads and acknowledges the instructions, answers the
background questions, rates their items, and is sent back to the panel (a local server this
test runs) with the completion code; a second participant declines and is sent back with the
screen-out code."""

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from annotate.models import Assignment, ConsentDecision, OnboardingRecord, StudyMembership
from annotate.services.members import add_study_member
from recruit.models import Participant
from recruit.services import links
from tests.browser.conftest import log_in
from tests.factories import PASSWORD, StudyFactory, UserFactory
from tests.recruit.helpers import COMPLETE, SCREENOUT, make_link, prolific_query, set_up_onboarding

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class Panel:
    """The panel's completion page: records the codes participants come back with."""

    def __init__(self):
        panel = self
        self.codes: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                panel.codes += parse_qs(urlsplit(self.path).query).get("cc", [])
                body = b"<!doctype html><title>Panel</title><h1>Submission received</h1>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/submissions/complete"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def panel():
    p = Panel()
    yield p
    p.close()


@pytest.fixture
def crowd_study(panel, settings):
    study = StudyFactory(title="Crowd study")
    set_up_onboarding(study)
    link = make_link(study, items=2, k=2, summaries=4)
    link.completion_url = panel.url
    link.save()
    return study, link


def _watch_csp(page) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None)
    return problems


def test_a_participant_goes_from_the_panel_link_to_the_completion_code(page, live_server, crowd_study, panel):
    study, link = crowd_study
    csp = _watch_csp(page)
    page.goto(f"/r/{links.link_token(link)}/{prolific_query(pid='5f8a1b2c3d4e5f6a7b8c9d0e')}")

    page.wait_for_url(f"**/r/s/{study.slug}/consent/")
    assert "stored with a pseudonym" in page.locator("#consent-text").inner_text()
    page.get_by_role("button", name="I agree to take part").click()

    page.wait_for_url(f"**/r/s/{study.slug}/instructions/")
    assert "Rate faithfulness only" in page.locator("#instructions-text").inner_text()
    page.get_by_role("button", name="Continue").click()  # without the tick: refused, named
    assert "acknowledge" in page.locator("#form-error").inner_text()
    page.get_by_label("I have read the instructions").check()
    page.get_by_role("button", name="Continue").click()

    page.wait_for_url(f"**/r/s/{study.slug}/questionnaire/")
    page.get_by_label("Practitioner or researcher").check()
    page.locator("label", has_text="2 to 5").click()
    page.get_by_label("Your first language").fill("Welsh")
    page.get_by_role("button", name="Continue").click()

    participant = Participant.objects.get()
    items = list(Assignment.objects.filter(rater=participant.user).order_by("position"))
    assert len(items) == 2
    for item in items:
        page.wait_for_url(f"**/rate/{item.uuid}/")
        assert page.locator("nav").get_by_role("link", name="Studies").count() == 0
        page.locator("label", has_text=re.compile(r"^\s*4\b")).click()
        page.get_by_role("button", name="Submit").click()

    page.wait_for_url("**/r/done/")
    assert page.locator("#completion-code").inner_text() == COMPLETE
    page.wait_for_url(f"{panel.url}?cc={COMPLETE}", timeout=60_000)
    assert panel.codes == [COMPLETE]
    assert csp == []

    participant.refresh_from_db()
    assert participant.outcome == "completed"
    assert [a.state for a in Assignment.objects.filter(rater=participant.user)] == ["submitted", "submitted"]
    assert ConsentDecision.objects.get(rater=participant.user).accepted is True
    record = OnboardingRecord.objects.get(rater=participant.user)
    assert record.answers == {"expertise": "practitioner", "years_of_practice": 2, "language": "Welsh"}
    assert record.instructions_acknowledged_at is not None


def test_a_participant_who_declines_is_sent_back_with_the_screenout_code(page, live_server, crowd_study, panel):
    study, link = crowd_study
    csp = _watch_csp(page)
    page.goto(f"/r/{links.link_token(link)}/{prolific_query(pid='6a0000000000000000000001')}")
    page.wait_for_url(f"**/r/s/{study.slug}/consent/")
    page.get_by_role("button", name="I do not agree").click()
    page.wait_for_url("**/r/done/")
    assert page.locator("#completion-code").inner_text() == SCREENOUT
    page.wait_for_url(f"{panel.url}?cc={SCREENOUT}", timeout=60_000)
    assert panel.codes == [SCREENOUT]
    assert csp == []
    participant = Participant.objects.get()
    assert participant.outcome == "declined"
    assert not Assignment.objects.filter(rater=participant.user).exclude(state="withdrawn").exists()


def test_a_signed_in_rater_is_asked_before_becoming_a_participant(page, live_server, crowd_study):
    """Opening the panel's link while signed in asks first; only the button (a POST with
    the CSRF token) signs the rater out and in as a new participant, the panel's ids kept."""
    study, link = crowd_study
    rater = UserFactory(username="lab-rater")
    add_study_member(study=StudyFactory(), user=rater, role=StudyMembership.Role.RATER)
    csp = _watch_csp(page)
    log_in(page, "lab-rater", PASSWORD)
    page.goto(f"/r/{links.link_token(link)}/{prolific_query(pid='7b0000000000000000000002')}")
    assert "You are signed in as lab-rater" in page.locator("#signed-in-as").inner_text()
    assert Participant.objects.count() == 0
    page.get_by_role("button", name="Continue as a new participant").click()
    page.wait_for_url(f"**/r/s/{study.slug}/consent/")
    assert page.get_by_text("Signed in as lab-rater").count() == 0
    participant = Participant.objects.get()
    assert (participant.external_id, participant.panel_study_id, participant.panel_session_id) == (
        "7b0000000000000000000002",
        "STUDY1",
        "SESSION1",
    )
    assert csp == []
