"""Pages of the generation app, under /studies/<slug>/ (config/urls.py)."""

from django.urls import path

from generation import views

app_name = "generation"

urlpatterns = [
    path("<slug:slug>/evaluators/", views.evaluators, name="evaluators"),
    path("<slug:slug>/ask/", views.ask, name="ask"),
    path("<slug:slug>/ask/<uuid:uuid>/", views.asked, name="asked"),
    path("<slug:slug>/ask/<uuid:uuid>/add/", views.add_asked, name="add-asked"),
]
