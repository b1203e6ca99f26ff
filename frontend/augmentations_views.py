"""Pages of federated augmentations: the operator's form that opens one, and one augmentation's seeds (counts and
leakage; a silo sees its own only), the generator's status and the ε charged; silos upload seeds and operators start
the training from it."""

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from frontend.decorators import page
from frontend.sent_once import sent_once
from market.augmentations.apis import AugmentationInput
from market.augmentations.models import AugmentationStatus, GeneratorKind
from market.augmentations.selectors import augmentation_get, seed_summaries
from market.augmentations.services import (
    augmentation_cancel,
    augmentation_create,
    augmentation_start,
    seeds_upload,
)
from market.commerce.services import require_operator
from market.errors import InvalidInput, NotFound
from market.federations.selectors import federation_get, public_dataset_current
from market.json_input import json_text_parse

#: The form's fields, those of ``POST /api/augmentations/`` but the federation (the page's): name, label, input
#: kind ("text", "integer" or "number") and help.
TRAINING_FIELDS = (
    ("name", "Name", "text", ""),
    (
        "generator",
        "Generator",
        "choice",
        "The MLP GAN suits features in [0, 1] such as images and can be DP; a CTGAN suits tabular rows, "
        "publishes generated rows and is never DP.",
    ),
    (
        "n_features",
        "Features per seed row",
        "integer",
        "Numbers in [0, 1] per seed sample (MNIST: 784 pixels); at most {max_features}.",
    ),
    ("epochs", "Epochs", "integer", "Passes of the discriminator over the pooled seeds."),
    ("batch_size", "Batch size", "integer", "Expected seeds per step (Poisson sampling with DP)."),
    (
        "use_public_data",
        "Pretrain on the public data",
        "checkbox",
        "The MLP GAN first learns from the federation's public rows, unlabelled and at no ε; their "
        "columns must be the seed features, with values in [0, 1].",
    ),
)
PRIVACY_FIELDS = (
    (
        "noise_multiplier",
        "Noise multiplier σ",
        "number",
        "Give σ or a target ε for a DP discriminator; leave both empty for none (only where the "
        "federation allows L0).",
    ),
    (
        "target_epsilon",
        "Target ε",
        "number",
        "σ is solved for this ε when the training starts, on the pooled seed count.",
    ),
    ("max_grad_norm", "Clipping norm", "number", "Per-example gradient clipping."),
    ("delta", "δ", "number", ""),
)
FORM_FIELDS = tuple(name for name, *_ in TRAINING_FIELDS + PRIVACY_FIELDS)
FORM_DEFAULTS = {
    "generator": GeneratorKind.MLP_GAN,
    "epochs": 60,
    "batch_size": 32,
    "target_epsilon": 10,
    "max_grad_norm": 1.0,
    "delta": 1e-5,
}


@require_http_methods(["GET", "POST"])
@page
@sent_once
def augmentation_create_page(request, slug):
    """The operator's form for ``POST /api/augmentations/``: the API's serializer reads it and the API's service
    checks it (no second validation here); each refusal is shown next to the field it is about."""
    federation = federation_get(slug=slug, user=request.user)
    require_operator(request.user, "open federated augmentations")
    if request.method == "GET":
        return _form_page(request, federation, _form_defaults(federation), {})
    given_form = request.POST.copy()
    given_form["federation"] = federation.slug
    given = AugmentationInput(data=given_form)
    if not given.is_valid():
        errors = {
            name: " ".join(str(sentence) for sentence in sentences)
            for name, sentences in given.errors.items()
        }
        return _form_page(request, federation, request.POST, errors, status=400)
    fields = dict(given.validated_data)
    fields.pop("federation")
    try:
        augmentation = augmentation_create(federation=federation, actor=request.user, **fields)
    except InvalidInput as error:
        return _form_page(
            request, federation, request.POST, {error.field or "": str(error)}, status=400
        )
    messages.success(
        request, f"{augmentation.name} opened: member silos can upload their seeds now."
    )
    return redirect("augmentation-detail", augmentation_id=augmentation.id)


def _form_page(request, federation, values, errors: dict[str, str], status: int = 200):
    """The form with ``values``; an error about a form field next to it, any other above the form."""

    def fields(specs):
        return [
            {
                "name": name,
                "label": label,
                "kind": kind,
                "help": help_text.format(max_features=settings.ONEFOLD_FAUG_MAX_FEATURES),
                "value": values.get(name, ""),
                "options": GeneratorKind.choices if kind == "choice" else (),
                "error": errors.get(name, ""),
            }
            for name, label, kind, help_text in specs
        ]

    return render(
        request,
        "frontend/augmentations/new.html",
        {
            "federation": federation,
            "training_fields": fields(TRAINING_FIELDS),
            "privacy_fields": fields(PRIVACY_FIELDS),
            "error": " ".join(
                message for name, message in errors.items() if name not in FORM_FIELDS
            ),
        },
        status=status,
    )


def _form_defaults(federation) -> dict:
    """The paper's setting (60 epochs, batches of 32) with a DP discriminator at ε = 10; seed rows as wide as
    the federation's encoded public data, when it has some."""
    try:
        n_features = public_dataset_current(federation=federation).n_features
    except NotFound:
        n_features = ""
    return {**FORM_DEFAULTS, "n_features": n_features}


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
            "may_cancel": request.user.is_operator
            and augmentation.cancel_requested_at is None
            and augmentation.status
            in (
                AugmentationStatus.COLLECTING,
                AugmentationStatus.QUEUED,
                AugmentationStatus.TRAINING,
            ),
        },
    )


@require_POST
@page
@sent_once
def augmentation_seeds_action(request, augmentation_id):
    """Seeds as a JSON file ``{"target_labels", "labels", "features"}``, checked as the API checks them."""
    augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
    upload = request.FILES.get("seeds")
    if upload is None:
        raise InvalidInput("Choose a JSON file of seeds to upload.", field="seeds")
    if upload.size > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:  # the API's limit on a JSON body
        raise InvalidInput(
            f"A seeds file is at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes, not {upload.size}.",
            field="seeds",
        )
    try:
        body = json_text_parse(upload.read())
    except ValueError as error:
        raise InvalidInput(f"The seeds file cannot be used: {error}", field="seeds") from None
    if not isinstance(body, dict):
        raise InvalidInput("The seeds file must hold one JSON object.", field="seeds")
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
@sent_once
def augmentation_start_action(request, augmentation_id):
    augmentation = augmentation_get(augmentation_id=augmentation_id, user=request.user)
    augmentation_start(augmentation=augmentation, actor=request.user, request=request)
    messages.success(request, "The generator's training is queued.")
    return redirect("augmentation-detail", augmentation_id=augmentation.id)


@require_POST
@page
@sent_once
def augmentation_cancel_action(request, augmentation_id):
    augmentation = augmentation_cancel(
        augmentation=augmentation_get(augmentation_id=augmentation_id, user=request.user),
        actor=request.user,
        request=request,
    )
    messages.info(
        request,
        f"Augmentation #{augmentation.id}: "
        + (
            "cancelled."
            if augmentation.status == AugmentationStatus.CANCELLED
            else "cancellation requested; the worker stops at its next step."
        ),
    )
    return redirect("augmentation-detail", augmentation_id=augmentation.id)
