"""The pieces of an item page (annotate/pages/rating.py) built from its reads: a refused
post's messages in the page's language, the source's sentences as HTML, a cited answer's
article summaries and the JSON the page's script works from. Pure: no query."""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

from annotate.models import Source, Summary


def shown_errors(original, shown, errors: dict) -> dict:
    """A refused post's messages in the page's language: a broken rule's message as the
    rubric translates it, and the messages the catalogue has (gettext leaves others)."""
    rules = zip(original.rules, shown.rules, strict=True)
    rule_messages = {rule.message: translated.message for rule, translated in rules}
    # gettext("") is the catalogue's header, never a message.
    return {key: gettext(rule_messages.get(m, m)) if isinstance(m, str) and m else m for key, m in errors.items()}


def sentences_html(sentences) -> str:
    """The source's sentences as list items. Every text is escaped (`escape`); offsets
    are integers from the database. Plain string building: format_html per sentence
    is slow on a source of thousands of sentences."""
    items = []
    for _, start, end, text, ref in sentences:
        cite = f' <span class="ref">[{escape(ref)}]</span>' if ref else ""
        items.append(
            f'<li dir="auto" data-ref="{escape(ref)}"><span class="sent-text" data-start="{int(start)}" '
            f'data-end="{int(end)}">{escape(text)}</span>{cite}</li>'
        )
    return mark_safe("".join(items))  # noqa: S308 - every piece above is escaped


def article_summaries(summary: Summary, source: Source) -> list[tuple[str, str]]:
    """An answer to a clinical question (its source is the evidence of literature.answers):
    the pipeline's summary of each cited article, [(n, text)], and nothing else of the
    answer's metadata (the model and pipeline never reach the rater)."""
    if (source.metadata or {}).get("kind") != "evidence":
        return []
    raw = (summary.metadata or {}).get("article_summaries") or {}
    if not isinstance(raw, dict):
        return []
    rows = [(str(n), str(text)) for n, text in raw.items() if str(n).isdigit() and isinstance(text, str)]
    return sorted(rows, key=lambda row: int(row[0]))


def client_data(assignment, definition, answers, sentences, findings, compared=None) -> dict:
    """The JSON the rating page's script works from (rendered with json_script). For a
    comparison, its summaries' uuids and texts as shown (never their generators)."""
    extra = {"compared": [{"uuid": c.uuid, "label": c.label, "text": c.text} for c in compared or ()]}
    return extra | {
        "summary_text": assignment.summary.text,
        "source_text": assignment.summary.source.text,
        "sentences": [{"start": start, "end": end, "ref": ref} for _, start, end, _, ref in sentences],
        "findings": [{"id": str(f.uuid), "start": f.start, "end": f.end} for f in findings],
        "span_questions": {q.key: _span_question(q) for q in definition.questions if q.highlights},
        "spans": {q.key: answers.get(q.key) or [] for q in definition.questions if q.highlights},
    }


def _span_question(q) -> dict:
    return {
        "target": q.target,
        "prompt": q.prompt,
        "rationale": q.rationale,
        "sub": [
            {
                "key": sq.key,
                "kind": sq.kind,
                "prompt": sq.prompt,
                "required": sq.required,
                "options": [{"value": o.value, "label": o.label} for o in sq.options],
            }
            for sq in q.span_questions
        ],
    }
