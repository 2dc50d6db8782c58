from django.urls import path

from recruit import views

app_name = "recruit"

urlpatterns = [
    # Before r/<token>/: "done" and "leave" are no tokens.
    path("r/done/", views.done, name="done"),
    path("r/leave/", views.leave, name="leave"),
    path("r/<str:token>/", views.arrive, name="arrive"),
    path("r/s/<slug:slug>/next/", views.next_step, name="next"),
    path("r/s/<slug:slug>/consent/", views.consent, name="consent"),
    path("r/s/<slug:slug>/instructions/", views.instructions, name="instructions"),
    path("r/s/<slug:slug>/questionnaire/", views.questionnaire, name="questionnaire"),
    path("r/s/<slug:slug>/not-passed/", views.not_passed, name="not-passed"),
    path("studies/<slug:slug>/onboarding/", views.onboarding_admin, name="onboarding-admin"),
    path("studies/<slug:slug>/recruitment/", views.recruitment_admin, name="recruitment-admin"),
    path("studies/<slug:slug>/participants/", views.participants_admin, name="participants"),
    path("studies/<slug:slug>/recruitment/<uuid:link_uuid>/", views.link_toggle, name="link-toggle"),
    path("studies/<slug:slug>/recruitment/<uuid:link_uuid>/edit/", views.link_edit, name="link-edit"),
]
