"""docs/*.md as pages of the site (config/docs.py), so that pages can link their
documentation: signed-in users only, names only (never a path), raw HTML escaped,
headings with GitHub's anchors, and the docs' screenshots."""

import pytest

from config.docs import heading_anchor

pytestmark = pytest.mark.django_db


def test_a_doc_is_a_page_with_its_title_anchors_and_working_relative_links(admin_client):
    page = admin_client.get("/docs/batches.md")
    html = page.content.decode()
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    assert "<title>Batches, progress and adjudication · Documentation" in html
    assert '<h2 id="building-a-batch">Building a batch</h2>' in html
    assert '<a href="security.md">security.md</a>' in html  # resolves to /docs/security.md
    assert admin_client.get("/docs/security.md").status_code == 200
    image = admin_client.get("/docs/rating-page.png")
    assert image.status_code == 200 and image["Content-Type"] == "image/png"


def test_only_signed_in_users_and_only_files_of_docs(client, admin_client):
    assert client.get("/docs/batches.md").status_code == 302
    for path in (
        "/docs/nope.md",
        "/docs/..%2FREADME.md",
        "/docs/.hidden.md",
        "/docs/Batches.md",
        "/docs/screenshots.md",
    ):
        assert admin_client.get(path).status_code == 404, path
    assert admin_client.get("/docs/..%2Fconfig%2Fsettings.png").status_code == 404


def test_raw_html_in_a_doc_is_shown_as_text(admin_client, settings, tmp_path):
    settings.BASE_DIR = tmp_path
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("# X\n\n<script>alert(1)</script> <b>bold</b>\n", encoding="utf-8")
    html = admin_client.get("/docs/x.md").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [  # as GitHub writes them
        ("Building a batch", "building-a-batch"),
        (
            "`analyze_study SLUG --out DIR`: everything for a study",
            "analyze_study-slug---out-dir-everything-for-a-study",
        ),
        ("Disagreements, discussion, consensus, re-rating", "disagreements-discussion-consensus-re-rating"),
    ],
)
def test_heading_anchors_are_githubs(heading, anchor):
    assert heading_anchor(heading) == anchor
