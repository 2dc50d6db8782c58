"""Setting a study up from the browser: a new study, a rubric upload, the
study's members (invites, existing accounts, roles, removal) and the page an invited
person sets their password on. Thin: a form, a service from annotate.services or
annotate.members, a page. Who may do what: annotate.members' docstring and docs/accounts.md.
"""

from __future__ import annotations

from types import SimpleNamespace

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import INTERNAL_RESET_SESSION_TOKEN
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.decorators import method_decorator
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from annotate import study_settings
from annotate.forms import MemberForm, RubricUploadForm, StudyCreateForm, StudySettingsForm
from annotate.models import Rubric, StudySettingChange
from annotate.pages.questions import question_views
from annotate.rubric_yaml import MAX_RUBRIC_BYTES
from annotate.selectors.access import get_study_for_admin
from annotate.services import members
from annotate.services.rubrics import (
    builtin_rubric_keys,
    delete_rubric,
    read_rubric_upload,
    rename_rubric,
    upload_rubric,
)
from annotate.services.studies import create_study
from core.exceptions import ApplicationError


def _require_creator(user) -> None:
    if not members.may_create_studies(user):
        # A rater can reach it from the Studies link: in the request's language, the admin's
        # labels a superuser follows as they are.
        raise PermissionDenied(
            gettext(
                "Creating studies and uploading rubrics needs a superuser or the “Can add study” permission, "
                "which your account does not have. A superuser grants it in the Django admin (/admin/): "
                "Users → your account → User permissions → “annotate | study | Can add study” → Save "
                "(docs/accounts.md)."
            )
        )


def rubric_choices() -> list[tuple[str, str]]:
    """Every rubric a study can name: the built-in ones and every stored key, newest version's title."""
    latest: dict[str, Rubric] = {}
    for rubric in Rubric.objects.only("key", "version", "title").order_by("key", "version"):
        latest[rubric.key] = rubric
    keys = sorted(set(latest) | set(builtin_rubric_keys()))
    return [(key, f"{key}: {latest[key].title} (v{latest[key].version})" if key in latest else key) for key in keys]


@login_required
@require_http_methods(["GET", "POST"])
def study_create(request):
    _require_creator(request.user)
    form = StudyCreateForm(request.POST or None, rubric_keys=rubric_choices())
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            study = create_study(
                slug=d["slug"],
                title=d["title"],
                rubric_key=d["rubric"],
                licence=d["licence"],
                guidelines=d["guidelines"],
                description=d["description"],
                created_by=request.user,
            )
        except ApplicationError as exc:
            named = {k: v for k, v in exc.extra.get("fields", {}).items() if k in form.fields}
            form.add_error(next(iter(named), None), exc.message)
        else:
            messages.success(
                request, f"Study {study.title!r} created with rubric {study.rubric}. You are its study admin."
            )
            return redirect("studies:dashboard", slug=study.slug)
    return render(
        request,
        "annotate/studies/study_form.html",
        {"form": form},
        status=400 if request.method == "POST" else 200,
    )


RUBRIC_ACTIONS = ("preview", "save", "rename", "delete")


def _uploaded_text(form: RubricUploadForm) -> str:
    upload = form.cleaned_data["file"]
    if upload.size > MAX_RUBRIC_BYTES:
        raise ApplicationError(f"A rubric file is at most {MAX_RUBRIC_BYTES:,} bytes.")
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ApplicationError("The file is not UTF-8 text.") from None


def _stored_rubric(request) -> Rubric:
    try:
        rubric = Rubric.objects.select_related("owner").filter(uuid=request.POST.get("rubric", "")).first()
    except ValidationError:
        rubric = None
    if rubric is None:
        raise ApplicationError("No such stored rubric: reload the page.")
    return rubric


