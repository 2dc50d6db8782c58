"""docs/*.md as pages of the site (config/docs.py), so that pages can link their
documentation: signed-in users only, names only (never a path), raw HTML escaped,
headings with GitHub's anchors, and the docs' screenshots."""

from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from config.docs import docs_folder, heading_anchor

pytestmark = pytest.mark.django_db

DOCS_CSS = Path(django_settings.BASE_DIR) / "static" / "css" / "docs.css"


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


class _InlineStyle(HTMLParser):
    """Every style="" attribute and <style> element of a page, as the browser parses it."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "style":
            self.found.append("<style>")
        self.found += [f"<{tag} style={value!r}>" for name, value in attrs if name == "style"]

    handle_startendtag = handle_starttag


def inline_styles(html: str) -> list[str]:
    parser = _InlineStyle()
    parser.feed(html)
    parser.close()
    return parser.found


def test_no_doc_page_has_inline_style_for_the_content_security_policy_to_refuse(admin_client):
    names = sorted(path.stem for path in docs_folder().glob("*.md"))
    assert "performance" in names and len(names) > 10
    found = {}
    for name in names:
        page = admin_client.get(f"/docs/{name}.md")
        assert page.status_code == 200, name
        assert "style-src 'self'" in page["Content-Security-Policy"]
        if hits := inline_styles(page.content.decode()):
            found[name] = hits[:3]
    assert found == {}


def test_table_alignment_is_a_class_the_docs_stylesheet_defines(admin_client, settings, tmp_path):
    settings.BASE_DIR = tmp_path
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "t.md").write_text(
        "# T\n\n| a | b | c | d |\n|:--|--:|:-:|---|\n| 1 | 2 | 3 | 4 |\n", encoding="utf-8"
    )
    html = admin_client.get("/docs/t.md").content.decode()
    assert '<th class="align-left">a</th>' in html and '<td class="align-right">2</td>' in html
    assert '<td class="align-center">3</td>' in html and "<td>4</td>" in html
    assert inline_styles(html) == []
    stylesheet = DOCS_CSS.read_text(encoding="utf-8")
    assert "/static/css/docs.css" in html
    for align in ("left", "right", "center"):
        assert f".align-{align}" in stylesheet and f"text-align: {align}" in stylesheet
