from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.urls import include, path
from django.views.i18n import JavaScriptCatalog, set_language

from annotate import account_views
from annotate import study_views as annotate_study_views
from annotate import views as annotate_views
from annotate.api.schema import DocsView, SchemaView
from annotate.decorators import ParticipantAccess, participant_may_use
from annotate.urls import api_urlpatterns as annotate_api
from config import docs, health
from datasets.api_urls import urlpatterns as datasets_api

# INSTALLED_APPS has SimpleAdminConfig: every app's admin module is registered here, when
# the URLconf loads (before any request, and before the URL system checks read it).
admin.autodiscover()

# A body too large to read is a 413 naming the limit; other 400s are Django's.
handler400 = "config.middleware.bad_request"
# A refused permission is a page that says why and what to do (core.exceptions).
handler403 = "core.exceptions.permission_denied_page"

# One "api" namespace for every app's endpoints (reverse("api:export-list"), ...).
api_urlpatterns = [
    *annotate_api,
    *datasets_api,
    path("studies/<slug:slug>/analysis/", include("analysis.api_urls")),
    path("studies/<slug:slug>/ask/", include("generation.api_urls")),
]

urlpatterns = [
    path("", annotate_views.home, name="home"),
    # For load balancers and orchestrators: no login, no study data (config/health.py).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    # Before Django's own: a reset whose e-mail could not be sent says so.
    path("accounts/password_reset/", account_views.PasswordResetView.as_view(), name="password_reset"),
    path(
        "accounts/password_reset/done/",
        annotate_study_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/invite/<uidb64>/<token>/",
        annotate_study_views.InviteAcceptView.as_view(),
        name="invite-accept",
    ),
    path("accounts/", account_views.account_page, name="account"),
    # Single sign-on: OpenID Connect and SAML 2.0 (sso/, docs/accounts.md).
    path("accounts/sso/", include("sso.urls")),
    # Before Django's own: signing out is open to a participant at every step.
    path("accounts/logout/", participant_may_use(ParticipantAccess.ANY_STEP)(LogoutView.as_view()), name="logout"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    # The language switcher (a CSRF-protected POST) and the rater scripts' strings (docs/languages.md),
    # open to a participant at every step.
    path("i18n/setlang/", participant_may_use(ParticipantAccess.ANY_STEP)(set_language), name="set_language"),
    path(
        "jsi18n/",
        participant_may_use(ParticipantAccess.ANY_STEP)(JavaScriptCatalog.as_view()),
        name="javascript-catalog",
    ),
    path("rate/", include("annotate.urls")),
    path("", include("recruit.urls")),
    path("studies/", include("annotate.study_urls")),
    path("studies/", include("datasets.urls")),
    path("studies/", include("literature.urls")),
    path("studies/", include("generation.urls")),
    path("studies/", include("planning.urls")),
    path("analysis/", include("analysis.urls")),
    path("api/", include((api_urlpatterns, "api"))),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", DocsView.as_view(url_name="schema"), name="api-docs"),
    # The project's docs/ as pages (relative links between them keep working).
    path("docs/<str:name>.md", docs.doc_page, name="doc"),
    path("docs/<str:name>.png", docs.doc_image, name="doc-image"),
]
