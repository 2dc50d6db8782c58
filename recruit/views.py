"""Pages of the recruit app: the participant's arrival and end, every rater's onboarding
steps, and the study admin's onboarding and recruitment pages. Thin: a selector or
service does the work."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from annotate.decorators import ParticipantAccess, participant_may_use
from annotate.forms import answers_from_post
from annotate.languages import activate_study_language
from annotate.models import Onboarding, Study, StudyMembership
from annotate.rubrics import AnswerValidationError
from annotate.selectors.access import get_study_for_admin
from annotate.selectors.onboarding import DECLINED, current_consent, onboarding_step
from annotate.services.monitoring import exclude_rater
from annotate.services.qualification import allow_qualification_retry, qualification_status
from annotate.throttling import recorded_address
from core.exceptions import ApplicationError
from recruit import flow, panel, selectors
from recruit.forms import LinkEditForm, LinkForm, OnboardingForm, ParticipantActionForm, QuestionForm
from recruit.middleware import SESSION_KEY
from recruit.models import BonusPayment, Participant, RecruitmentLink
from recruit.prolific import REJECTION_CATEGORIES
from recruit.services import links, participation
from recruit.services import onboarding as onboarding_services


def _problem(request, message: str, status: int):
    # A message the catalogue has is shown in the page's language (docs/languages.md).
    return render(request, "recruit/problem.html", {"message": _(message)}, status=status)


# --- arriving and leaving ---------------------------------------------------------------


@never_cache
@require_http_methods(["GET", "POST"])
@participant_may_use(ParticipantAccess.ARRIVAL)
def arrive(request, token):
    """A panel participant follows the study's link: a signed token and the panel's ids.

    Someone signed in as anyone but this link's participant for these ids is asked first
    (a page with a POST form): a link opened from another site never switches accounts on
    a GET. The POST carries the panel's ids as form fields, not in its URL."""
    link = links.link_from_token(token)
    if link is None:
        raise Http404("No such link.")
    activate_study_language(request, link.study)
    params = request.POST if request.method == "POST" else request.GET
    try:
        panel, external_id, panel_study, panel_session = participation.check_panel_ids(params)
    except ApplicationError as exc:
        return _problem(request, exc.message, exc.http_status)
    if (
        request.method == "GET"
        and request.user.is_authenticated
        and not selectors.is_links_participant(request.user, link=link, external_id=external_id)
    ):
        values = (external_id, panel_study, panel_session)
        return render(
            request,
            "recruit/switch_account.html",
            {
                "token": token,
                "panel_fields": [(f, v) for f, v in zip(participation.PANEL_FIELDS[panel], values, strict=True) if v],
            },
        )
    try:
        participant, _ = participation.arrive(
            link=link,
            panel=panel,
            external_id=external_id,
            panel_study_id=panel_study,
            panel_session_id=panel_session,
            address=recorded_address(request),
        )
    except participation.ArrivalRefused as exc:
        if exc.link is None:
            return _problem(request, exc.message, exc.http_status)
        return _turned_away(request, exc.link, exc.message)
    except ApplicationError as exc:
        return _problem(request, exc.message, exc.http_status)
    if request.user.is_authenticated and request.session.get(SESSION_KEY) != participant.pk:
        logout(request)  # a link never adds a study to someone else's session
    if request.session.get(SESSION_KEY) != participant.pk:
        login(request, participant.user, backend=settings.AUTHENTICATION_BACKENDS[0])
        request.session[SESSION_KEY] = participant.pk
        request.session.set_expiry(0)  # ends with the browser session: no password to come back with
    return redirect("recruit:next", slug=link.study.slug)


def _turned_away(request, link: RecruitmentLink, reason: str):
    """Someone the link cannot take (closed, full, no item left), before any step: the
    screen-out code and the way back to the panel, or the link's "full" message when it
    has no screen-out code. No account is made."""
    code = link.screenout_code
    return render(
        request,
        "recruit/turned_away.html",
        {
            "reason": _(reason),
            "code": code,
            "return_url": participation.return_url(link, code),
            # The default "full" message in the page's language; one the admin wrote as written.
            "message": _(link.full_message) if link.full_message else "",
        },
        status=403,
    )


