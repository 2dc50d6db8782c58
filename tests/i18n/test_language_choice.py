"""Which language a rater's page is in (docs/languages.md): the switcher's choice, else the
study's language on that study's pages, else the browser's Accept-Language, else English;
the switcher is Django's set_language, a POST that needs the CSRF token; the study's
language is a setting of the study settings page, recorded like the others."""

import re

import pytest
from django.conf import settings
from django.test import Client

from annotate.models import StudyMembership, StudySettingChange
from annotate.services.members import add_study_member
from tests.factories import AssignmentFactory, SummaryFactory, UserFactory
from tests.recruit.helpers import CONSENT, arrival_url, make_link, set_up_onboarding

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(study, rater_a):
    return AssignmentFactory(summary=SummaryFactory(source__study=study), rater=rater_a, position=0)


def lang_of(response) -> str:
    return re.search(r'<html lang="([^"]+)"', response.content.decode()).group(1)


def choose_language(client, code, next_url="/rate/"):
    return client.post("/i18n/setlang/", {"language": code, "next": next_url})


def test_without_a_choice_the_pages_are_english_as_before(client, rater_a, item):
    client.force_login(rater_a)
    queue = client.get("/rate/")
    page = client.get(f"/rate/{item.uuid}/")
    assert lang_of(queue) == lang_of(page) == "en"
    assert "<h1>My queue</h1>" in queue.content.decode()
    html = page.content.decode()
    assert "Overall quality of the summary" in html and "Save draft" in html
    # An English page loads no JavaScript catalogue: its scripts' strings are the msgids.
    assert "/jsi18n/" not in html


@pytest.mark.parametrize(
    ("accept", "lang", "heading", "prompt"),
    [
        ("es-ES,es;q=0.9,en;q=0.5", "es", "Mi cola", "Calidad general del resumen"),
        ("de-DE,de;q=0.9", "de", "Meine Warteschlange", "Gesamtqualität der Zusammenfassung"),
        ("fr-FR,fr;q=0.9", "en", "My queue", "Overall quality of the summary"),
    ],
)
def test_the_browsers_language_chooses_the_pages_language(client, rater_a, item, accept, lang, heading, prompt):
    client.force_login(rater_a)
    queue = client.get("/rate/", HTTP_ACCEPT_LANGUAGE=accept)
    assert lang_of(queue) == lang and f"<h1>{heading}</h1>" in queue.content.decode()
    page = client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE=accept)
    assert lang_of(page) == lang and prompt in page.content.decode()
    assert page["Content-Language"] == lang


def test_a_translated_item_page_loads_the_javascript_catalogue(client, rater_a, item):
    client.force_login(rater_a)
    html = client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    assert re.findall(r"<script src=\"([^\"]+)\"", html) == [
        "/static/js/announce.js",
        "/jsi18n/",
        "/static/js/item_page.js",
        "/static/js/rate.js",
    ]
    catalogue = client.get("/jsi18n/", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    assert "Borrador guardado a las %s" in catalogue and "Atajos de teclado" in catalogue


def test_the_studys_language_wins_over_the_browsers_on_that_studys_pages(client, study, rater_a, item):
    study.language = "de"
    study.save()
    client.force_login(rater_a)
    page = client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE="es")
    assert lang_of(page) == "de" and "Gesamtqualität der Zusammenfassung" in page.content.decode()
    done = client.get(f"/rate/studies/{study.slug}/done/", HTTP_ACCEPT_LANGUAGE="es")
    assert lang_of(done) == "de"
    # The queue lists every study: the browser's language.
    assert lang_of(client.get("/rate/", HTTP_ACCEPT_LANGUAGE="es")) == "es"
    # A message made on that study's page is in its language too.
    submitted = client.post(
        f"/rate/{item.uuid}/",
        {"action": "submit", "version": 1, "active_seconds": 30, "overall": "4"},
        HTTP_ACCEPT_LANGUAGE="es",
        follow=True,
    )
    assert "Bewertung abgeschickt." in submitted.content.decode()


