"""Page models: one function per page that takes the request's user and the objects its
view already checked access to (and the parsed input), reads through
`annotate.selectors` and returns a frozen dataclass holding everything the page's
template and its JSON need. The view parses, calls a service or a page model, renders.

- `questions`: the rubric's questions as the rating form shows them (shared by the
  rating page, the rubric preview and the gold form);
- `rating`: the rating page and the comparison page (one item, one page model), and the
  page a rater asks the admin about an item on;
- `queue`: the rater's queue;
- `batches`: a batch's page for study admins and viewers;
- `monitor`: the live quality monitor and the inbox of the raters' questions.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def page_context(page) -> dict[str, Any]:
    """A page model's fields as a template context, by name. Not dataclasses.asdict, which
    would copy every model row it holds."""
    return {f.name: getattr(page, f.name) for f in fields(page)}