def _rater_study(request, slug) -> tuple[Study, Participant | None]:
    """The study if the user rates in it (a participant: only their own), else 404."""
    study = Study.objects.select_related("rubric").filter(slug=slug).first()
    if (
        study is None
        or not StudyMembership.objects.filter(study=study, user=request.user, role=StudyMembership.Role.RATER).exists()
    ):
        raise Http404("No such study.")
    participant = selectors.participant_of(request.user) if request.session.get(SESSION_KEY) else None
    return study, participant


@never_cache
@login_required
@participant_may_use(ParticipantAccess.STUDY)
def next_step(request, slug):
    study, participant = _rater_study(request, slug)
    return flow.next_page(request, study, participant)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
@participant_may_use(ParticipantAccess.STUDY)
def consent(request, slug):
    study, participant = _rater_study(request, slug)
    activate_study_language(request, study)
    version = current_consent(study=study)
    if version is None:
        return flow.next_page(request, study, participant)
    error, status = "", 200
    if request.method == "POST":
        choice = request.POST.get("decision")
        if choice not in ("accept", "decline"):
            error, status = _("decision: choose to accept or decline"), 400
        else:
            try:
                onboarding_services.record_consent(
                    study=study,
                    rater=request.user,
                    version_uuid=request.POST.get("version"),
                    accepted=choice == "accept",
                )
            except ApplicationError as exc:
                error, status = exc.message, exc.http_status
            else:
                if choice == "decline" and participant is None:
                    messages.info(
                        request,
                        _(
                            "You declined: this study will not show you items. Your open items were "
                            "handed back to the study admin."
                        ),
                    )
                return _after(request, study, participant)
    declined = onboarding_step(study=study, rater=request.user) == DECLINED
    return render(
        request,
        "recruit/consent.html",
        {"study": study, "version": version, "error": error, "declined": declined, "next": request.GET.get("next", "")},
        status=status,
    )


def _after(request, study, participant):
    url = reverse("recruit:next", kwargs={"slug": study.slug})
    wanted = request.POST.get("next") or request.GET.get("next")
    if wanted and wanted.startswith("/rate/") and "//" not in wanted:
        from django.utils.http import urlencode

        url = f"{url}?{urlencode({'next': wanted})}"
    if participant is None and onboarding_step(study=study, rater=request.user) == DECLINED:
        return redirect("recruit:consent", slug=study.slug)
    return redirect(url)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
@participant_may_use(ParticipantAccess.STUDY)
def instructions(request, slug):
    study, participant = _rater_study(request, slug)
    activate_study_language(request, study)
    onboarding = Onboarding.objects.filter(study=study).first()
    if onboarding is None or not onboarding.instructions:
        return flow.next_page(request, study, participant)
    error, status = "", 200
    # Shown on this page is opened: the acknowledgement below needs it first.
    onboarding_services.open_instructions(study=study, rater=request.user)
    if request.method == "POST":
        if request.POST.get("acknowledge") != "yes":
            error, status = _("acknowledge: tick the box to confirm you have read the instructions"), 400
        else:
            try:
                onboarding_services.acknowledge_instructions(study=study, rater=request.user)
            except ApplicationError as exc:
                error, status = exc.message, exc.http_status
            else:
                return _after(request, study, participant)
    return render(
        request,
        "recruit/instructions.html",
        {"study": study, "onboarding": onboarding, "error": error, "next": request.GET.get("next", "")},
        status=status,
    )


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
@participant_may_use(ParticipantAccess.STUDY)
def questionnaire(request, slug):
    study, participant = _rater_study(request, slug)
    activate_study_language(request, study)
    onboarding = Onboarding.objects.filter(study=study).first()
    definition = selectors.questionnaire_definition(onboarding)
    if definition is None:
        return flow.next_page(request, study, participant)
    errors: dict[str, str] = {}
    answers: dict = {}
    status = 200
    if request.method == "POST":
        try:
            answers, _ = answers_from_post(definition, request.POST)
            onboarding_services.submit_questionnaire(study=study, rater=request.user, answers=answers)
        except AnswerValidationError as exc:
            errors, status = exc.errors, 400
        except ApplicationError as exc:
            errors, status = {"__all__": exc.message}, exc.http_status
        else:
            return _after(request, study, participant)
    views = [
        {
            "q": q,
            "template": q.template,
            "value": answers.get(q.key),
            "selected": {str(v) for v in answers.get(q.key)}
            if isinstance(answers.get(q.key), list)
            else {str(answers.get(q.key))},
            "error": errors.get(q.key, ""),
        }
        for q in definition.questions
    ]
    return render(
        request,
        "recruit/questionnaire.html",
        {
            "study": study,
            "questions": views,
            "form_error": errors.get("__all__", ""),
            "next": request.GET.get("next", ""),
        },
        status=status,
    )


