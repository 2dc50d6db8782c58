"""A rater whose browser asks for Spanish does a whole study in Spanish in Chromium: the
queue, the rating page (its rubric and what its script writes), the submit and the end
page, with no English string of the catalogues on any of them (docs/languages.md)."""

import re

import pytest
from playwright.sync_api import expect

from annotate.models import Assignment
from annotate.services import ratings
from tests.factories import PASSWORD, AssignmentFactory, StudyFactory, SummaryFactory, UserFactory
from tests.i18n.catalogues import english_in, english_strings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The material of the study is Spanish too: only the interface is under test.
SOURCE = "El fármaco A redujo la presión arterial. Se toleró bien."


def english_on(page, strings) -> list[str]:
    return english_in(page.evaluate("document.title + '\\n' + document.body.innerText"), strings)


@pytest.fixture
def spanish_page(browser, live_server, server_gate):
    server_gate.open()
    context = browser.new_context(base_url=live_server.url, locale="es-ES", viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    try:
        context.close()
    finally:
        server_gate.close_and_drain(timeout_s=120)


def test_a_rater_does_a_whole_study_in_spanish(spanish_page):
    page = spanish_page
    rater = UserFactory(username="evaluadora")
    study = StudyFactory(title="Estudio de resúmenes", guidelines="Juzgue solo frente al contexto.")
    summary = SummaryFactory(
        source__study=study,
        source__title="Un ensayo aleatorizado",
        source__text=SOURCE,
        text="El fármaco A redujo la presión [PMC1].",
    )
    assignment = AssignmentFactory(summary=summary, rater=rater, position=0)
    english = english_strings("es")
    assert "Save draft" in english and "Keyboard shortcuts" in english  # both catalogues are read

    # The login page is in Spanish too.
    page.goto("/accounts/login/")
    assert page.get_by_role("heading", name="Iniciar sesión").is_visible()
    assert english_on(page, english) == []
    page.locator("input[name=username]").fill(rater.username)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("input[name=password]").press("Enter")
    page.wait_for_url(re.compile(r".*/rate/$"))

    # The queue.
    assert page.locator("html").get_attribute("lang") == "es"
    assert page.get_by_role("heading", name="Mi cola").is_visible()
    assert english_on(page, english) == []

    # The rating page: the interface, the rubric (LitSumm's Spanish texts) and the script.
    page.get_by_role("link", name="Elemento 1", exact=True).click()
    page.wait_for_url(f"**/rate/{assignment.uuid}/")
    assert page.get_by_role("group", name=re.compile("^Calidad general del resumen")).is_visible()
    page.get_by_label("Contiene alucinaciones").check()
    # What rate.js writes: the draft it saved, and its list of shortcuts.
    expect(page.locator("#save-status")).to_have_text(re.compile(r"^Borrador guardado a las "))
    page.locator("body").press("?")
    assert page.get_by_role("dialog", name="Atajos de teclado").is_visible()
    assert english_on(page, english) == []
    page.keyboard.press("Escape")

    # A broken rule of the rubric is refused in Spanish, then the answer is submitted.
    page.locator("label[for=q-overall-5]").click()
    page.get_by_role("button", name="Enviar", exact=True).click()
    page.wait_for_selector("#error-summary")
    assert "con una alucinación marcada, elija 3 o menos" in page.locator("#error-summary").inner_text()
    assert english_on(page, english) == []
    page.locator("label[for=q-overall-2]").click()
    page.get_by_role("button", name="Enviar", exact=True).click()

    # The end page.
    page.wait_for_url(f"**/rate/studies/{study.slug}/done/")
    assert page.locator("#done-message").inner_text().startswith("Todo listo")
    assert "Valoración enviada." in page.locator(".messages").inner_text()
    assert english_on(page, english) == []
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED

    # The switcher: the same page in German, and the choice kept for the next page.
    page.get_by_label("Idioma").select_option("de")
    page.get_by_role("button", name="Cambiar idioma").click()
    page.wait_for_url(f"**/rate/studies/{study.slug}/done/")
    assert page.locator("html").get_attribute("lang") == "de"
    assert page.locator("#done-message").inner_text().startswith("Alles erledigt")
    page.goto("/rate/")
    assert page.get_by_role("heading", name="Meine Warteschlange").is_visible()

    # The check itself sees English when there is some: the queue in English.
    page.get_by_label("Sprache").select_option("en")
    page.get_by_role("button", name="Sprache wechseln").click()
    page.wait_for_url("**/rate/")
    assert "My queue" in english_on(page, english)


def test_a_draft_refused_by_the_server_is_explained_in_spanish(spanish_page):
    """What rate.js shows of a refusal comes from the API: its message is Spanish too."""
    page = spanish_page
    rater = UserFactory(username="evaluador")
    study = StudyFactory(title="Estudio de resúmenes", guidelines="Juzgue solo frente al contexto.")
    summary = SummaryFactory(
        source__study=study, source__title="Un ensayo", source__text=SOURCE, text="El fármaco A redujo la presión."
    )
    assignment = AssignmentFactory(summary=summary, rater=rater, position=0)
    english = english_strings("es")
    page.goto("/accounts/login/")
    page.locator("input[name=username]").fill(rater.username)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("input[name=password]").press("Enter")
    page.wait_for_url(re.compile(r".*/rate/$"))
    page.goto(f"/rate/{assignment.uuid}/")
    page.get_by_label("Contiene alucinaciones").check()
    expect(page.locator("#save-status")).to_have_text(re.compile(r"^Borrador guardado a las "))

    # Another tab or device writes the item meanwhile: the page's next save is stale.
    assignment.refresh_from_db()
    ratings.save_draft(assignment=assignment, rater=rater, answers={"overall": 3}, version=assignment.version)
    page.get_by_label("Contiene alucinaciones").uncheck()
    expect(page.locator("#save-status")).to_contain_text("Esta valoración se cambió en otro lugar")
    expect(page.locator("#save-problem")).to_contain_text("No guardado: este elemento se cambió en otro lugar")
    assert english_on(page, english) == []