def test_the_raters_own_choice_wins_over_the_studys_language(client, study, rater_a, item):
    study.language = "de"
    study.save()
    client.force_login(rater_a)
    response = choose_language(client, "es", next_url=f"/rate/{item.uuid}/")
    assert response.status_code == 302 and response["Location"] == f"/rate/{item.uuid}/"
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "es"
    page = client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE="de")
    assert lang_of(page) == "es" and "Calidad general del resumen" in page.content.decode()
    # And English is a choice like the others.
    choose_language(client, "en")
    assert lang_of(client.get(f"/rate/{item.uuid}/")) == "en"


def test_the_switcher_is_on_the_rater_pages_and_posts_with_the_csrf_token(client, rater_a, item):
    client.force_login(rater_a)
    html = client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    form = re.search(r'<form method="post" action="/i18n/setlang/".*?</form>', html, re.S).group(0)
    assert 'name="csrfmiddlewaretoken"' in form
    # Each language named in its own words, the page's selected.
    assert re.findall(r'<option value="(\w+)" lang="\w+"( selected)?>([^<]+)</option>', form) == [
        ("en", "", "English"),
        ("es", "", "español"),
        ("de", " selected", "Deutsch"),
    ]
    # Without the token the choice is refused and nothing is set.
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(rater_a)
    refused = strict.post("/i18n/setlang/", {"language": "es", "next": "/rate/"})
    assert refused.status_code == 403 and settings.LANGUAGE_COOKIE_NAME not in refused.cookies


def test_a_language_that_is_not_offered_is_ignored(client, study, rater_a, item):
    client.force_login(rater_a)
    # Django's set_language keeps any language Django has a catalogue of: the pages ignore it.
    choose_language(client, "fr")
    assert lang_of(client.get("/rate/", HTTP_ACCEPT_LANGUAGE="es")) == "es"
    study.language = "de"
    study.save()
    assert lang_of(client.get(f"/rate/{item.uuid}/", HTTP_ACCEPT_LANGUAGE="es")) == "de"


def test_a_participants_onboarding_is_in_the_studys_language(client, study, rater_a):
    add_study_member(study=study, user=rater_a, role=StudyMembership.Role.RATER)
    set_up_onboarding(study)
    study.language = "es"
    study.save()
    client.force_login(rater_a)
    consent = client.get(f"/r/s/{study.slug}/consent/")
    html = consent.content.decode()
    assert lang_of(consent) == "es" and "Acepto participar" in html and CONSENT in html


def test_the_study_settings_page_sets_and_records_the_language(client, study):
    admin = UserFactory(username="lead")
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    client.force_login(admin)
    page = client.get(f"/studies/{study.slug}/settings/").content.decode()
    assert '<select name="language"' in page and "Language of the raters&#x27; pages" in page
    form = {
        "title": study.title,
        "guidelines": study.guidelines,
        "licence": study.licence,
        "description": study.description,
        "min_seconds_per_item": study.min_seconds_per_item,
        "language": "de",
    }
    response = client.post(f"/studies/{study.slug}/settings/", form)
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.language == "de"
    change = StudySettingChange.objects.get(study=study, field="language")
    assert (change.before, change.after, change.changed_by) == ("", "de", admin)
    refused = client.post(f"/studies/{study.slug}/settings/", form | {"language": "fr"})
    assert refused.status_code == 400
    study.refresh_from_db()
    assert study.language == "de"


def test_a_participant_the_link_turns_away_reads_why_in_the_browsers_language(client, study):
    link = make_link(study, participants=1)
    assert client.get(arrival_url(link, pid="P1"), HTTP_ACCEPT_LANGUAGE="de").status_code == 302
    client.logout()
    response = client.get(arrival_url(link, pid="P2"), HTTP_ACCEPT_LANGUAGE="de")
    html = response.content.decode()
    assert response.status_code == 403 and lang_of(response) == "de"
    assert "Diese Studie hat alle Teilnehmenden, die sie braucht." in html and "Ihr Code lautet" in html
    # The study's language wins over the browser's here too.
    study.language = "es"
    study.save()
    spanish = client.get(arrival_url(link, pid="P3"), HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "Este estudio tiene todos los participantes que necesita." in spanish
