"""The refusals a rater or a participant meets are in the page's language, with no English
string of the catalogues in them (docs/languages.md): the sign-in and password pages, a 403
and a 404, a refused submit on the rating page and through the API its scripts call
(required, out of range, changed elsewhere, paused, onboarding first, participation over),
and the login throttle's lock."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.models import Assignment, StudyMembership
from annotate.services.members import add_study_member, invite_link
from annotate.services.monitoring import pause_rater
from recruit.models import Participant
from tests.factories import AssignmentFactory, SummaryFactory, UserFactory
from tests.i18n.catalogues import english_in, english_strings
from tests.i18n.templates import visible_text
from tests.recruit.helpers import arrival_url, make_link, set_up_onboarding

pytestmark = pytest.mark.django_db

SPANISH = {"HTTP_ACCEPT_LANGUAGE": "es-ES,es;q=0.9"}


@pytest.fixture(scope="module")
def english():
    strings = english_strings("es")
    assert "an answer is required" in strings and "Log in" in strings
    return strings


@pytest.fixture
def item(study, rater_a):
    return AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=0)


def alerts(response) -> str:
    """The refusal's words on a page: what its alerts and error lines say."""
    html = response.content.decode()
    found = re.findall(r'<(p|div)\b[^>]*(?:role="alert"|class="error[^"]*")[^>]*>(.*?)</\1>', html, re.S)
    return "\n".join(visible_text(inner) for _, inner in found)


def api_words(response) -> str:
    """An API error's message and its fields' messages, as the rating page's scripts show them."""
    error = response.json()["error"]
    fields = error.get("fields", {})
    return "\n".join([error["message"], *(str(v) for v in fields.values())])


@pytest.mark.parametrize(
    ("url", "heading"),
    [
        ("/accounts/login/", "Iniciar sesión"),
        ("/accounts/password_reset/", "Restablecer su contraseña"),
        ("/accounts/password_reset/done/", None),
    ],
)
def test_the_sign_in_pages_are_in_spanish(client, english, url, heading):
    response = client.get(url, **SPANISH)
    assert response.status_code == 200
    shown = visible_text(response.content.decode())
    assert english_in(shown, english) == []
    if heading:
        assert f"<h1>{heading}</h1>" in response.content.decode()


def test_a_refused_login_and_the_lock_are_in_spanish(client, english):
    UserFactory(username="ana")
    refused = client.post("/accounts/login/", {"username": "ana", "password": "wrong"}, **SPANISH)
    assert "El nombre de usuario y la contraseña no coinciden." in alerts(refused)
    assert english_in(visible_text(refused.content.decode()), english) == []
    for _ in range(20):
        locked = client.post("/accounts/login/", {"username": "ana", "password": "wrong"}, **SPANISH)
        if locked.status_code == 429:
            break
    assert locked.status_code == 429
    words = alerts(locked)
    assert "Demasiados inicios de sesión fallidos" in words and "Vuelva a intentarlo en" in words
    assert english_in(visible_text(locked.content.decode()), english) == []


def test_a_403_page_is_in_spanish(client, english, rater_a):
    # A rater follows the Studies link to "New study", which needs a permission raters lack.
    client.force_login(rater_a)
    response = client.get("/studies/new/", **SPANISH)
    assert response.status_code == 403
    html = response.content.decode()
    assert "<h1>No puede abrir esta página</h1>" in html and "que su cuenta no tiene" in alerts(response)
    assert english_in(visible_text(html), english) == []


def test_a_404_page_is_in_spanish_and_in_the_sites_layout(client, english, rater_a, rater_b, item):
    # Another rater's item does not exist for this one.
    client.force_login(rater_b)
    response = client.get(f"/rate/{item.uuid}/", **SPANISH)
    assert response.status_code == 404
    html = response.content.decode()
    assert '<header class="site">' in html and "<h1>Esta página no existe</h1>" in html
    assert english_in(visible_text(html), english) == []


def test_a_refused_submit_on_the_rating_page_is_in_spanish(client, english, rater_a, item):
    client.force_login(rater_a)
    missing = client.post(f"/rate/{item.uuid}/", {"action": "submit", "version": 1}, **SPANISH)
    assert missing.status_code == 400 and "se requiere una respuesta" in alerts(missing)
    assert english_in(alerts(missing), english) == []
    out_of_range = client.post(f"/rate/{item.uuid}/", {"action": "submit", "version": 1, "overall": "9"}, **SPANISH)
    assert out_of_range.status_code == 400 and "debe ser uno de 1, 2, 3, 4, 5" in alerts(out_of_range)
    assert english_in(alerts(out_of_range), english) == []
    # Written elsewhere meanwhile: the stale post is refused in Spanish too.
    client.post(f"/rate/{item.uuid}/", {"action": "save", "version": 1, "overall": "2"}, **SPANISH)
    stale = client.post(f"/rate/{item.uuid}/", {"action": "submit", "version": 1, "overall": "4"}, **SPANISH)
    assert stale.status_code == 409 and "Esta valoración se cambió en otro lugar" in alerts(stale)
    assert english_in(alerts(stale), english) == []
    item.refresh_from_db()
    assert item.state != Assignment.State.SUBMITTED


