"""HTML pages for raters. Thin: look up through a selector, call a service, render."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from annotate.forms import (
    BatchForm,
    BatchItemActionForm,
    RateActionForm,
    answers_from_post,
    finding_field,
    rationale_field,
    spans_field,
    strength_field,
)
from annotate.models import Assignment, Batch, ItemFlag, Revision, Summary
from annotate.rubrics import TIE, AnswerValidationError
from annotate.selectors.access import (
    get_study_for_admin,
    get_study_for_viewer,
    is_study_admin,
    studies_for_staff_pages,
    users_enrollable_by,
)
from annotate.selectors.batches import (
    answer_matches,
    batch_answers,
    batch_disagreements,
    batch_progress,
    get_batch,
    quality_report,
    rerating_scope,
)
from annotate.selectors.contents import pipeline_flags_in, rubric_definition, source_metadata_example
from annotate.selectors.monitor import item_flags
from annotate.selectors.queue import (
    assignments_for_rater,
    get_assignment_for_rater,
    get_study_for_rater,
    latest_revision,
    latest_revision_phase,
    median_active_seconds,
    next_assignment_for_rater,
    next_open_assignment,
    queue_place,
    queue_progress,
    revision_answers,
    shared_notes,
    shown_summaries,
    training_feedback,
)
from annotate.services import adjudication, batches, qualification, ratings
from annotate.services.assignments import move_assignment, withdraw_assignment
from annotate.services.members import may_create_studies
from annotate.services.monitoring import raise_flag
from core.exceptions import ApplicationError, StaleWriteError
from core.text_validation import check_text


def home(request):
    """Where a login lands: study admins and viewers on their Studies, raters on their
    queue (which explains itself when it is empty), anonymous visitors on the login page."""
    if not request.user.is_authenticated:
        return redirect("login")
    if studies_for_staff_pages(request.user).exists() or may_create_studies(request.user):
        return redirect("studies:list")
    return redirect("annotate:queue")


# The queue's short names of a batch's kind (the admin's choices say more).
PHASE_LABELS = {
    Batch.Kind.CALIBRATION: "Calibration",
    Batch.Kind.MAIN: "Main",
    Batch.Kind.ADJUDICATION: "Adjudication",
    Batch.Kind.QUALIFICATION: "Qualification",
}


def time_left_text(seconds: float | None) -> str:
    """An estimate of the time left, rounded as a person would say it."""
    if seconds is None:
        return ""
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"about {minutes} minute{'s' if minutes != 1 else ''}"
    return f"about {seconds / 3600:.1f} hours"


def _study_way(user, p) -> dict:
    """What the queue shows of one study beside its items: where Continue leads, the
    time left (the study's median active time per item times the items left) and the
    rater's standing at the qualification."""
    left = p.total - p.done
    median = median_active_seconds(p.study) if left else None
    return {
        "p": p,
        "left": left,
        "time_left": time_left_text(median * left) if median is not None else "",
        "gate": qualification.qualification_status(study=p.study, rater=user) if p.gated else None,
    }


@login_required
def queue(request):
    assignments = list(assignments_for_rater(request.user))
    for a in assignments:
        a.phase_label = PHASE_LABELS.get(a.batch.kind, "") if a.batch_id else ""
    return render(
        request,
        "annotate/queue.html",
        {
            "assignments": assignments,
            "studies": [_study_way(request.user, p) for p in queue_progress(request.user)],
            "paused_message": ratings.PAUSED_MESSAGE,
        },
    )


@login_required
def continue_study(request, slug):
    """The Continue button: the first unfinished item of the rater's queue for the
    study, else the completion page."""
    study = get_study_for_rater(request.user, slug)
    following = next_open_assignment(request.user, study=study)
    if following is not None:
        return redirect("annotate:rate", assignment_uuid=following.uuid)
    return redirect("annotate:done", slug=study.slug)


@login_required
def done(request, slug):
    """The completion page: every item done, or screened out at the qualification."""
    study = get_study_for_rater(request.user, slug)
    return render(
        request,
        "annotate/done.html",
        {
            "study": study,
            "following": next_open_assignment(request.user, study=study),
            "gate": qualification.qualification_status(study=study, rater=request.user),
        },
    )


def _question_views(
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
):
    """What the template needs per question, precomputed (templates stay logic-free).
    `claims`: the summary's claim units (annotate.selectors.claims), for per-claim questions.
    `part_errors`: the problems of per-part questions, one by one (AnswerValidationError.parts),
    shown at their finding or claim. `compared`: a comparison's summaries as shown
    (selectors.queue.shown_summaries), for its preference questions."""
    views = []
    part_errors = part_errors or {}
    for q in definition.questions:
        if not q.asked(has_findings=bool(findings), has_claims=bool(claims), comparison=compared is not None):
            continue  # a per-finding question about a source without findings
        value = answers.get(q.key)
        by_part = dict(part_errors.get(q.key, ()))
        view = {
            "q": q,
            "template": q.template,
            "value": value,
            # Compared as text: answers re-shown after a failed POST are strings.
            "selected": {str(v) for v in value} if isinstance(value, list) else {str(value)},
            "rationale": rationales.get(q.key, "") if not isinstance(rationales.get(q.key), dict) else "",
            "rationale_field": rationale_field(q.key),
            # Per-part problems are shown at their part; the question says how many there are.
            "error": _parts_error(q, len(by_part)) if by_part else errors.get(q.key, ""),
            # A finished item states each answer plainly, not only as greyed-out inputs.
            "answer_text": q.answer_text(value) if show_answers else "",
        }
        if q.per_finding:
            given = value if isinstance(value, dict) else {}
            texts = rationales.get(q.key) if isinstance(rationales.get(q.key), dict) else {}
            view["findings"] = [
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
        if q.per_claim:
            given = value if isinstance(value, dict) else {}
            texts = rationales.get(q.key) if isinstance(rationales.get(q.key), dict) else {}
            view["claims"] = [
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
        if q.highlights:
            view["spans_field"] = spans_field(q.key)
        if q.preference:
            given = value if isinstance(value, dict) else {}
            sides = [(f"Summary {c.label}", c.uuid, c.label.lower()) for c in compared or ()]
            view["choices"] = [
                {"label": label, "value": uuid, "key": key, "id": f"q-{q.key}-{key}"}
                for label, uuid, key in [*sides, ("Tie: about the same", TIE, "t")]
            ]
            view["selected"] = {str(given.get("preferred", ""))}
            view["strength"] = str(given.get("strength", ""))
            view["strength_field"] = strength_field(q.key)
            if show_answers and given:
                labels = {c.uuid: f"Summary {c.label}" for c in compared or ()}
                preferred = given.get("preferred")
                view["answer_text"] = (
                    "Tie"
                    if preferred == TIE
                    else f"{labels.get(preferred, '?')}" + (f" ({given['strength']})" if given.get("strength") else "")
                )
        views.append(view)
    return views


def _keys_hint(definition, findings, claims) -> str:
    """The keyboard hint under the buttons, true to this rubric: a scale's digits are its
    own values (1–4 on the clinfo and claims rubrics, 1–5 on LitSumm's)."""
    asked = [
        q
        for q in definition.questions
        if q.asked(has_findings=bool(findings), has_claims=bool(claims), comparison=False)
    ]
    bounds = {q.scale_bounds for q in asked if q.is_scale}
    scale = ""
    if len(bounds) == 1:
        low, high = bounds.pop()
        if 0 <= low and high <= 9:
            scale = f" ({low}–{high} on {'the scale' if sum(q.is_scale for q in asked) == 1 else 'a scale'})"
    return (
        f"Keys: digits answer the question you are on{scale}, n goes to the next, ? lists every shortcut, "
        "Ctrl+Enter submits."
    )


def _parts_error(q, count: int) -> str:
    """The line at the top of a per-part question whose parts have problems."""
    label = (q.finding_label or "finding") if q.per_finding else (q.claim_label or "claim")
    return f"{count} {label.lower()}{'s' if count != 1 else ''} below need{'s' if count == 1 else ''} attention"


def _error_summary(definition, errors, part_errors) -> list[dict]:
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


def _sentences_html(sentences) -> str:
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


def _client_data(assignment, definition, answers, sentences, findings, compared=None) -> dict:
    """The JSON the rating page's script works from (rendered with json_script). For a
    comparison, its summaries' uuids and texts as shown (never their generators)."""
    extra = {"compared": [{"uuid": c.uuid, "label": c.label, "text": c.text} for c in compared or ()]}
    return extra | {
        "summary_text": assignment.summary.text,
        "source_text": assignment.summary.source.text,
        "sentences": [{"start": start, "end": end, "ref": ref} for _, start, end, _, ref in sentences],
        "findings": [{"id": str(f.uuid), "start": f.start, "end": f.end} for f in findings],
        "span_questions": {
            q.key: {
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
            for q in definition.questions
            if q.highlights
        },
        "spans": {q.key: answers.get(q.key) or [] for q in definition.questions if q.highlights},
    }


def _write_answers(write, request, assignment, data, answers, rationales) -> None:
    """Save or submit: the two buttons that write the answers take the same input."""
    write(
        assignment=assignment,
        rater=request.user,
        version=data["version"],
        answers=answers,
        rationales=rationales,
        active_seconds=data["active_seconds"],
    )


def _to_next_item(request, assignment):
    """Where a finished item (submitted or skipped) leads: the next unfinished item of the
    rater's queue for the study, else the completion page."""
    following = next_assignment_for_rater(request.user, after=assignment)
    if following is not None:
        return redirect("annotate:rate", assignment_uuid=following.uuid)
    return redirect("annotate:done", slug=assignment.study.slug)


def _submit(request, assignment, data, answers, rationales):
    _write_answers(ratings.submit_rating, request, assignment, data, answers, rationales)
    messages.success(request, "Rating submitted.")
    if training_feedback(assignment) is not None:
        return redirect("annotate:feedback", assignment_uuid=assignment.uuid)
    return _to_next_item(request, assignment)


def _skip(request, assignment, data, answers, rationales):
    ratings.skip_assignment(
        assignment=assignment, rater=request.user, version=data["version"], reason=data["skip_reason"]
    )
    messages.info(request, "Item skipped. It stays in your queue, where you can rate it after all.")
    return _to_next_item(request, assignment)


def _reopen(request, assignment, data, answers, rationales):
    was_skipped = assignment.state == Assignment.State.SKIPPED
    ratings.reopen_rating(assignment=assignment, rater=request.user, version=data["version"])
    if was_skipped:
        messages.info(request, "Item reopened: it is yours to rate again.")
    else:
        messages.info(request, "Rating reopened: your submitted answers are kept in the history.")
    return redirect("annotate:rate", assignment_uuid=assignment.uuid)


def _save(request, assignment, data, answers, rationales):
    _write_answers(ratings.save_draft, request, assignment, data, answers, rationales)
    messages.success(request, "Draft saved.")
    return redirect("annotate:rate", assignment_uuid=assignment.uuid)


# The rating page's buttons (RateActionForm.ACTIONS), each a small function over typed input.
_RATE_ACTIONS = {"save": _save, "submit": _submit, "skip": _skip, "reopen": _reopen}


@login_required
@require_http_methods(["GET", "POST"])
def rate(request, assignment_uuid):
    assignment = get_assignment_for_rater(request.user, assignment_uuid)
    definition = rubric_definition(assignment.study.rubric)
    errors: dict[str, str] = {}
    part_errors: dict[str, list[tuple[str, str]]] = {}
    status = 200
    if request.method == "GET":
        ratings.open_assignment(assignment=assignment)
        revision = latest_revision(assignment)
        answers, rationales = revision_answers(revision)
        phase = revision.phase if revision is not None else None
    else:
        form = RateActionForm(request.POST)
        finding_ids = tuple(str(f.uuid) for f in assignment.summary.source.findings.all())
        claim_ids = tuple(c.id for c in _claims_asked(definition, assignment.summary))
        answers, rationales = {}, {}
        try:
            answers, rationales = answers_from_post(definition, request.POST, finding_ids, claim_ids)
            if not form.is_valid():
                raise ApplicationError(form.error_message())
            action = _RATE_ACTIONS[form.cleaned_data["action"]]
            return action(request, assignment, form.cleaned_data, answers, rationales)
        except AnswerValidationError as exc:
            errors, part_errors, status = exc.errors, exc.parts, 400
        except StaleWriteError as exc:
            errors, status = {"__all__": exc.message}, 409
        except ApplicationError as exc:
            errors, status = {"__all__": exc.message}, getattr(exc, "http_status", 400)
        assignment.refresh_from_db()
        phase = latest_revision_phase(assignment)

    paused = assignment.rater_paused
    editable = assignment.state in (Assignment.State.PENDING, Assignment.State.IN_PROGRESS) and not paused
    compared = shown_summaries(assignment)
    source = assignment.summary.source
    # Tuples (annotate.models.Sentence), and the list built here, not in a template loop:
    # a source at the size limit can hold ~8,000 sentences (tests/bench/bench_rating_page.py).
    sentences = source.sentences
    findings = list(source.findings.all())
    claims = _claims_asked(definition, assignment.summary)
    context = {
        "assignment": assignment,
        "study": assignment.study,
        "summary_text": assignment.summary.text,
        "source": source,
        "sentence_count": len(sentences),
        "sentences_html": _sentences_html(sentences),
        "findings": findings,
        # Assisted condition only: the pipeline's verdict per claim (never the generator).
        "claims": list(assignment.summary.claims.order_by("index")) if assignment.study.assisted else [],
        "article_summaries": _article_summaries(assignment.summary, source),
        "questions": _question_views(
            definition,
            answers,
            rationales,
            errors,
            findings,
            claims,
            show_answers=not editable,
            part_errors=part_errors,
            compared=compared,
        ),
        "client_data": _client_data(assignment, definition, answers, sentences, findings, compared),
        "place": queue_place(request.user, assignment=assignment),
        # Reopened for the re-rating round after a discussion: with the notes the admin
        # chose to share with the raters (never their author; docs/batches.md).
        "rerating": editable and phase == Revision.Phase.POST_DISCUSSION,
        "shared_notes": shared_notes(assignment) if editable and phase == Revision.Phase.POST_DISCUSSION else [],
        "form_error": errors.get("__all__", ""),
        "error_summary": _error_summary(definition, errors, part_errors),
        "has_errors": bool(errors),
        "editable": editable,
        "locked": qualification.is_qualification_item(assignment),
        "api_url": reverse("api:assignment-rating", kwargs={"assignment_uuid": assignment.uuid}),
        "digit_question": next((q.key for q in definition.questions if q.shortcut_digits), ""),
        "keys_hint": _keys_hint(definition, findings, claims),
        **item_flag_context(assignment),
        "paused": paused,
        "paused_message": ratings.PAUSED_MESSAGE,
    }
    if compared is not None:
        # A comparison item: its summaries side by side, in this rater's order (never their
        # generators), with the preference keys (docs/pairwise.md).
        context["compared"] = compared
        context["keys_hint"] = (
            "Keys: a, b or t answer the question you are on (a digit then says how much: 1 much, 2 slightly), "
            "n goes to the next, ] and [ to the next and previous item, ? lists every shortcut, Ctrl+Enter submits."
        )
        return render(request, "annotate/compare.html", context, status=status)
    return render(request, "annotate/rate.html", context, status=status)


def item_flag_context(assignment, *, kind: str = "", note: str = "", error: str = "") -> dict:
    """What the item pages and the flag page show of the rater's questions to the admin."""
    own, shared = item_flags(assignment)
    return {
        "item_flags": own,
        "guideline_notes": shared,
        "flag_kinds": ItemFlag.Kind.choices,
        "flag_kind": kind,
        "flag_note": note,
        "flag_error": error,
    }


@login_required
@require_http_methods(["GET", "POST"])
def flag(request, assignment_uuid):
    """A rater's question about an item (docs/monitoring.md). The item pages post their
    flag form here; a bad post shows the form again with the field named (400)."""
    assignment = get_assignment_for_rater(request.user, assignment_uuid)
    if request.method == "GET":
        context = item_flag_context(assignment)
        return render(request, "annotate/flag.html", {"assignment": assignment, "study": assignment.study, **context})
    kind, note = request.POST.get("kind", ""), request.POST.get("note", "")
    try:
        raise_flag(assignment=assignment, rater=request.user, kind=kind, note=note)
    except ApplicationError as exc:
        context = item_flag_context(assignment, kind=kind, note=note, error=exc.message)
        return render(
            request, "annotate/flag.html", {"assignment": assignment, "study": assignment.study, **context}, status=400
        )
    messages.success(request, "Your question was sent to the study admin; the answer will show on this item.")
    return redirect(reverse("annotate:rate", kwargs={"assignment_uuid": assignment.uuid}) + "#item-flags")


def _claims_asked(definition, summary) -> list:
    """The summary's claim units when the rubric asks per-claim questions (else none, and
    no query): their text only, never a pipeline's verdict on them."""
    if not definition.asks_claims:
        return []
    from annotate.selectors.claims import claim_units

    return claim_units(summary)


def _article_summaries(summary, source) -> list[tuple[str, str]]:
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


@login_required
def feedback(request, assignment_uuid):
    """Training round or qualification: the rater's own submitted answers beside the
    expected ones, with the explanation."""
    assignment = get_assignment_for_rater(request.user, assignment_uuid)
    expected = training_feedback(assignment)
    if expected is None or assignment.state != Assignment.State.SUBMITTED:
        raise Http404("No feedback for this item.")
    given, _ = revision_answers(latest_revision(assignment))
    definition = rubric_definition(assignment.study.rubric)
    is_qualification = qualification.is_qualification_item(assignment)
    gate = qualification.qualification_status(study=assignment.study, rater=request.user) if is_qualification else None
    # A qualification item is marked as the pass rule counts it (a scale's tolerance).
    tolerances = gate.rule.tolerances if gate is not None and gate.rule is not None else {}
    rows = [
        {
            "q": q,
            "given": given.get(q.key),
            "expected": expected.answers[q.key],
            "match": qualification.matches_gold(
                expected.answers[q.key], given.get(q.key), tolerance=tolerances.get(q.key, 0)
            )
            if is_qualification
            else answer_matches(expected.answers[q.key], given.get(q.key)),
            "tolerance": tolerances.get(q.key, 0),
        }
        for q in definition.questions
        if q.key in expected.answers
    ]
    following = next_assignment_for_rater(request.user, after=assignment)
    return render(
        request,
        "annotate/feedback.html",
        {
            "assignment": assignment,
            "rows": rows,
            "expected": expected,
            "following": following,
            "is_qualification": is_qualification,
            "gate": gate,
        },
    )


def display_answer(value) -> str:
    """An answer as text for the admin pages (lists joined, spans quoted)."""
    if value is None or value == [] or value == {}:
        return "–"
    if isinstance(value, list):
        return "; ".join(
            f"“{v.get('text', '')}”" + (f" ({', '.join(map(str, v['answers'].values()))})" if v.get("answers") else "")
            if isinstance(v, dict)
            else str(v)
            for v in value
        )
    if isinstance(value, dict):
        # Per-finding scores, or a per-claim answer as stored ({claim: {"answer", "rationale"}}).
        return "; ".join(f"{k}: {v.get('answer', '–') if isinstance(v, dict) else v}" for k, v in value.items())
    return str(value)


# --- study admins and viewers ------------------------------------------------------------


@login_required
def studies(request):
    return render(
        request,
        "annotate/studies/list.html",
        {"studies": studies_for_staff_pages(request.user), "may_create": may_create_studies(request.user)},
    )


@login_required
def study_dashboard(request, slug):
    study = get_study_for_viewer(request.user, slug)
    batches = [batch_progress(b) for b in study.batches.order_by("created_at")]
    is_admin = is_study_admin(request.user, study)
    return render(
        request, "annotate/studies/dashboard.html", {"study": study, "batches": batches, "is_admin": is_admin}
    )


@login_required
@require_http_methods(["GET", "POST"])
def batch_create(request, slug):
    """The batch builder. "Preview" shows what the options would create (items,
    assignments, pairs skipped because the rater already has the summary) without
    keeping anything; "Create batch" creates it."""
    study = get_study_for_admin(request.user, slug)
    form = BatchForm(
        request.POST or None,
        users=users_enrollable_by(request.user, study),
        flags_known=pipeline_flags_in(study),
        metadata_example=source_metadata_example(study),
    )
    preview = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        options = {
            "study": study,
            "name": d["name"],
            "kind": d["kind"],
            "raters": list(d["raters"]),
            "design": d["design"],
            "seed": d["seed"],
            "filters": form.filters(),
            "n": d["n"],
            "stratify_by": [f.strip() for f in d["stratify_by"].split(",") if f.strip()],
            "k": d["k"],
            "share": d["share"],
            "m": d["m"],
            "blinded": d["blinded"],
            "training": d["training"],
            "attention_every": d["attention_every"],
            "created_by": request.user,
            "per_source": d["per_source"],
        }
        gold_keys = form.gold_keys()
        gold = list(study.summaries.filter(key__in=gold_keys))
        unknown = sorted(set(gold_keys) - {g.key for g in gold})
        if unknown:
            form.add_error("gold", f"No such summary key(s) in this study: {', '.join(unknown)}.")
        else:
            options["gold"] = gold
            try:
                if request.POST.get("action") == "preview":
                    preview = batches.preview_batch(**options)
                else:
                    batch = batches.create_batch(**options)
            except ApplicationError as exc:
                # A rule about one option (seed, stratify_by, ...) is shown beside that option.
                named = {k: v for k, v in exc.extra.get("fields", {}).items() if k in form.fields}
                for name, problem in named.items():
                    form.add_error(name, problem)
                if not named:
                    form.add_error(None, exc.message)
            else:
                if preview is None:
                    skipped, held = batch.skipped_pairs, batch.held_summaries
                    note = f"; {skipped} pairs skipped: those raters already have those summaries" if skipped else ""
                    if held:
                        note += f"; {held} matching summar{'y' if held == 1 else 'ies'} left out: every rater has it"
                    messages.success(
                        request, f"Batch {batch.name!r} created with {batch.created_assignments} assignments{note}."
                    )
                    return redirect("studies:batch", slug=study.slug, batch_uuid=batch.uuid)
    failed = request.method == "POST" and preview is None
    return render(
        request,
        "annotate/studies/batch_form.html",
        {"study": study, "form": form, "preview": preview},
        status=400 if failed else 200,
    )


def _confirm_batch_action(request, study, batch, action):
    """The page that asks before a batch action that changes raters' queues, saying how
    many items it touches. Its form posts the same action again with confirmed=yes."""
    context = {"study": study, "batch": batch, "action": action}
    if action == "rerate":
        context["scope"] = rerating_scope(batch)
    else:
        assignment_uuid = _uuid_or_none(request.POST.get("assignment"))
        assignment = (
            batch.assignments.select_related("rater", "summary").filter(uuid=assignment_uuid).first()
            if assignment_uuid
            else None
        )
        if assignment is None:
            messages.error(request, "No such assignment in this batch.")
            return redirect("studies:batch", slug=study.slug, batch_uuid=batch.uuid)
        context["assignment"] = assignment
        context["kept_revisions"] = assignment.revisions.count()
    return render(request, "annotate/studies/confirm.html", context)


def _uuid_or_none(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


@login_required
@require_http_methods(["GET", "POST"])
def batch_detail(request, slug, batch_uuid):
    study = get_study_for_viewer(request.user, slug)
    batch = get_batch(study, batch_uuid)
    is_admin = is_study_admin(request.user, study)
    if request.method == "POST":
        if not is_admin:
            raise Http404("No such study.")
        action = request.POST.get("action")
        if action in ("rerate", "withdraw") and request.POST.get("confirmed") != "yes":
            return _confirm_batch_action(request, study, batch, action)
        try:
            if action == "rerate":
                opened = adjudication.open_rerating(batch=batch)
                messages.success(request, f"Re-rating round opened for {opened} submitted assignments.")
            else:
                assignment_uuid = _uuid_or_none(request.POST.get("assignment"))
                assignment = batch.assignments.filter(uuid=assignment_uuid).first() if assignment_uuid else None
                if assignment is None:
                    raise ApplicationError("No such assignment in this batch.")
                if action == "withdraw":
                    withdraw_assignment(assignment=assignment)
                    messages.success(request, "Assignment withdrawn; its answers are kept.")
                elif action == "move":
                    username = request.POST.get("to", "")
                    check_text(username, "to")
                    enrollable = users_enrollable_by(request.user, study)
                    target = enrollable.filter(username=username).first()
                    if target is None:
                        raise ApplicationError("No such user among the study's members.")
                    move_assignment(assignment=assignment, to_rater=target)
                    messages.success(request, f"Moved to {target.get_username()}; earlier answers are kept.")
                else:
                    raise ApplicationError("Unknown action.")
        except ApplicationError as exc:
            messages.error(request, exc.message)
        return redirect("studies:batch", slug=study.slug, batch_uuid=batch.uuid)
    assignments = batch.assignments.select_related("rater", "summary").order_by("summary__key", "rater__username")
    definition = rubric_definition(study.rubric)
    progress = batch_progress(batch)
    # A skipped item says who skipped it and why, not only "0 of 2 submitted".
    missing = [
        {"summary": summary, "done": done, "planned": planned, "skips": progress.skips.get(summary.pk, [])}
        for summary, done, planned in progress.items_missing
    ]
    return render(
        request,
        "annotate/studies/batch.html",
        {
            "study": study,
            "batch": batch,
            "progress": progress,
            "missing": missing,
            "quality": quality_report(batch),
            "is_admin": is_admin,
            "assignments": assignments if is_admin else [],
            "questions": [q for q in definition.questions if q.comparable],
        },
    )


@login_required
def disagreements(request, slug, batch_uuid):
    study = get_study_for_admin(request.user, slug)
    batch = get_batch(study, batch_uuid)
    definition = rubric_definition(study.rubric)
    choices = [q for q in definition.questions if q.comparable]
    question = request.GET.get("question") or choices[0].key
    if question not in {q.key for q in choices}:
        raise Http404("No such question.")
    try:
        threshold = float(request.GET.get("threshold", 1))
    except ValueError:
        threshold = 1.0
    phase = request.GET.get("phase", "initial")
    if phase not in ("initial", "post_discussion"):
        phase = "initial"
    sort = "item" if request.GET.get("sort") == "item" else "spread"
    rows = [
        (row, {rater: display_answer(value) for rater, value in row.values.items()})
        for row in batch_disagreements(batch, question=question, threshold=threshold, phase=phase, sort=sort)
    ]
    return render(
        request,
        "annotate/studies/disagreements.html",
        {
            "study": study,
            "batch": batch,
            "rows": rows,
            "questions": choices,
            "question": question,
            "threshold": threshold,
            "phase": phase,
            "sort": sort,
        },
    )


def _add_note(request, batch, summary, definition, data):
    adjudication.add_discussion_note(
        batch=batch,
        summary=summary,
        author=request.user,
        text=data["text"],
        question=data["question"],
        shared=data["shared"],
    )
    messages.success(request, "Note added.")


def _record_consensus(request, batch, summary, definition, data):
    q = next((q for q in definition.questions if q.key == data["question"]), None)
    if q is None:
        raise ApplicationError("Choose a question.")
    value = request.POST.getlist("value") if q.several_options else request.POST.get("value")
    value = definition.numbers_from_text({q.key: value})[q.key]  # a form posts a scale's number as text
    adjudication.record_consensus(
        batch=batch,
        summary=summary,
        question=q.key,
        value=value,
        rationale=data["rationale"],
        decided_by=request.user,
    )
    messages.success(request, f"Consensus for {q.prompt} recorded.")


# The adjudication page's forms (BatchItemActionForm.ACTIONS), each a small function over typed input.
_BATCH_ITEM_ACTIONS = {"note": _add_note, "consensus": _record_consensus}


@login_required
@require_http_methods(["GET", "POST"])
def batch_item(request, slug, batch_uuid, summary_uuid):
    study = get_study_for_admin(request.user, slug)
    batch = get_batch(study, batch_uuid)
    summary = get_object_or_404(Summary.objects.select_related("source"), uuid=summary_uuid, study=study)
    if not batch.assignments.filter(summary=summary).exists():
        raise Http404("This summary is not in the batch.")
    definition = rubric_definition(study.rubric)
    error = ""
    if request.method == "POST":
        form = BatchItemActionForm(request.POST)
        try:
            if not form.is_valid():
                raise ApplicationError(form.error_message())
            action = _BATCH_ITEM_ACTIONS[form.cleaned_data["action"]]
            action(request, batch, summary, definition, form.cleaned_data)
            return redirect("studies:batch-item", slug=slug, batch_uuid=batch.uuid, summary_uuid=summary.uuid)
        except AnswerValidationError as exc:
            error = "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
        except ApplicationError as exc:
            error = exc.message
    phases = {}
    for phase in ("initial", "post_discussion"):
        by_rater = batch_answers(batch, phase=phase, summary=summary).get(summary.pk, {})
        phases[phase] = [
            {
                "rater": rater,
                "answers": [
                    {
                        "q": q,
                        "value": display_answer(answers.get(q.key)),
                        "rationale": display_answer(rationales.get(q.key)) if rationales.get(q.key) else "",
                    }
                    for q in definition.questions
                ],
            }
            for rater, (answers, rationales, _) in sorted(by_rater.items(), key=lambda kv: kv[0].get_username())
        ]
    return render(
        request,
        "annotate/studies/item.html",
        {
            "study": study,
            "batch": batch,
            "summary": summary,
            "phases": phases,
            "error": error,
            "sentences": summary.source.sentences,
            "notes": summary.discussion_notes.filter(batch=batch).select_related("author"),
            "consensus": summary.consensus_answers.filter(batch=batch).select_related("decided_by"),
            "expected": summary.expected_answers.first(),
            "consensus_questions": [q for q in definition.questions if q.adjudicable],
            # A comparison item: its summaries (admins see keys and generators), which the
            # preference answers above name by uuid and its consensus chooses from.
            "compared": list(summary.comparison.member_rows.order_by("index").select_related("summary"))
            if hasattr(summary, "comparison")
            else [],
        },
        status=400 if error else 200,
    )
