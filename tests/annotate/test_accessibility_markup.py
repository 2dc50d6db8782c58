"""Accessibility beyond the automated checks, in the markup and the CSS:
the focus ring's contrast, aria-describedby pointing at elements that exist, and no
heading inside a <summary>. Their behaviour in Chromium: tests/browser/test_accessibility_browser.py."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from annotate.models import StudyMembership
from annotate.services.members import add_study_member
from tests.factories import AssignmentFactory, StudyFactory, SummaryFactory, UserFactory

STATIC = Path(settings.BASE_DIR) / "static" / "css"


def _channel(value: int) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(colour: str) -> float:
    """WCAG 2.x relative luminance of a #rgb or #rrggbb colour."""
    hex_digits = colour.lstrip("#")
    if len(hex_digits) == 3:
        hex_digits = "".join(c * 2 for c in hex_digits)
    r, g, b = (int(hex_digits[i : i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * _channel(r) + 0.7152 * _channel(g) + 0.0722 * _channel(b)


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_formula_against_published_values():
    # WCAG's own extremes and WebAIM's checker: #767676 on white is 4.54:1; the old ring 1.86:1.
    assert contrast("#000", "#fff") == pytest.approx(21.0)
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)
    assert contrast("#f0b429", "#ffffff") == pytest.approx(1.86, abs=0.01)


def css_text() -> str:
    return "".join(path.read_text(encoding="utf-8") for path in sorted(STATIC.glob("*.css")))


def resolve(value: str, css: str) -> str:
    """A colour as written, with var(--name) looked up in :root."""
    found = re.fullmatch(r"var\((--[\w-]+)\)", value.strip())
    if not found:
        return value.strip()
    declared = re.search(re.escape(found.group(1)) + r":\s*(#[0-9a-fA-F]{3,6})", css)
    assert declared, f"{found.group(1)} is not declared"
    return declared.group(1)


def test_every_focus_ring_has_3_to_1_against_white_and_every_light_background():
    css = css_text()
    rings = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        if ":focus" not in selectors:
            continue
        for outline in re.findall(r"outline(?:-color)?:\s*([^;]+)", body):
            colour = next((part for part in outline.split() if part.startswith(("#", "var("))), None)
            if colour:
                rings.append((selectors.strip(), resolve(colour, css)))
    assert len(rings) >= 2, rings  # the shared ring and the citations'
    # The page backgrounds: white, the body's --bg and every light background the CSS paints
    # (panels, tables, highlights) a focused control can sit on.
    backgrounds = {"#ffffff", resolve("var(--bg)", css)}
    backgrounds |= {c for c in re.findall(r"background:\s*(#[0-9a-fA-F]{3,6})\b", css) if luminance(c) > 0.4}
    assert len(backgrounds) > 10
    for selectors, colour in rings:
        for background in backgrounds:
            ratio = contrast(colour, background)
            assert ratio >= 3.0, f"{selectors}: {colour} on {background} is {ratio:.2f}:1"


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: list[str] = []
        self.described: list[tuple[str, str]] = []  # (tag, referenced id)
        self.stack: list[str] = []
        self.heading_in_summary: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        for ref in (attrs.get("aria-describedby") or "").split():
            self.described.append((tag, ref))
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6") and "summary" in self.stack:
            self.heading_in_summary.append(tag)
        if tag not in ("input", "br", "img", "meta", "link", "hr"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass


def parsed(html: str) -> _Ids:
    parser = _Ids()
    parser.feed(html)
    return parser


@pytest.fixture
def study_admin(db):
    study = StudyFactory()
    SummaryFactory(source__study=study, key="s1")
    admin = UserFactory(username="pi", is_staff=True)
    add_study_member(study=study, user=admin, role=StudyMembership.Role.ADMIN)
    return study, admin


@pytest.mark.django_db
def test_the_batch_forms_aria_describedby_point_at_elements_with_those_ids(client, study_admin):
    study, admin = study_admin
    client.force_login(admin)
    url = reverse("studies:batch-create", args=[study.slug])
    for response in (client.get(url), client.post(url, {"action": "preview", "name": "", "k": "x"})):
        page = parsed(response.content.decode())
        assert len(page.described) >= 5  # the hints are there to point at
        missing = [ref for _, ref in page.described if ref not in page.ids]
        assert not missing, f"aria-describedby without an element: {missing}"
        duplicated = {i for i in page.ids if page.ids.count(i) > 1}
        assert not duplicated


@pytest.mark.django_db
def test_no_heading_sits_inside_a_summary_element(client, rater_a, study_admin):
    study, admin = study_admin
    assignment = AssignmentFactory(summary=study.summaries.get(key="s1"), rater=rater_a)
    client.force_login(rater_a)
    page = parsed(client.get(f"/rate/{assignment.uuid}/").content.decode())
    assert "source-heading" in page.ids and not page.heading_in_summary
    templates = Path(settings.BASE_DIR) / "templates"
    for path in templates.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"<summary[^>]*>\s*<h[1-6]", text), f"{path}: a heading inside <summary>"
