from django.urls import path

from annotate import api, views

app_name = "annotate"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("<uuid:assignment_uuid>/", views.RateView.as_view(), name="rate"),
    path("<uuid:assignment_uuid>/feedback/", views.feedback, name="feedback"),
    path("studies/<slug:slug>/continue/", views.continue_study, name="continue"),
    path("studies/<slug:slug>/done/", views.done, name="done"),
    path("<uuid:assignment_uuid>/flag/", views.flag, name="flag"),
]

BATCH = "studies/<slug:slug>/batches/<uuid:batch_uuid>/"

api_urlpatterns = [
    path("auth/token/", api.AuthToken.as_view(), name="auth-token"),
    path("assignments/", api.AssignmentList.as_view(), name="assignment-list"),
    path("assignments/<uuid:assignment_uuid>/", api.AssignmentDetail.as_view(), name="assignment-detail"),
    path("assignments/<uuid:assignment_uuid>/rating/", api.AssignmentRating.as_view(), name="assignment-rating"),
    path("assignments/<uuid:assignment_uuid>/submit/", api.AssignmentSubmit.as_view(), name="assignment-submit"),
    path("assignments/<uuid:assignment_uuid>/skip/", api.AssignmentSkip.as_view(), name="assignment-skip"),
    path("assignments/<uuid:assignment_uuid>/reopen/", api.AssignmentReopen.as_view(), name="assignment-reopen"),
    path("assignments/<uuid:assignment_uuid>/flags/", api.AssignmentFlagList.as_view(), name="assignment-flags"),
    path("studies/", api.StudyList.as_view(), name="study-list"),
    path("studies/<slug:slug>/", api.StudyDetail.as_view(), name="study-detail"),
    path("studies/<slug:slug>/sources/", api.SourceList.as_view(), name="source-list"),
    path("studies/<slug:slug>/sources/<uuid:source_uuid>/", api.SourceDetail.as_view(), name="source-detail"),
    path("studies/<slug:slug>/summaries/", api.SummaryList.as_view(), name="summary-list"),
    path("studies/<slug:slug>/summaries/<uuid:summary_uuid>/", api.SummaryDetail.as_view(), name="summary-detail"),
    path("studies/<slug:slug>/summaries/<uuid:summary_uuid>/claims/", api.ClaimList.as_view(), name="claim-list"),
    path("studies/<slug:slug>/batches/", api.BatchList.as_view(), name="batch-list"),
    path("studies/<slug:slug>/batches/<uuid:batch_uuid>/", api.BatchDetail.as_view(), name="batch-detail"),
    path(f"{BATCH}rerating/", api.BatchRerating.as_view(), name="batch-rerating"),
    path(f"{BATCH}assignments/", api.BatchAssignmentList.as_view(), name="batch-assignment-list"),
    path(
        f"{BATCH}assignments/<uuid:assignment_uuid>/withdraw/",
        api.AssignmentWithdraw.as_view(),
        name="batch-assignment-withdraw",
    ),
    path(
        f"{BATCH}assignments/<uuid:assignment_uuid>/move/",
        api.AssignmentMove.as_view(),
        name="batch-assignment-move",
    ),
    path(f"{BATCH}answers/", api.BatchAnswerList.as_view(), name="batch-answer-list"),
    path(f"{BATCH}answers.jsonl", api.BatchAnswerStream.as_view(), name="batch-answer-stream"),
    path(f"{BATCH}disagreements/", api.BatchDisagreementList.as_view(), name="batch-disagreement-list"),
    path(f"{BATCH}consensus/", api.BatchConsensusList.as_view(), name="batch-consensus-list"),
    path(f"{BATCH}notes/", api.BatchNoteList.as_view(), name="batch-note-list"),
]
