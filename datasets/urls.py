"""Study admins' pages of the datasets app, under /studies/<slug>/ (config/urls.py)."""

from django.urls import path

from datasets import views

app_name = "datasets"

urlpatterns = [
    path("<slug:slug>/imports/", views.imports, name="imports"),
    path("<slug:slug>/imports/<uuid:import_id>/retry/", views.import_retry, name="import-retry"),
]
