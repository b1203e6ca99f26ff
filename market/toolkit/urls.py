from django.urls import path

from market.toolkit.apis import ToolkitApi, silo_guide, toolkit_wheel_download

api_urlpatterns = [path("toolkit/", ToolkitApi.as_view(), name="api-toolkit")]

urlpatterns = [
    path("silo-guide.md", silo_guide, name="silo-guide"),
    path("<str:filename>", toolkit_wheel_download, name="toolkit-wheel"),
]
