from django.urls import path

from annotate import monitor_views, qualification_views, study_views, views

app_name = "studies"

urlpatterns = [
    path("", views.studies, name="list"),
    # Before <slug>/: annotate.services.studies.RESERVED_SLUGS keeps studies off these names.
    path("new/", study_views.study_create, name="create"),
    path("rubrics/", study_views.rubric_upload, name="rubrics"),
    path("<slug:slug>/", views.study_dashboard, name="dashboard"),
    path("<slug:slug>/members/", study_views.study_members, name="members"),
    path("<slug:slug>/settings/", study_views.study_settings_page, name="settings"),
    path("<slug:slug>/batches/new/", views.batch_create, name="batch-create"),
    path("<slug:slug>/qualification/", qualification_views.qualification_page, name="qualification"),
    path("<slug:slug>/gold/<uuid:summary_uuid>/", qualification_views.gold_form, name="gold"),
    path("<slug:slug>/batches/<uuid:batch_uuid>/", views.batch_detail, name="batch"),
    path("<slug:slug>/flags/", monitor_views.flag_inbox, name="flags"),
    path("<slug:slug>/batches/<uuid:batch_uuid>/monitor/", monitor_views.batch_monitor_page, name="monitor"),
    path("<slug:slug>/batches/<uuid:batch_uuid>/disagreements/", views.disagreements, name="disagreements"),
    path("<slug:slug>/batches/<uuid:batch_uuid>/items/<uuid:summary_uuid>/", views.batch_item, name="batch-item"),
]
