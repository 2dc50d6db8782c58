"""The rubric's questions as the rating form shows them: per question, what its template
(templates/annotate/questions/) needs, precomputed, so templates stay logic-free. The
rating page, the rubric preview and the gold form all build their forms here."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from annotate.forms import finding_field, rationale_field, spans_field, strength_field
from annotate.rubrics import TIE


def question_views(
    definition,
    answers,
    rationales,
    errors,
    findings,
    claims=(),
    *,
    show_answers=False,
    part_errors=None,
    compared=None,
) -> list[dict[str, Any]]:
    """What the template needs per question asked of this item.
    `claims`: the summary's claim units (annotate.selectors.claims), for per-claim questions.
    `part_errors`: the problems of per-part questions, one by one (AnswerValidationError.parts),
    shown at their finding or claim. `compared`: a comparison's summaries as shown
    (selectors.queue.shown_summaries), for its preference questions."""
    part_errors = part_errors or {}
    return [
        _question_view(
            q,
            answers.get(q.key),
            rationales,
            errors,
            dict(part_errors.get(q.key, ())),
            findings,
            claims,
            show_answers=show_answers,
            compared=compared,
        )
        for q in definition.questions
        # Not asked: a per-finding question about a source without findings, and so on.
        if q.asked(has_findings=bool(findings), has_claims=bool(claims), comparison=compared is not None)
    ]


def _question_view(q, value, rationales, errors, by_part, findings, claims, *, show_answers, compared) -> dict:
    rationale = rationales.get(q.key)
    view = {
        "q": q,
        "template": q.template,
        "value": value,
        # Compared as text: answers re-shown after a failed POST are strings.
        "selected": {str(v) for v in value} if isinstance(value, list) else {str(value)},
        "rationale": rationales.get(q.key, "") if not isinstance(rationale, dict) else "",
        "rationale_field": rationale_field(q.key),
        # Per-part problems are shown at their part; the question says how many there are.
        "error": _parts_error(q, len(by_part)) if by_part else errors.get(q.key, ""),
        # A finished item states each answer plainly, not only as greyed-out inputs.
        "answer_text": q.answer_text(value) if show_answers else "",
    }
    given = value if isinstance(value, dict) else {}
    texts = rationale if isinstance(rationale, dict) else {}
    if q.per_finding:
        view["findings"] = _finding_rows(q, findings, given, texts, by_part)
    if q.per_claim:
        view["claims"] = _claim_rows(q, claims, given, texts, by_part)
    if q.highlights:
        view["spans_field"] = spans_field(q.key)
    if q.preference:
        view |= _preference_fields(q, given, compared, show_answers=show_answers)
    return view


def _finding_rows(q, findings, given: dict, texts: dict, by_part: dict) -> list[dict]:
    """A per-finding question's rows: one per finding of the source, numbered from 1."""
    return [
        {
            "finding": f,
            "number": number,
            "field": finding_field(q.key, str(f.uuid)),
            "selected": str(given.get(str(f.uuid), "")),
            "rationale": texts.get(str(f.uuid), ""),
            "rationale_field": rationale_field(finding_field(q.key, str(f.uuid))),
            "error": by_part.get(str(f.uuid), ""),
        }
        for number, f in enumerate(findings, start=1)
    ]


def _claim_rows(q, claims, given: dict, texts: dict, by_part: dict) -> list[dict]:
    """A per-claim question's rows: one per claim unit of the summary."""
    return [
        {
            "claim": c,
            "field": finding_field(q.key, c.id),
            "selected": str(given.get(c.id, "")),
            "rationale": texts.get(c.id, ""),
            "rationale_field": rationale_field(finding_field(q.key, c.id)),
            "error": by_part.get(c.id, ""),
        }
        for c in claims
    ]


def _preference_fields(q, given: dict, compared, *, show_answers: bool) -> dict:
    """A preference question's choices (each summary as shown, then a tie), the chosen
    side and strength, and on a finished item the answer in words."""
    sides = [(_("Summary %(label)s") % {"label": c.label}, c.uuid, c.label.lower()) for c in compared or ()]
    fields = {
        "choices": [
            {"label": label, "value": uuid, "key": key, "id": f"q-{q.key}-{key}"}
            for label, uuid, key in [*sides, (_("Tie: about the same"), TIE, "t")]
        ],
        "selected": {str(given.get("preferred", ""))},
        "strength": str(given.get("strength", "")),
        "strength_field": strength_field(q.key),
    }
    if show_answers and given:
        labels = {c.uuid: _("Summary %(label)s") % {"label": c.label} for c in compared or ()}
        preferred = given.get("preferred")
        fields["answer_text"] = (
            _("Tie")
            if preferred == TIE
            else f"{labels.get(preferred, '?')}" + (f" ({given['strength']})" if given.get("strength") else "")
        )
    return fields


