from django.urls import path

from planning import views

app_name = "planning"

urlpatterns = [
    path("<slug:slug>/plan/", views.plan, name="plan"),
    path("<slug:slug>/plan/freeze", views.freeze, name="freeze"),
    path("<slug:slug>/plan/protocol/<int:version>/", views.protocol, name="protocol"),
]
