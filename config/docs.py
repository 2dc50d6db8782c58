"""The project's documentation (docs/*.md) as pages of the site, so that a page can link
to the part of it that explains it (the batch builder's "See docs/batches.md" was plain
text no user could open). Markdown is rendered by markdown-it-py with raw HTML off: the
docs are ours, but nothing in them is taken as markup. Headings get GitHub's anchors, so
links such as `import-format.md#questions` land where they point. A table column's
alignment is a class (`align-right`, static/css/docs.css), not markdown-it's inline
`style="text-align:…"`, which the Content-Security-Policy (`style-src 'self'`) refuses.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

# A file name of docs/ (lower case, digits, dashes), never a path.
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
# What markdown-it's table rule puts on a cell of an aligned column.
_ALIGN = re.compile(r"text-align:(left|center|right)")


def docs_folder() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def _doc_file(name: str, suffix: str) -> Path:
    if not _NAME.fullmatch(name):
        raise Http404("No such page of the documentation.")
    path = docs_folder() / f"{name}{suffix}"
    if not path.is_file():
        raise Http404("No such page of the documentation.")
    return path


def heading_anchor(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@lru_cache(maxsize=64)
def _rendered(path: Path, mtime: float) -> tuple[str, str]:
    """(title, HTML) of a Markdown file; cached until the file changes."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(path.read_text(encoding="utf-8"))
    title = path.stem
    for token in tokens:
        if token.type in ("th_open", "td_open"):
            style = token.attrs.pop("style", None)
            if style is not None and (align := _ALIGN.fullmatch(str(style))):
                token.attrSet("class", f"align-{align.group(1)}")
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type == "heading_open":
            opening.attrSet("id", heading_anchor(inline.content))
            if opening.tag == "h1" and title == path.stem:
                title = inline.content
    return title, md.renderer.render(tokens, md.options, {})


@login_required
@require_GET
def doc_page(request, name: str):
    path = _doc_file(name, ".md")
    title, html = _rendered(path, path.stat().st_mtime)
    # The HTML is markdown-it's own, from our docs, with raw HTML escaped (html: False).
    body = mark_safe(html)  # noqa: S308
    return render(request, "docs/page.html", {"title": title, "body": body, "name": name})


@login_required
@require_GET
def doc_image(request, name: str):
    """The screenshots the docs show (docs/*.png)."""
    return FileResponse(_doc_file(name, ".png").open("rb"), content_type="image/png")
