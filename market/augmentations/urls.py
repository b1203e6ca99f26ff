from django.urls import path

from market.augmentations import apis

urlpatterns = [
    path("augmentations/", apis.AugmentationListApi.as_view(), name="api-augmentation-list"),
    path(
        "augmentations/<int:augmentation_id>/",
        apis.AugmentationDetailApi.as_view(),
        name="api-augmentation-detail",
    ),
    path(
        "augmentations/<int:augmentation_id>/seeds/",
        apis.SeedsUploadApi.as_view(),
        name="api-augmentation-seeds",
    ),
    path(
        "augmentations/<int:augmentation_id>/leakage/",
        apis.LeakagePreviewApi.as_view(),
        name="api-augmentation-leakage",
    ),
    path(
        "augmentations/<int:augmentation_id>/start/",
        apis.AugmentationStartApi.as_view(),
        name="api-augmentation-start",
    ),
    path(
        "augmentations/<int:augmentation_id>/cancel/",
        apis.AugmentationCancelApi.as_view(),
        name="api-augmentation-cancel",
    ),
    path(
        "augmentations/<int:augmentation_id>/generator/",
        apis.GeneratorDownloadApi.as_view(),
        name="api-augmentation-generator",
    ),
]
