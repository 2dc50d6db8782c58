from django.urls import path

from analysis import views

app_name = "analysis"

urlpatterns = [
    path("", views.study_list, name="studies"),
    path("<slug:slug>/", views.study_report, name="report"),
    path("<slug:slug>/progress", views.study_report_progress, name="progress"),
    path("<slug:slug>/recompute", views.study_report_recompute, name="recompute"),
    path("<slug:slug>/resume", views.study_report_resume, name="resume"),
    path("<slug:slug>/plots/<slug:kind>/<str:subject>.<slug:fmt>", views.study_report_plot, name="plot"),
    path("<slug:slug>/download/<str:name>", views.study_report_download, name="download"),
]
