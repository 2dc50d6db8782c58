from django.urls import path

from annotate import api, views

app_name = "annotate"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("<uuid:assignment_uuid>/", views.rate, name="rate"),
    path("<uuid:assignment_uuid>/feedback/", views.feedback, name="feedback"),
]

api_urlpatterns = (
    [
        path("assignments/", api.AssignmentList.as_view(), name="assignment-list"),
        path("assignments/<uuid:assignment_uuid>/", api.AssignmentDetail.as_view(), name="assignment-detail"),
        path("assignments/<uuid:assignment_uuid>/rating/", api.AssignmentRating.as_view(), name="assignment-rating"),
        path("assignments/<uuid:assignment_uuid>/submit/", api.AssignmentSubmit.as_view(), name="assignment-submit"),
        path("assignments/<uuid:assignment_uuid>/skip/", api.AssignmentSkip.as_view(), name="assignment-skip"),
        path("assignments/<uuid:assignment_uuid>/reopen/", api.AssignmentReopen.as_view(), name="assignment-reopen"),
    ],
    "api",
)
