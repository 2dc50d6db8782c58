"""Included by config/urls.py under /api/studies/<slug>/analysis/ (in the `api` namespace)."""

from django.urls import path

from analysis import api

urlpatterns = [
    path("", api.StudyAnalysis.as_view(), name="study-analysis"),
]
