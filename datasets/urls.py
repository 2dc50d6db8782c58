"""Study admins' pages of the datasets app, under /studies/<slug>/ (config/urls.py)."""

from django.urls import path

from datasets import views

app_name = "datasets"

urlpatterns = [
    path("<slug:slug>/imports/", views.imports, name="imports"),
    path("<slug:slug>/imports/<uuid:import_id>/retry/", views.import_retry, name="import-retry"),
    path("<slug:slug>/exports/", views.exports, name="exports"),
    path("<slug:slug>/exports/<uuid:export_id>/", views.export_detail, name="export"),
    path("<slug:slug>/releases/", views.releases, name="releases"),
    path("<slug:slug>/releases/<uuid:release_id>/hub/", views.release_publish, {"target": "hub"}, name="release-hub"),
    path(
        "<slug:slug>/releases/<uuid:release_id>/zenodo/",
        views.release_publish,
        {"target": "zenodo"},
        name="release-zenodo",
    ),
]