@never_cache
@login_required
@participant_may_use(ParticipantAccess.STUDY)
def done(request):
    """A participant's end: the code, and the way back to the panel (a refresh after a
    few seconds, and a link)."""
    participant = selectors.participant_of(request.user) if request.session.get(SESSION_KEY) else None
    if participant is None:
        raise Http404("No such page.")
    if not participant.outcome:
        return redirect("recruit:next", slug=participant.study.slug)
    activate_study_language(request, participant.study)
    code, url = participation.completion(participant)
    return render(request, "recruit/done.html", {"participant": participant, "code": code, "return_url": url})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
@participant_may_use(ParticipantAccess.ANY_STEP)
def leave(request):
    """The participant's own "Leave": a page that says what leaving means, and a button
    (POST) that ends their part with the outcome `left` and its code."""
    participant = selectors.participant_of(request.user) if request.session.get(SESSION_KEY) else None
    if participant is None:
        raise Http404("No such page.")
    if participant.outcome:
        return redirect("recruit:done")
    if request.method == "POST":
        participation.finish_participation(participant=participant, outcome=Participant.Outcome.LEFT)
        return redirect("recruit:done")
    activate_study_language(request, participant.study)
    code = participant.link.left_code or participant.link.screenout_code
    return render(request, "recruit/leave.html", {"participant": participant, "code": code})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
@participant_may_use(ParticipantAccess.STUDY)
def not_passed(request, slug):
    """A participant who used every qualification attempt without passing: the gate's
    message and a choice (docs/recruitment.md). "Check again" returns to the next step (a
    study admin may have allowed a retry meanwhile, e.g. after a question); "Leave the
    study" ends their participation with the screen-out code."""
    study, participant = _rater_study(request, slug)
    activate_study_language(request, study)
    if participant is None:
        raise Http404("No such page.")
    gate = qualification_status(study=study, rater=request.user)
    if participant.outcome or gate.state != "failed":
        return flow.next_page(request, study, participant)
    if request.method == "POST":
        participation.finish_participation(participant=participant, outcome=Participant.Outcome.SCREENED_OUT)
        return redirect("recruit:done")
    return render(request, "recruit/not_passed.html", {"study": study, "gate": gate})


