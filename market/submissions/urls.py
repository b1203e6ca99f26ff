from django.urls import path

from market.submissions.apis import SubmissionDetailApi, SubmissionListApi

urlpatterns = [
    path("submissions/", SubmissionListApi.as_view(), name="api-submission-list"),
    path(
        "submissions/<int:submission_id>/",
        SubmissionDetailApi.as_view(),
        name="api-submission-detail",
    ),
]
