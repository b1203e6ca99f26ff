"""Pages of federated augmentations: one augmentation's seeds (counts and leakage; a silo sees its own only), the
generator's status and the ε charged; silos upload seeds and operators start the training from it."""

import json

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from frontend.decorators import page
from market.augmentations.selectors import augmentation_get, seed_summaries
from market.augmentations.services import augmentation_start, seeds_upload
from market.errors import InvalidInput
from market.json_input import json_problem


@require_GET
@page
def augmentation_detail_page(request, augmentation_id):
    augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
    seeds = seed_summaries(augmentation=augmentation, user=request.user)
    own_uploaded = any(seed.target_labels is not None for seed in seeds)
    class_labels = augmentation.federation.class_labels
    return render(
        request,
        "frontend/augmentations/detail.html",
        {
            "augmentation": augmentation,
            "seeds": [
                {
                    "seed": seed,
                    "target_names": [class_labels[label] for label in seed.target_labels or []],
                }
                for seed in seeds
            ],
            "may_upload": request.user.organisation_id is not None and not own_uploaded,
            "epsilon": (augmentation.privacy_report or {}).get("epsilon"),
        },
    )


@require_POST
@page
def augmentation_seeds_action(request, augmentation_id):
    """Seeds as a JSON file ``{"target_labels", "labels", "features"}``, checked as the API checks them."""
    augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
    upload = request.FILES.get("seeds")
    if upload is None:
        raise InvalidInput("Choose a JSON file of seeds to upload.")
    if upload.size > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:  # the API's limit on a JSON body
        raise InvalidInput(
            f"A seeds file is at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes, not {upload.size}."
        )
    try:
        body = json.loads(upload.read())
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidInput(f"The seeds file is not JSON: {error}.") from error
    problem = json_problem(body)
    if problem or not isinstance(body, dict):
        raise InvalidInput(problem or "The seeds file must hold one JSON object.")
    seeds_upload(
        augmentation=augmentation,
        user=request.user,
        target_labels=body.get("target_labels"),
        labels=body.get("labels"),
        features=body.get("features"),
    )
    messages.success(request, "Your seeds were uploaded.")
    return redirect("augmentation-detail", augmentation_id=augmentation.id)


@require_POST
@page
def augmentation_start_action(request, augmentation_id):
    augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
    augmentation_start(augmentation=augmentation, actor=request.user, request=request)
    messages.success(request, "The generator's training is queued.")
    return redirect("augmentation-detail", augmentation_id=augmentation.id)
