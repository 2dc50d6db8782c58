"""HTML pages for raters and study admins. Thin: check access through a selector, parse
the input, call a service or a page model (annotate/pages/), render."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.http import urlencode
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views import View
from django.views.decorators.http import require_http_methods

from annotate.decorators import ParticipantAccess, onboarding_first, participant_may_use
from annotate.forms import BatchForm, BatchItemActionForm, RateActionForm, answers_from_post
from annotate.languages import activate_study_language
from annotate.models import Assignment, Summary
from annotate.pages import page_context
from annotate.pages.batches import batch_page, display_answer
from annotate.pages.queue import queue_page
from annotate.pages.rating import RefusedPost, flag_page, rating_page
from annotate.rubrics import AnswerValidationError
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
    batch_progress,
    get_batch,
    rerating_scope,
)
from annotate.selectors.claims import claims_asked
from annotate.selectors.contents import pipeline_flags_in, rubric_definition, source_metadata_example
from annotate.selectors.disagreements import batch_disagreements
from annotate.selectors.queue import (
    get_assignment_for_rater,
    get_study_for_rater,
    latest_revision,
    next_assignment_for_rater,
    next_open_assignment,
    revision_answers,
    training_feedback,
)
from annotate.services import adaptive, adjudication, batches, qualification, ratings
from annotate.services.assignments import move_assignment, withdraw_assignment
from annotate.services.members import may_create_studies
from annotate.services.monitoring import raise_flag
from core.exceptions import ApplicationError, StaleWriteError
from core.text_validation import check_text


@participant_may_use(ParticipantAccess.NEXT_STEP)
def home(request):
    """Where a login lands: study admins and viewers on their Studies, raters on their
    queue (which explains itself when it is empty), anonymous visitors on the login page."""
    if not request.user.is_authenticated:
        return redirect("login")
    if studies_for_staff_pages(request.user).exists() or may_create_studies(request.user):
        return redirect("studies:list")
    return redirect("annotate:queue")


@login_required
@participant_may_use(ParticipantAccess.NEXT_STEP)
def queue(request):
    page = queue_page(request.user)
    return render(request, "annotate/queue.html", page_context(page))


@login_required
@participant_may_use(ParticipantAccess.NEXT_STEP)
def continue_study(request, slug):
    """The Continue button: the first unfinished item of the rater's queue for the
    study, else the completion page."""
    study = get_study_for_rater(request.user, slug)
    following = next_open_assignment(request.user, study=study) or adaptive.hand_out_next(
        study=study, rater=request.user
    )
    if following is not None:
        return redirect("annotate:rate", assignment_uuid=following.uuid)
    return redirect("annotate:done", slug=study.slug)


@login_required
@participant_may_use(ParticipantAccess.NEXT_STEP)
def done(request, slug):
    """The completion page: every item done, or screened out at the qualification."""
    study = get_study_for_rater(request.user, slug)
    activate_study_language(request, study)
    return render(
        request,
        "annotate/done.html",
        {
            "study": study,
            "following": next_open_assignment(request.user, study=study),
            "gate": qualification.qualification_status(study=study, rater=request.user),
        },
    )


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
    following = next_assignment_for_rater(request.user, after=assignment) or adaptive.hand_out_next(
        study=assignment.study, rater=request.user
    )
    if following is not None:
        return redirect("annotate:rate", assignment_uuid=following.uuid)
    return redirect("annotate:done", slug=assignment.study.slug)


def _submit(request, assignment, data, answers, rationales):
    _write_answers(ratings.submit_rating, request, assignment, data, answers, rationales)
    messages.success(request, _("Rating submitted."))
    if training_feedback(assignment) is not None:
        return redirect("annotate:feedback", assignment_uuid=assignment.uuid)
    return _to_next_item(request, assignment)


def _skip(request, assignment, data, answers, rationales):
    ratings.skip_assignment(
        assignment=assignment, rater=request.user, version=data["version"], reason=data["skip_reason"]
    )
    messages.info(request, _("Item skipped. It stays in your queue, where you can rate it after all."))
    return _to_next_item(request, assignment)


def _reopen(request, assignment, data, answers, rationales):
    was_skipped = assignment.state == Assignment.State.SKIPPED
    ratings.reopen_rating(assignment=assignment, rater=request.user, version=data["version"])
    if was_skipped:
        messages.info(request, _("Item reopened: it is yours to rate again."))
    else:
        messages.info(request, _("Rating reopened: your submitted answers are kept in the history."))
    return redirect("annotate:rate", assignment_uuid=assignment.uuid)


def _save(request, assignment, data, answers, rationales):
    _write_answers(ratings.save_draft, request, assignment, data, answers, rationales)
    messages.success(request, _("Draft saved."))
    return redirect("annotate:rate", assignment_uuid=assignment.uuid)


# The rating page's buttons (RateActionForm.ACTIONS), each a small function over typed input.
_RATE_ACTIONS = {"save": _save, "submit": _submit, "skip": _skip, "reopen": _reopen}


@method_decorator(login_required, name="dispatch")
@method_decorator(participant_may_use(ParticipantAccess.ITEM), name="dispatch")
@method_decorator(onboarding_first, name="dispatch")
class RateView(View):
    """The rating page, or for a comparison item the comparison page: GET opens the item
    (view -> page model -> selectors -> template), a POST runs the button pressed (or
    shows what was sent again with the problems)."""

    def get(self, request, assignment_uuid):
        page = rating_page(request, assignment_uuid)
        ratings.open_assignment(assignment=page.assignment)
        return render(request, page.template_name, page.context())

    def post(self, request, assignment_uuid):
        assignment = get_assignment_for_rater(request.user, assignment_uuid)
        activate_study_language(request, assignment.study)
        outcome = _post_rating(request, assignment)
        if not isinstance(outcome, RefusedPost):
            return outcome
        page = rating_page(request, assignment_uuid, refused=outcome)
        return render(request, page.template_name, page.context(), status=outcome.status)


def _post_rating(request, assignment):
    """The rating page's buttons: the pressed button's response, else the refused post."""
    definition = rubric_definition(assignment.study.rubric)
    form = RateActionForm(request.POST)
    finding_ids = tuple(str(f.uuid) for f in assignment.summary.source.findings.all())
    claim_ids = tuple(c.id for c in claims_asked(definition, assignment.summary))
    answers, rationales = {}, {}
    try:
        answers, rationales = answers_from_post(definition, request.POST, finding_ids, claim_ids)
        if not form.is_valid():
            raise ApplicationError(form.error_message())
        action = _RATE_ACTIONS[form.cleaned_data["action"]]
        return action(request, assignment, form.cleaned_data, answers, rationales)
    except AnswerValidationError as exc:
        return RefusedPost(answers, rationales, exc.errors, exc.parts)
    except StaleWriteError as exc:
        return RefusedPost(answers, rationales, {"__all__": exc.message}, status=409)
    except ApplicationError as exc:
        return RefusedPost(answers, rationales, {"__all__": exc.message}, status=getattr(exc, "http_status", 400))


@login_required
@require_http_methods(["GET", "POST"])
@participant_may_use(ParticipantAccess.ITEM)
@onboarding_first
def flag(request, assignment_uuid):
    """A rater's question about an item (docs/monitoring.md). The item pages post their
    flag form here; a bad post shows the form again with the field named (400)."""
    assignment = get_assignment_for_rater(request.user, assignment_uuid)
    activate_study_language(request, assignment.study)
    if request.method == "GET":
        return render(request, "annotate/flag.html", flag_page(request.user, assignment).context())
    kind, note = request.POST.get("kind", ""), request.POST.get("note", "")
    try:
        raise_flag(assignment=assignment, rater=request.user, kind=kind, note=note)
    except ApplicationError as exc:
        page = flag_page(request.user, assignment, kind=kind, note=note, error=exc.message)
        return render(request, "annotate/flag.html", page.context(), status=400)
    messages.success(request, _("Your question was sent to the study admin; the answer will show on this item."))
    return redirect(reverse("annotate:rate", kwargs={"assignment_uuid": assignment.uuid}) + "#item-flags")


@login_required
@participant_may_use(ParticipantAccess.ITEM)
@onboarding_first
def feedback(request, assignment_uuid):
    """Training round or qualification: the rater's own submitted answers beside the
    expected ones, with the explanation."""
    assignment = get_assignment_for_rater(request.user, assignment_uuid)
    activate_study_language(request, assignment.study)
    expected = training_feedback(assignment)
    if expected is None or assignment.state != Assignment.State.SUBMITTED:
        raise Http404("No feedback for this item.")
    given, _ = revision_answers(latest_revision(assignment))
    definition = rubric_definition(assignment.study.rubric).translated(get_language())
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


def _create_adaptive(request, study, d):
    """An adaptive side-by-side batch: no plan to preview, the sample size its budget."""
    if request.POST.get("action") == "preview":
        raise ApplicationError("An adaptive batch has no fixed plan to preview: its pairs follow the judgements.")
    options = {"name": d["name"], "raters": list(d["raters"]), "budget": d["n"] or 0, "seed": d["seed"]}
    batch = adaptive.create_adaptive_batch(study=study, created_by=request.user, **options)
    messages.success(request, f"Adaptive batch {batch.name!r} created: each rater has a first comparison.")
    return redirect("studies:batch", slug=study.slug, batch_uuid=batch.uuid)


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
                if d["design"] == adaptive.DESIGN:
                    return _create_adaptive(request, study, d)
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
    if request.method == "POST":
        if not is_study_admin(request.user, study):
            raise Http404("No such study.")
        return _batch_action(request, study, batch)
    page = batch_page(request.user, study, batch, page_number=request.GET.get("page"))
    return render(request, "annotate/studies/batch.html", page_context(page))


def _batch_action(request, study, batch):
    """An admin's action on the batch page: a re-rating round, or withdrawing or moving an
    assignment (asked again first when it changes raters' queues)."""
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
    found = batch_disagreements(batch, question=question, threshold=threshold, phase=phase, sort=sort)
    # A large batch disagrees on thousands of items: they are shown a page at a time.
    page = Paginator(found, 100).get_page(request.GET.get("page"))
    rows = [(row, {rater: display_answer(value) for rater, value in row.values.items()}) for row in page]
    filters = urlencode({"question": question, "threshold": threshold, "phase": phase, "sort": sort})
    context = {"study": study, "batch": batch, "rows": rows, "page": page, "filters": filters, "questions": choices}
    context.update(question=question, threshold=threshold, phase=phase, sort=sort)
    return render(request, "annotate/studies/disagreements.html", context)


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
