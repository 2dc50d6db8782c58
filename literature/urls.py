"""Pages of the literature app, under /studies/<slug>/ (config/urls.py)."""

from django.urls import path

from literature import views

app_name = "literature"

urlpatterns = [
    path("<slug:slug>/questions/", views.questions, name="questions"),
]
