"""Included by config/urls.py under /api/studies/<slug>/ask/ (in the `api` namespace)."""

from django.urls import path

from generation import api

urlpatterns = [
    path("<uuid:uuid>/", api.AskStatus.as_view(), name="ask-status"),
]