def test_the_apis_refusals_that_the_rating_page_shows_are_in_its_language(client, english, rater_a, item):
    client.force_login(rater_a)
    url = f"/api/assignments/{item.uuid}/"

    def put(answers, version=1, **headers):
        body = {"version": version, "answers": answers}
        return client.put(f"{url}rating/", body, content_type="application/json", **headers)

    out_of_range = put({"overall": 9}, **SPANISH)
    assert out_of_range.status_code == 400 and out_of_range["Content-Language"] == "es"
    assert "debe ser uno de 1, 2, 3, 4, 5" in api_words(out_of_range)
    assert english_in(api_words(out_of_range), english) == []
    missing = client.post(f"{url}submit/", {"version": 1, "answers": {}}, content_type="application/json", **SPANISH)
    assert missing.status_code == 400 and "se requiere una respuesta" in api_words(missing)
    assert english_in(api_words(missing), english) == []
    assert put({"overall": 3}, **SPANISH).status_code == 200
    stale = put({"overall": 4}, **SPANISH)
    assert stale.status_code == 409 and "Esta valoración se cambió en otro lugar" in api_words(stale)
    # Without a language asked for, as a script or another client: English, as before.
    assert "changed elsewhere" in api_words(put({"overall": 4}))


def test_the_api_follows_the_studys_language_like_the_item_page(client, english, study, rater_a, item):
    study.language = "es"
    study.save()
    client.force_login(rater_a)
    response = client.put(
        f"/api/assignments/{item.uuid}/rating/",
        {"version": 1, "answers": {"overall": 9}},
        content_type="application/json",
        HTTP_ACCEPT_LANGUAGE="en",
    )
    assert response.status_code == 400 and response["Content-Language"] == "es"
    assert "debe ser uno de" in api_words(response)


def test_a_paused_raters_refusal_is_in_spanish(client, english, study, rater_a, item):
    lead = UserFactory(username="lead")
    add_study_member(study=study, user=lead, role=StudyMembership.Role.ADMIN)
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    pause_rater(study=study, rater=rater_a, paused_by=lead)
    client.force_login(rater_a)
    response = client.put(
        f"/api/assignments/{item.uuid}/rating/",
        {"version": 1, "answers": {"overall": 3}},
        content_type="application/json",
        **SPANISH,
    )
    assert response.status_code == 403 and "ha pausado su trabajo" in api_words(response)
    assert english_in(api_words(response), english) == []


def test_the_onboarding_gate_refuses_in_spanish(client, english, study, rater_a, item):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    set_up_onboarding(study)
    client.force_login(rater_a)
    response = client.get(f"/api/assignments/{item.uuid}/", **SPANISH)
    assert response.status_code == 403 and response.json()["error"]["code"] == "onboarding_required"
    assert "Termine primero la incorporación" in api_words(response)
    assert english_in(api_words(response), english) == []


def test_a_participation_that_is_over_refuses_in_spanish_on_the_page_and_in_the_api(client, english, study):
    link = make_link(study, items=2, minutes=20)
    client.get(arrival_url(link, pid="LATE"))
    me = Participant.objects.get(external_id="LATE")
    item = Assignment.objects.filter(rater=me.user, batch=link.batch).first()
    # Past the link's time budget: the next answer comes too late.
    Participant.objects.filter(pk=me.pk).update(created_at=timezone.now() - timedelta(minutes=21))
    page = client.post(f"/rate/{item.uuid}/", {"action": "submit", "version": item.version, "overall": "4"}, **SPANISH)
    assert page.status_code == 403
    assert "Se acabó su tiempo para este estudio" in alerts(page)
    assert english_in(visible_text(page.content.decode()), english) == []
    api = client.post(
        f"/api/assignments/{item.uuid}/submit/",
        {"version": item.version, "answers": {"overall": 4}},
        content_type="application/json",
        **SPANISH,
    )
    assert api.status_code == 403 and api.json()["error"]["code"] == "participation_over"
    assert english_in(api_words(api), english) == []


def test_an_empty_question_to_the_study_admin_is_refused_in_spanish(client, english, rater_a, item):
    client.force_login(rater_a)
    url = reverse("annotate:flag", kwargs={"assignment_uuid": item.uuid})
    response = client.post(url, {"kind": "other", "note": "   "}, **SPANISH)
    assert response.status_code == 400 and "Su nota está vacía" in alerts(response)
    assert english_in(alerts(response), english) == []


def test_an_invitation_and_its_refusal_are_in_spanish(english, study):
    study.title = "Estudio piloto"
    study.save()
    lead = UserFactory(username="lead")
    add_study_member(study=study, user=lead, role=StudyMembership.Role.ADMIN)
    ana = UserFactory(username="ana")
    ana.set_unusable_password()
    ana.save()
    add_study_member(study=study, user=ana, role=StudyMembership.Role.RATER)
    link = invite_link(user=ana, study=study, issuer=lead)
    page = Client().get(link, follow=True, **SPANISH)
    html = page.content.decode()
    assert page.status_code == 200 and "<h1>Elija su contraseña</h1>" in html
    assert english_in(visible_text(html), english) == []
    # Whoever made the link no longer administers the study: the link's page says why.
    StudyMembership.objects.filter(study=study, user=lead).delete()
    refused = Client().get(link, follow=True, **SPANISH)
    html = refused.content.decode()
    assert refused.status_code == 403 and "ya no administra el estudio «Estudio piloto»" in html
    assert "Pida un enlace nuevo a la administración del estudio." in html
    assert english_in(visible_text(html), english) == []
