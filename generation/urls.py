"""Pages of the generation app, under /studies/<slug>/ (config/urls.py)."""

from django.urls import path

from generation import views

app_name = "generation"

urlpatterns = [
    path("<slug:slug>/evaluators/", views.evaluators, name="evaluators"),
]
