from django.urls import path

from market.jobs.apis import (
    FederationJobEstimateListApi,
    FederationJobListApi,
    GlobalModelDetailApi,
    GlobalModelFeatureSpecApi,
    JobCancelApi,
    JobDetailApi,
    JobEstimateDetailApi,
    JobListApi,
)
from market.jobs.price_apis import BudgetCalibrationApi, BudgetPriceApi

urlpatterns = [
    path(
        "federations/<slug:slug>/budget-price/", BudgetPriceApi.as_view(), name="api-budget-price"
    ),
    path(
        "federations/<slug:slug>/budget-calibration/",
        BudgetCalibrationApi.as_view(),
        name="api-budget-calibration",
    ),
    path(
        "federations/<slug:slug>/jobs/", FederationJobListApi.as_view(), name="api-federation-jobs"
    ),
    path(
        "federations/<slug:slug>/job-estimates/",
        FederationJobEstimateListApi.as_view(),
        name="api-federation-job-estimates",
    ),
    path(
        "job-estimates/<int:estimate_id>/",
        JobEstimateDetailApi.as_view(),
        name="api-job-estimate-detail",
    ),
    path("jobs/", JobListApi.as_view(), name="api-job-list"),
    path("jobs/<int:job_id>/", JobDetailApi.as_view(), name="api-job-detail"),
    path("jobs/<int:job_id>/cancel/", JobCancelApi.as_view(), name="api-job-cancel"),
    path(
        "global-models/<int:global_model_id>/",
        GlobalModelDetailApi.as_view(),
        name="api-global-model-detail",
    ),
    path(
        "global-models/<int:global_model_id>/feature-spec.json",
        GlobalModelFeatureSpecApi.as_view(),
        name="api-global-model-feature-spec",
    ),
]