# --- the study admin's pages -------------------------------------------------------------


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def onboarding_admin(request, slug):
    study = get_study_for_admin(request.user, slug)
    onboarding = Onboarding.objects.filter(study=study).first()
    current = current_consent(study=study)
    form = OnboardingForm(
        initial={
            "consent_text": current.text if current else "",
            "instructions": onboarding.instructions if onboarding else "",
        }
    )
    question_form = QuestionForm()
    error, status = "", 200
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "save":
                form = OnboardingForm(request.POST)
                if not form.is_valid():
                    raise ApplicationError("; ".join(f"{f}: {' '.join(e)}" for f, e in form.errors.items()))
                onboarding_services.save_onboarding(study=study, by=request.user, **form.cleaned_data)
                messages.success(request, "Onboarding saved.")
            elif action == "add_question":
                question_form = QuestionForm(request.POST)
                if not question_form.is_valid():
                    raise ApplicationError("; ".join(f"{f}: {' '.join(e)}" for f, e in question_form.errors.items()))
                d = question_form.cleaned_data
                question = onboarding_services.question_from_form(
                    prompt=d["prompt"], kind=d["kind"], options_text=d["options"], required=d["required"]
                )
                onboarding_services.add_questionnaire_questions(study=study, questions=[question])
                messages.success(request, "Question added.")
            elif action == "suggested":
                suggested = list(onboarding_services.SUGGESTED_QUESTIONS)
                onboarding_services.add_questionnaire_questions(study=study, questions=suggested)
                messages.success(request, "The suggested questions were added.")
            elif action == "remove":
                onboarding_services.remove_questionnaire_question(study=study, key=request.POST.get("key", ""))
                messages.success(request, "Question removed.")
            else:
                raise ApplicationError("action: unknown button")
        except ApplicationError as exc:
            error, status = exc.message, exc.http_status
        else:
            return redirect("recruit:onboarding-admin", slug=study.slug)
    onboarding = Onboarding.objects.filter(study=study).first()
    definition = selectors.questionnaire_definition(onboarding)
    return render(
        request,
        "recruit/onboarding_admin.html",
        {
            "study": study,
            "form": form,
            "question_form": question_form,
            "questions": definition.questions if definition else (),
            "versions": study.consent_versions.order_by("-number"),
            "error": error,
        },
        status=status,
    )


