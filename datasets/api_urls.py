"""The dataset export and import endpoints, mounted under /api/ by config/urls.py (docs/api.md)."""

from django.urls import path

from datasets import api

urlpatterns = [
    path("studies/<slug:slug>/exports/", api.ExportList.as_view(), name="export-list"),
    path("studies/<slug:slug>/exports/<uuid:export_id>/", api.ExportDetail.as_view(), name="export-detail"),
    path(
        "studies/<slug:slug>/exports/<uuid:export_id>/download/",
        api.ExportDownload.as_view(),
        name="export-download",
    ),
    path("studies/<slug:slug>/exports/<uuid:export_id>/retry/", api.ExportRetry.as_view(), name="export-retry"),
    path("studies/<slug:slug>/imports/", api.ImportList.as_view(), name="import-list"),
    path("studies/<slug:slug>/imports/<uuid:import_id>/retry/", api.ImportRetry.as_view(), name="import-retry"),
    path("studies/<slug:slug>/imports/<uuid:import_id>/", api.ImportDetail.as_view(), name="import-detail"),
]
