"""A bought model, ready to use: its downloads named with size and purpose (each a zip with the model card
``README.md`` and the feature specification), a "Use this model" snippet for the raw-column ONNX, the
feature specification, and a try-it form over the prediction service the API serves.

Access is :func:`market.commerce.selectors.global_model_require_access` (the buyer's organisation holds the
entitlement, or an operator), as for the API's download links and predictions.
"""

import json

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from frontend.decorators import page
from market.commerce.delivery import download_link_create
from market.commerce.packages import download_choices, prediction_curl, usage_snippet
from market.commerce.predictions import model_predict
from market.commerce.selectors import global_model_require_access
from market.errors import DomainError
from workers.modelio.raw_columns import input_schema


@require_GET
@page
def model_use_page(request, global_model_id):
    global_model = global_model_require_access(user=request.user, global_model_id=global_model_id)
    spec = global_model.job.public_dataset.feature_spec
    return render(
        request,
        "frontend/model_use/use.html",
        {
            "section": "purchases",
            "global_model": global_model,
            "listing": global_model.listings.first(),
            "choices": download_choices(global_model),
            "snippet": usage_snippet(global_model),
            "curl_line": prediction_curl(
                global_model, base_url=request.build_absolute_uri("/").rstrip("/")
            ),
            "columns": input_schema(spec),
            "class_labels": global_model.federation.class_labels,
        },
    )


@require_POST
@page
def model_download_action(request, global_model_id):
    """A fresh signed link to a zip package, followed at once: the browser downloads it."""
    link = download_link_create(
        user=request.user,
        global_model_id=global_model_id,
        package=True,
        file_format=request.POST.get("format", ""),
        request=request,
    )
    return redirect("api-download", token=link.token)


@require_GET
@page
def model_feature_spec_download(request, global_model_id):
    """The feature specification the model was trained with, for whoever may use the model."""
    global_model = global_model_require_access(user=request.user, global_model_id=global_model_id)
    response = HttpResponse(
        json.dumps(global_model.job.public_dataset.feature_spec, indent=2),
        content_type="application/json",
    )
    response["Content-Disposition"] = (
        f'attachment; filename="onefold-global-model-{global_model.id}-feature-spec.json"'
    )
    return response


def _try_row(request, columns: list[dict]) -> dict:
    """The form's one row: a blank field is a missing value, as in the API."""
    return {
        column["name"]: request.POST.get(f"column-{index}", "") or None
        for index, column in enumerate(columns)
    }


@require_POST
@page
def model_try_partial(request, global_model_id):
    """The prediction for the try-it form's row (audited as model.predicted, like the API's)."""
    global_model = global_model_require_access(user=request.user, global_model_id=global_model_id)
    row = _try_row(request, input_schema(global_model.job.public_dataset.feature_spec))
    try:
        result = model_predict(
            user=request.user, global_model_id=global_model.id, rows=[row], request=request
        )
    except DomainError as error:
        return render(request, "frontend/model_use/partials/try_result.html", {"error": str(error)})
    return render(
        request,
        "frontend/model_use/partials/try_result.html",
        {
            "predicted": result["classes"][0],
            "probabilities": list(zip(result["class_labels"], result["probabilities"][0])),
        },
    )
