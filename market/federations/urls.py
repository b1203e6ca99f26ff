from django.urls import path

from market.federations import apis

urlpatterns = [
    path("federations/", apis.FederationListApi.as_view(), name="api-federation-list"),
    path(
        "federations/<slug:slug>/", apis.FederationDetailApi.as_view(), name="api-federation-detail"
    ),
    path(
        "federations/<slug:slug>/join/",
        apis.FederationJoinApi.as_view(),
        name="api-federation-join",
    ),
    path(
        "federations/<slug:slug>/join-requests/",
        apis.JoinRequestListApi.as_view(),
        name="api-join-request-list",
    ),
    path(
        "join-requests/<int:join_request_id>/admit/",
        apis.JoinRequestAdmitApi.as_view(),
        name="api-join-request-admit",
    ),
    path(
        "join-requests/<int:join_request_id>/refuse/",
        apis.JoinRequestRefuseApi.as_view(),
        name="api-join-request-refuse",
    ),
    path(
        "federations/<slug:slug>/public-dataset/pulled.zip",
        apis.PulledFolderDownloadApi.as_view(),
        name="api-pulled-folder",
    ),
    path(
        "federations/<slug:slug>/members/",
        apis.MemberListApi.as_view(),
        name="api-member-list",
    ),
    path(
        "federations/<slug:slug>/members/<int:organisation_id>/remove/",
        apis.MemberRemoveApi.as_view(),
        name="api-member-remove",
    ),
    path(
        "federations/<slug:slug>/public-dataset/",
        apis.PublicDatasetApi.as_view(),
        name="api-public-dataset",
    ),
    path(
        "federations/<slug:slug>/public-dataset/features.npz",
        apis.PublicFeaturesDownloadApi.as_view(),
        name="api-public-features",
    ),
    path(
        "federations/<slug:slug>/public-dataset/feature-spec.json",
        apis.FeatureSpecDownloadApi.as_view(),
        name="api-feature-spec",
    ),
    path(
        "federations/<slug:slug>/evaluation-split/",
        apis.EvaluationSplitApi.as_view(),
        name="api-evaluation-split",
    ),
    path(
        "federations/<slug:slug>/evaluation-split/data.npz",
        apis.EvaluationSplitDownloadApi.as_view(),
        name="api-evaluation-split-data",
    ),
]
