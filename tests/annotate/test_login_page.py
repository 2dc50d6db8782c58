"""The login page as a person or a script meets it: its own button is the page's first
submit button (the language switcher sits below the form), so pressing the first button
signs in rather than changing the language."""

import re

import pytest

from tests.factories import PASSWORD, UserFactory


@pytest.mark.django_db
def test_the_first_submit_button_on_the_login_page_is_log_in(client):
    page = client.get("/accounts/login/").content.decode()
    buttons = re.findall(r'<button type="submit"[^>]*>([^<]*)</button>', page)
    assert buttons[0] == "Log in", buttons
    # The language switcher is still offered, after the sign-in form.
    assert 'id="language-switcher"' in page
    assert page.index('action="/accounts/login/"') < page.index('id="language-switcher"')


@pytest.mark.django_db
def test_the_login_form_signs_in(client):
    UserFactory(username="ana")
    landed = client.post("/accounts/login/", {"username": "ana", "password": PASSWORD}, follow=True)
    assert landed.context["user"].is_authenticated