@login_required
@require_http_methods(["GET", "POST"])
def rubric_upload(request):
    """The Rubrics page: a file is previewed (the rating form it makes, for a made-up item;
    nothing stored) and then saved, or saved at once; a stored version no study uses is
    renamed or deleted by its owner or a superuser."""
    _require_creator(request.user)
    action = request.POST.get("action") or "save"
    previewed = action == "save" and "text" in request.POST and not request.FILES
    takes_file = action in ("preview", "save") and not previewed
    form = RubricUploadForm(request.POST if takes_file else None, request.FILES if takes_file else None)
    status = 400 if request.method == "POST" else 200  # a POST that stored nothing
    preview = None
    error = ""
    if request.method == "POST":
        try:
            if action not in RUBRIC_ACTIONS:
                raise ApplicationError(f"Unknown action {action[:40]!r}.")
            if action == "rename":
                rubric = rename_rubric(
                    rubric=_stored_rubric(request), title=request.POST.get("title", ""), user=request.user
                )
                messages.success(request, f"Rubric {rubric.key} v{rubric.version} is now titled {rubric.title!r}.")
                return redirect("studies:rubrics")
            if action == "delete":
                rubric = _stored_rubric(request)
                delete_rubric(rubric=rubric, user=request.user)
                messages.success(request, f"Rubric {rubric.key} v{rubric.version} deleted.")
                return redirect("studies:rubrics")
            if takes_file and not form.is_valid():
                raise _FormInvalid
            text = request.POST["text"] if previewed else _uploaded_text(form)
            if action == "preview":
                preview = _rubric_preview(read_rubric_upload(text=text, user=request.user), text)
                status = 200
            else:
                rubric, new = upload_rubric(text=text, user=request.user)
                if new:
                    messages.success(request, f"Rubric {rubric.key} stored as version {rubric.version}.")
                else:
                    messages.info(request, f"Rubric {rubric.key} is unchanged: still version {rubric.version}.")
                return redirect("studies:rubrics")
        except _FormInvalid:
            pass
        except ApplicationError as exc:  # RubricDefinitionError and RubricOwnershipError too
            if takes_file:
                form.add_error("file", exc.message)
            else:
                error = exc.message
            status = exc.http_status
    rubrics = (
        Rubric.objects.defer("definition")
        .select_related("owner")
        .annotate(n_studies=Count("studies"))
        .order_by("key", "-version")
    )
    return render(
        request,
        "annotate/studies/rubrics.html",
        {
            "form": form,
            "rubrics": rubrics,
            "builtin": builtin_rubric_keys(),
            "preview": preview,
            "error": error,
            "me": request.user,
        },
        status=status,
    )


class _FormInvalid(Exception):
    """The upload form's own errors are shown on the form."""


# A made-up item for the preview: parts of the kinds a rubric may ask about.
_PREVIEW_FINDINGS = (
    SimpleNamespace(
        uuid="preview-finding-1",
        intervention="Drug A",
        comparator="placebo",
        outcome="systolic blood pressure",
        label="significantly decreased",
        evidence="Drug A lowered systolic blood pressure more than placebo.",
    ),
)
_PREVIEW_CLAIMS = (
    SimpleNamespace(id="sentence-1", number=1, text="Drug A lowered blood pressure.", start=None, end=None),
)
_PREVIEW_COMPARED = (SimpleNamespace(label="A", uuid="preview-a"), SimpleNamespace(label="B", uuid="preview-b"))


def _rubric_preview(definition, text: str) -> dict:
    """What the preview shows: the rating form's questions for a made-up item (a finding,
    a claim and, for comparison questions, two summaries), and the file to save."""
    single = question_views(definition, {}, {}, {}, _PREVIEW_FINDINGS, _PREVIEW_CLAIMS)
    compared = question_views(definition, {}, {}, {}, _PREVIEW_FINDINGS, _PREVIEW_CLAIMS, compared=_PREVIEW_COMPARED)
    order = {q.key: i for i, q in enumerate(definition.questions)}
    questions = sorted(single + compared, key=lambda view: order[view["q"].key])
    return {"definition": definition, "questions": questions, "text": text}


@login_required
@require_http_methods(["GET", "POST"])
def study_settings_page(request, slug):
    """The study's settings (title, guidelines, licence, description, the monitor's floor)
    and the record of every change to them, from this page or an import."""
    study = get_study_for_admin(request.user, slug)
    initial = {field: getattr(study, field) for field in StudySettingsForm.base_fields}
    form = StudySettingsForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            changes = study_settings.update_study_settings(
                study=study, values=form.cleaned_data, changed_by=request.user, via=StudySettingChange.Via.PAGE
            )
        except ApplicationError as exc:
            named = [k for k in exc.extra.get("fields", {}) if k in form.fields]
            form.add_error(named[0] if named else None, exc.message)
        else:
            if changes:
                messages.success(request, f"Saved: {', '.join(c.field for c in changes)}.")
            else:
                messages.info(request, "Nothing changed.")
            return redirect("studies:settings", slug=study.slug)
    history = StudySettingChange.objects.filter(study=study).select_related("changed_by").order_by("-created_at", "-pk")
    return render(
        request,
        "annotate/studies/settings.html",
        {"study": study, "form": form, "history": history[:200]},
        status=400 if form.errors else 200,
    )


