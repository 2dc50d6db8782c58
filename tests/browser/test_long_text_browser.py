"""A summary or source with one very long line and no spaces keeps the rating page usable.

A 200,000-character line of bracketed references took over half a minute to render:
the script counted each citation's offset from the start of the text and checked every
mark against every piece of text (both quadratic). The page must become interactive, with
every citation rendered and the line wrapped in its column. How long it takes is a figure
of `make bench` (tests/bench/bench_rating_page.py), not a limit here: a loaded 2-core
machine took 17-23 s where an idle one takes 1-5 s.
"""

import pytest

from tests.browser.conftest import log_in
from tests.factories import PASSWORD, AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LENGTH = 200_000
CITATION = "[PMC1]"
# A generous wait for the condition (the page is interactive), not a time limit: before the
# fix the page took 35 s on an idle machine (97 s where the problem was found).
WAIT_S = 600


def test_a_200000_character_line_without_spaces_keeps_the_page_responsive(page):
    rater = UserFactory(username="rater1")
    study = StudyFactory(title="Long lines")
    summary_text = (CITATION * (LENGTH // len(CITATION) + 1))[:LENGTH]
    source_text = "Start. " + "x" * LENGTH + "."
    assignment = AssignmentFactory(
        summary=SummaryFactory(source__study=study, source__key="PMC1", source__text=source_text, text=summary_text),
        rater=rater,
    )
    log_in(page, rater.username, PASSWORD)
    page.set_default_timeout(WAIT_S * 1000)

    page.goto(f"/rate/{assignment.uuid}/")  # waits for "load": the deferred script has run
    page.get_by_label("Feedback").fill("Far too long.")
    # The script did its work: every reference is a control, each linked to the source.
    assert page.locator("#summary-text .cite").count() == LENGTH // len(CITATION)
    assert page.locator("#summary-text .cite-missing").count() == 0
    # Both long lines wrap inside their columns instead of widening the page.
    for selector in ("#summary-text", "section.source"):
        overflow = page.eval_on_selector(selector, "e => e.scrollWidth - e.clientWidth")
        assert overflow <= 1, f"{selector} overflows its column by {overflow}px"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