def _prolific_url(request, link: RecruitmentLink) -> str:
    path = reverse("recruit:arrive", kwargs={"token": links.link_token(link)})
    return (
        request.build_absolute_uri(path)
        + "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def recruitment_admin(request, slug):
    study = get_study_for_admin(request.user, slug)
    form = LinkForm(request.POST or None)
    error, status = "", 200
    if request.method == "POST":
        if form.is_valid():
            try:
                links.create_link(study=study, by=request.user, **form.cleaned_data)
            except ApplicationError as exc:
                error, status = exc.message, exc.http_status
            else:
                messages.success(request, "Link created.")
                return redirect("recruit:recruitment-admin", slug=study.slug)
        else:
            error, status = form.error_message(), 400
    rows = [
        {
            "row": row,
            "url": _prolific_url(request, row.link),
            "edit": LinkEditForm(initial={f: getattr(row.link, f) for f in links.EDITABLE}, prefix=str(row.link.uuid)),
        }
        for row in selectors.links_of(study=study)
    ]
    return render(
        request,
        "recruit/recruitment_admin.html",
        {"study": study, "form": form, "rows": rows, "error": error},
        status=status,
    )


@login_required
@require_POST
def link_edit(request, slug, link_uuid):
    """Change a link's limits, codes, completion URL or messages; recorded (who, when,
    before and after) and listed under the link."""
    study = get_study_for_admin(request.user, slug)
    link = get_object_or_404(RecruitmentLink, study=study, uuid=link_uuid)
    form = LinkEditForm(request.POST, prefix=str(link.uuid))
    if not form.is_valid():
        messages.error(request, f"{link.name}: {form.error_message()}")
    else:
        try:
            change = links.update_link(link=link, by=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            messages.error(request, f"{link.name}: {exc.message}")
        else:
            messages.success(
                request,
                f"{link.name}: {', '.join(change.changes)} changed." if change else f"{link.name}: nothing changed.",
            )
    return redirect("recruit:recruitment-admin", slug=study.slug)


@login_required
@require_POST
def link_toggle(request, slug, link_uuid):
    study = get_study_for_admin(request.user, slug)
    link = get_object_or_404(RecruitmentLink, study=study, uuid=link_uuid)
    enable = request.POST.get("enabled") == "1"
    links.set_link_enabled(link=link, enabled=enable)
    messages.success(request, "Link enabled." if enable else "Link disabled: it lets nobody in now.")
    return redirect("recruit:recruitment-admin", slug=study.slug)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def participants_admin(request, slug):
    """The study's participants, for its admins: one row each with the panel id (shown
    here only), outcome, times, items, qualification and quality figures, bonuses, and the
    actions: a retry, an exclusion, approve and reject on Prolific, a bonus. A search by
    panel id is a POST, so the id never appears in an address or an access log."""
    study = get_study_for_admin(request.user, slug)
    participants = Participant.objects.filter(study=study).select_related("user", "link__batch", "study")
    form = ParticipantActionForm(
        request.POST or None, participant_uuids=[str(u) for u in participants.values_list("uuid", flat=True)]
    )
    search, status = "", 200
    if request.method == "POST":
        if not form.is_valid():
            messages.error(request, form.error_message())
            status = 400
        else:
            d = form.cleaned_data
            if d["action"] == "search":
                search = d["panel_id"].strip()
            else:
                try:
                    note = _participant_action(request, study, participants, d)
                except ApplicationError as exc:
                    messages.error(request, exc.message)
                else:
                    messages.success(request, note)
                return redirect("recruit:participants", slug=study.slug)
    page = selectors.participants_page(study=study, panel_id=search)
    return render(
        request,
        "recruit/participants_admin.html",
        {
            "study": study,
            "page": page,
            "form": form if status == 400 else ParticipantActionForm(),
            "categories": REJECTION_CATEGORIES,
            "prolific_on": bool(settings.PROLIFIC_API_TOKEN),
        },
        status=status,
    )


def _participant_action(request, study, participants, d) -> str:
    """Carry out one action of the participants page; the success message."""
    action, by = d["action"], request.user
    if action == "sync":
        result = panel.sync_submissions(study=study, by=by)
        return (
            f"{result.submissions} Prolific submissions read, {result.matched} matched; "
            f"{result.freed} returned or timed out: their items went back to the pool."
        )
    if action == "approve" or action == "reject":
        chosen = list(
            participants.filter(uuid__in=d["participants"] or ([d["participant"]] if d["participant"] else []))
        )
        if not chosen:
            raise ApplicationError("participants: tick at least one participant")
        if action == "approve":
            n = panel.approve(participants=chosen, by=by)
            return f"{n} submission{'s' if n != 1 else ''} approved on Prolific."
        n = panel.reject(participants=chosen, category=d["category"], message=d["message"], by=by)
        return f"{n} submission{'s' if n != 1 else ''} rejected on Prolific."
    if action == "pay":
        bonus = BonusPayment.objects.filter(uuid=d["bonus"], participant__study=study).first()
        if bonus is None:
            raise ApplicationError("bonus: no such bonus in this study")
        return panel.pay_bonus(bonus=bonus, by=by).message
    participant = participants.filter(uuid=d["participant"]).first() if d["participant"] else None
    if participant is None:
        raise ApplicationError("participant: no such participant in this study")
    name = participant.user.get_username()
    if action == "retry":
        allow_qualification_retry(study=study, rater=participant.user, granted_by=by)
        return f"{name} may try the qualification again."
    if action == "exclude":
        exclude_rater(batch=participant.link.batch, rater=participant.user, excluded_by=by, reason=d["reason"])
        return f"{name}'s answers in {participant.link.batch.name} are excluded from the analysis."
    # bonus
    if d["amount"] is None:
        raise ApplicationError("amount: give the bonus, e.g. 1.50")
    bonus = panel.record_bonus(participant=participant, amount_cents=int(d["amount"] * 100), reason=d["reason"], by=by)
    return panel.pay_bonus(bonus=bonus, by=by).message