def _member(study, user_id):
    user = get_user_model().objects.filter(pk=user_id, memberships__study=study).distinct().first()
    if user is None:
        raise ApplicationError("This account is not a member of the study.")
    return user


@login_required
@require_http_methods(["GET", "POST"])
def study_members(request, slug):
    """The study's people: who has which role, invites by e-mail, existing accounts added
    by exact username or e-mail, roles set, members removed (their work stays)."""
    study = get_study_for_admin(request.user, slug)
    invitation = None
    error = ""
    if request.method == "POST":
        form = MemberForm(request.POST)
        try:
            if not form.is_valid():
                raise ApplicationError(form.error_message())
            d = form.cleaned_data
            action = d["action"]
            if action == "invite":
                invitation = members.invite_member(
                    study=study,
                    email=d["email"],
                    username=d["username"],
                    role=d["role"] or "rater",
                    invited_by=request.user,
                    request=request,
                )
            elif action == "link":
                invitation = members.reissue_invitation(
                    study=study, user=_member(study, d["user"]), invited_by=request.user, request=request
                )
            elif action == "add":
                membership = members.add_existing_member(
                    study=study, identifier=d["account"], role=d["role"] or "rater"
                )
                messages.success(request, f"{membership.user.get_username()} added as {membership.get_role_display()}.")
            elif action == "roles":
                user = _member(study, d["user"])
                roles = members.set_member_roles(study=study, user=user, roles=d["roles"], changed_by=request.user)
                messages.success(request, f"{user.get_username()}: {', '.join(roles)}.")
            elif action == "remove":
                user = _member(study, d["user"])
                withdrawn = members.remove_member(study=study, user=user, removed_by=request.user)
                messages.success(
                    request,
                    f"{user.get_username()} removed from the study; their answers are kept"
                    + (
                        f", {withdrawn} unfinished assignment{'s' if withdrawn != 1 else ''} withdrawn."
                        if withdrawn
                        else "."
                    ),
                )
            if invitation is None:
                return redirect("studies:members", slug=study.slug)
        except ApplicationError as exc:
            error = exc.message
    return render(
        request,
        "annotate/studies/members.html",
        {
            "study": study,
            "rows": members.study_members(study),
            "invitation": invitation,
            "mail_configured": members.mail_is_configured(),
            "error": error,
            "me": request.user,
        },
        status=400 if error else 200,
    )


class InviteAcceptView(auth_views.PasswordResetConfirmView):
    """The invitation link: a one-time password-reset token naming the study and the admin
    it was made for (annotate.members.InvitationTokens), on a page that says "set your
    password" and then sends the person to log in. Each use, the form's and the POST's
    alike, asks set_password_link_refusal again: a link the account would no longer get
    is refused on a page that says why and what to do."""

    template_name = "registration/invite_accept.html"
    success_url = reverse_lazy("login")
    reset_url_token = "set-password"
    token_generator = members.invitation_tokens

    @method_decorator(sensitive_post_parameters())
    @method_decorator(never_cache)
    def dispatch(self, request, *args, **kwargs):
        token = kwargs.get("token")
        if token == self.reset_url_token:
            token = request.session.get(INTERNAL_RESET_SESSION_TOKEN)
        account = self.get_user(kwargs.get("uidb64", ""))
        # Only a valid link learns why it is refused: a guessed one is just "not valid".
        grant = members.invitation_tokens.grant(account, token)
        if grant is not None:
            refusal = members.set_password_link_refusal(account=account, study=grant.study, issuer=grant.issuer)
            if refusal is not None:
                request.session.pop(INTERNAL_RESET_SESSION_TOKEN, None)
                return render(
                    request,
                    "annotate/invite_refused.html",
                    {"refusal": refusal, "username": account.get_username()},
                    status=403,
                )
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form):
        response = super().form_valid(form)
        messages.success(
            self.request, gettext("Password set. Log in as %(username)s.") % {"username": form.user.get_username()}
        )
        return response


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    """After "Forgot your password?": what was and was not sent, without telling whether an
    account has the address (docs/accounts.md). Django mails only active accounts with a
    usable password; the page says so, and says when this site delivers no mail at all."""

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "mail_configured": members.mail_is_configured()}
