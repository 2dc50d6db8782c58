"""Responses a browser gets compressed: pages and JSON gzipped when the client
accepts gzip, already compressed downloads (images, zip archives) left as they are."""

import gzip

import pytest
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_of_a_user():
    client = Client(HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    client.force_login(UserFactory(username="reader"))
    return client


def test_a_page_goes_out_gzipped_and_a_png_whole(client_of_a_user, settings):
    page = client_of_a_user.get("/docs/performance.md")
    assert page.status_code == 200 and page["Content-Encoding"] == "gzip"
    assert b"Performance" in gzip.decompress(page.content)
    image = client_of_a_user.get("/docs/adjudication.png")
    assert image.status_code == 200 and not image.has_header("Content-Encoding")
    png = b"".join(image.streaming_content)
    assert png.startswith(b"\x89PNG") and png == (settings.BASE_DIR / "docs" / "adjudication.png").read_bytes()


def test_a_client_that_does_not_ask_gets_the_page_whole():
    client = Client()
    client.force_login(UserFactory(username="plain"))
    page = client.get("/docs/performance.md")
    assert not page.has_header("Content-Encoding") and b"Performance" in page.content