def keys_hint(definition, findings, claims) -> str:
    """The keyboard hint under the buttons, true to this rubric: a scale's digits are its
    own values (1–4 on the clinfo and claims rubrics, 1–5 on LitSumm's)."""
    asked = [
        q
        for q in definition.questions
        if q.asked(has_findings=bool(findings), has_claims=bool(claims), comparison=False)
    ]
    bounds = {q.scale_bounds for q in asked if q.is_scale}
    if len(bounds) == 1:
        low, high = bounds.pop()
        if 0 <= low and high <= 9:
            if sum(q.is_scale for q in asked) == 1:
                hint = _(
                    "Keys: digits answer the question you are on (%(low)s–%(high)s on the scale), n goes to the "
                    "next, ? lists every shortcut, Ctrl+Enter submits."
                )
            else:
                hint = _(
                    "Keys: digits answer the question you are on (%(low)s–%(high)s on a scale), n goes to the "
                    "next, ? lists every shortcut, Ctrl+Enter submits."
                )
            return hint % {"low": low, "high": high}
    return _(
        "Keys: digits answer the question you are on, n goes to the next, ? lists every shortcut, Ctrl+Enter submits."
    )


# A comparison's hint: its preference keys (docs/pairwise.md).
COMPARISON_KEYS_HINT = gettext_lazy(
    "Keys: a, b or t answer the question you are on (a digit then says how much: 1 much, 2 slightly), "
    "n goes to the next, ] and [ to the next and previous item, ? lists every shortcut, Ctrl+Enter submits."
)


def _parts_error(q, count: int) -> str:
    """The line at the top of a per-part question whose parts have problems."""
    if q.per_finding and not q.finding_label:
        return ngettext("%(count)s finding below needs attention", "%(count)s findings below need attention", count) % {
            "count": count
        }
    if not q.per_finding and not q.claim_label:
        return ngettext("%(count)s claim below needs attention", "%(count)s claims below need attention", count) % {
            "count": count
        }
    # A rubric's own word for its parts ("Result") is English: plural by an added "s".
    label = (q.finding_label if q.per_finding else q.claim_label).lower()
    return ngettext("%(count)s %(label)s below needs attention", "%(count)s %(label)ss below need attention", count) % {
        "count": count,
        "label": label,
    }


def error_summary(definition, errors, part_errors) -> list[dict]:
    """A refused submit's list at the top of the page: every problem once, in the page's
    words (the question as the rater reads it), each linked to where it is fixed; the
    problems of a question asked per finding or claim one by one, linked to their part."""
    rows = []
    for q in definition.questions:
        if q.key not in errors:
            continue
        if part_errors.get(q.key):
            rows += [
                {"label": q.prompt, "anchor": part_anchor(q.key, part), "message": message}
                for part, message in part_errors[q.key]
            ]
        else:
            rows.append({"label": q.prompt, "anchor": f"question-{q.key}", "message": errors[q.key]})
    return rows


def part_anchor(question_key: str, part_id: str) -> str:
    """The id of one finding's or claim's block on the rating page."""
    return f"q-{question_key}-part-{part_id}"


def question_parts(
    definition, answers, rationales, errors, findings, claims, *, show_answers, part_errors, compared
) -> dict[str, Any]:
    """The item page's form: its questions, a refused submit's list of problems and the
    keyboard hint (a comparison's own, with its preference keys)."""
    return {
        "questions": question_views(
            definition,
            answers,
            rationales,
            errors,
            findings,
            claims,
            show_answers=show_answers,
            part_errors=part_errors,
            compared=compared,
        ),
        "error_summary": error_summary(definition, errors, part_errors),
        "keys_hint": keys_hint(definition, findings, claims) if compared is None else COMPARISON_KEYS_HINT,
    }
