"""The operator's work in the app: create a federation, upload its public data and evaluation split (with a
preview of the inferred feature specification), list a succeeded job's model in the market, top wallets up
and decide buyers' credit requests; and the buyer's side of the last one ("add credits").

Each page calls the service the API calls (market.federations.services, market.commerce.services and
market.commerce.wallets), which checks the operator role and writes the audit event; a refusal is shown on the form
with the API's sentence.
"""

from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from frontend.decorators import page
from frontend.form_refusals import form_refused
from frontend.sent_once import sent_once
from market.accounts.selectors import organisation_find, organisation_list
from market.commerce.models import ListingAccess
from market.commerce.selectors import (
    credit_request_get,
    credit_requests_decided,
    credit_requests_pending,
    global_model_get,
)
from market.commerce.services import PredictionLimits, listing_create, require_operator
from market.commerce.wallets import (
    credit_request_approve,
    credit_request_create,
    credit_request_decline,
    credit_request_require_wallet,
    wallet_top_up,
)
from market.errors import DomainError, InvalidInput
from market.federations.models import MembershipPolicy, PrivacyLevel, RevenueSplit
from market.federations.previews import (
    previewed_public_data_discard,
    previewed_public_data_read,
    public_data_preview,
)
from market.federations.selectors import federation_get
from market.federations.services import (
    evaluation_split_upload,
    federation_create,
    public_dataset_upload,
)
from market.json_input import json_text_parse
from workers.features import TableError

DEFAULT_LICENCE = (
    "The buyer may use the model and its predictions for its own purposes; it may not resell the "
    "model files. Provided as is, without warranty."
)


def credits_to_cents(text: str, *, field: str, name: str = "amount") -> int:
    """ "12.50" credits → 1250 cents; a sentence naming the field otherwise (``field`` its label, ``name`` the
    form's name for it, beside which the sentence is shown)."""
    try:
        amount = Decimal(text.strip())
    except (InvalidOperation, AttributeError):
        raise InvalidInput(
            f"{field} must be an amount of credits such as 25 or 12.50, not {text!r}.", field=name
        ) from None
    if not amount.is_finite() or amount != amount.quantize(Decimal("0.01")):
        raise InvalidInput(
            f"{field} must be an amount of credits with at most two decimals, not {text!r}.",
            field=name,
        )
    return int(amount * 100)


# --- federations ---


def _federation_form_values(post) -> dict:
    return {
        "name": post.get("name", "").strip(),
        "description": post.get("description", ""),
        "class_labels": [
            label.strip()
            for label in post.get("class_labels", "").replace(",", "\n").splitlines()
            if label.strip()
        ],
        "label_column": post.get("label_column", "label"),
        "allowed_privacy_levels": post.getlist("allowed_privacy_levels"),
        "default_privacy_level": post.get("default_privacy_level", "L1"),
    }


def _policies(post) -> dict:
    policies = {
        name: name in post
        for name in (
            "publish_data_dependent_epsilon",
            "publish_contributions",
            "buyers_may_launch_jobs",
            "accepts_own_models",
        )
    }
    for name in ("default_epsilon_limit", "default_delta"):
        if post.get(name, "").strip():
            policies[name] = post[name].strip()
    if post.get("membership_policy"):
        policies["membership_policy"] = post["membership_policy"]
    if post.get("revenue_split", "").strip():
        policies["revenue_split"] = post["revenue_split"].strip()
    minimum = post.get("fd_min_contributors", "").strip()
    if minimum:
        policies["fd_min_contributors"] = (
            int(minimum) if minimum.isdigit() and len(minimum) <= 6 else minimum
        )
    return policies


@require_http_methods(["GET", "POST"])
@page
@sent_once
def federation_create_page(request):
    require_operator(request.user, "create federations")
    posted = request.method == "POST"
    context = {
        "section": "federations",
        "levels": PrivacyLevel.choices,
        "membership_policies": MembershipPolicy.choices,
        "chosen_membership_policy": request.POST.get("membership_policy")
        if posted
        else MembershipPolicy.REQUEST,
        "revenue_splits": RevenueSplit.choices,
        "form": request.POST,
        # L0 (no noise) only where members trust each other: not offered unless the operator ticks it.
        "chosen_levels": request.POST.getlist("allowed_privacy_levels") if posted else ["L1", "L2"],
        "chosen_default": request.POST.get("default_privacy_level") if posted else "L1",
    }
    if request.method == "GET":
        return render(request, "frontend/operator/federation_new.html", context)
    try:
        parameters = json_text_parse(request.POST.get("default_parameters") or "{}")
        if not isinstance(parameters, dict):
            raise InvalidInput(
                'Default job parameters must be a JSON object, e.g. {"query_fraction": 0.1}.'
            )
        federation = federation_create(
            **_federation_form_values(request.POST),
            default_parameters=parameters,
            policies=_policies(request.POST),
            created_by=request.user,
            request=request,
        )
    except (DomainError, ValueError) as error:
        return render(
            request,
            "frontend/operator/federation_new.html",
            context,
            status=form_refused(request, error),
        )
    messages.success(
        request, f"{federation.name} created. Upload its public data and evaluation split next."
    )
    return redirect("federation-data", slug=federation.slug)


def _uploaded(request) -> bytes:
    upload = request.FILES.get("file")
    if upload is None:
        raise InvalidInput("Choose a CSV, Parquet or NPZ file first.", field="file")
    return upload.read()


def _public_data(request, federation) -> bytes:
    """The file chosen, else the one this operator's preview kept (the browser cannot put it back in the form)."""
    key = request.POST.get("previewed_file", "")
    if "file" in request.FILES or not key:
        return _uploaded(request)
    return previewed_public_data_read(federation=federation, user=request.user, key=key)


def _data_action(request, federation, action: str):
    """Run one upload action; returns (message, preview: a PublicDataPreview or None)."""
    if action == "preview":
        upload = request.FILES.get("file")
        return "", public_data_preview(
            federation=federation,
            data=_uploaded(request),
            file_name=upload.name,
            user=request.user,
        )
    if action == "public":
        dataset = public_dataset_upload(
            federation=federation,
            data=_public_data(request, federation),
            uploaded_by=request.user,
            request=request,
        )
        previewed_public_data_discard(federation=federation, user=request.user)
        return (
            f"Public data uploaded: {dataset.n_rows} rows, {len(dataset.feature_spec['columns'])} columns, "
            f"{dataset.n_features} encoded features."
        ), None
    if action == "evaluation":
        split = evaluation_split_upload(
            federation=federation,
            data=_uploaded(request),
            uploaded_by=request.user,
            request=request,
        )
        return f"Evaluation split uploaded: {split.n_rows} labelled rows.", None
    raise InvalidInput(f"Unknown action {action!r}.")


@require_http_methods(["GET", "POST"])
@page
@sent_once
def federation_data_page(request, slug):
    federation = federation_get(slug=slug, user=request.user)
    require_operator(request.user, "upload public data and evaluation splits")
    context = {
        "section": "federations",
        "federation": federation,
        "preview": None,
        "public_dataset": federation.public_datasets.first(),
        "split": federation.evaluation_splits.first(),
    }
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "")
        try:
            message, context["preview"] = _data_action(request, federation, action)
        except (DomainError, TableError) as error:
            status = form_refused(request, error)
        else:
            if message:
                messages.success(request, message)
                return redirect("federation-data", slug=federation.slug)
    public_dataset = context["public_dataset"]
    context["spec"] = (
        context["preview"].spec
        if context["preview"]
        else (public_dataset.feature_spec if public_dataset else None)
    )
    return render(request, "frontend/operator/federation_data.html", context, status=status)


# --- listings ---


def _prediction_limits(form) -> PredictionLimits:
    """The listing form's limits on predictions: a whole number each, an empty field no limit."""
    values = {}
    for name in ("max_rows_per_call", "max_rows_per_day", "max_calls_per_minute"):
        text = (form.get(name) or "").strip()
        if text and not text.isdigit():
            raise InvalidInput(
                f"{name.replace('_', ' ').capitalize()} must be a whole number, not {text!r}."
            )
        values[name] = int(text) if text else None
    return PredictionLimits(**values)


@require_http_methods(["GET", "POST"])
@page
@sent_once
def listing_create_page(request, global_model_id):
    """ "List in market": a draft listing of a succeeded job's model, prefilled from the job."""
    require_operator(request.user, "create listings")
    global_model = global_model_get(global_model_id=global_model_id)
    job = global_model.job
    initial = {
        "name": f"{global_model.federation.name}: {job.get_kind_display()} ({global_model.model_family})",
        "description": f"Fused by job #{job.id} at privacy level {job.privacy_level} from "
        f"{job.submissions.count()} silo submission(s); measured on the federation's private "
        "evaluation split.",
        "licence_text": DEFAULT_LICENCE,
        "price": "25.00",
    }
    form = request.POST if request.method == "POST" else initial
    context = {
        "section": "market",
        "global_model": global_model,
        "job": job,
        "form": form,
    }
    if request.method == "GET":
        return render(request, "frontend/operator/listing_new.html", context)
    try:
        listing = listing_create(
            global_model=global_model,
            name=form.get("name", ""),
            description=form.get("description", ""),
            licence_text=form.get("licence_text", ""),
            price_cents=credits_to_cents(form.get("price", ""), field="The price", name="price"),
            actor=request.user,
            access=form.get("access", "") or ListingAccess.DOWNLOAD,
            limits=_prediction_limits(form),
            request=request,
        )
    except DomainError as error:
        return render(
            request,
            "frontend/operator/listing_new.html",
            context,
            status=form_refused(request, error),
        )
    messages.success(
        request, f"Draft listing #{listing.id} created; publish it when the card reads right."
    )
    return redirect("commerce-listing", listing_id=listing.id)


# --- wallets: operator top-ups and credit requests ---


def _wallets_context(request) -> dict:
    return {
        "section": "wallets",
        "form": request.POST,
        "organisations": organisation_list(),
        "pending": credit_requests_pending(),
        "decided": credit_requests_decided(limit=20),
    }


@require_http_methods(["GET", "POST"])
@page
@sent_once
def wallet_operations_page(request):
    """Operators: every organisation's balance, a top-up form (a payment received, by its reference) and the
    buyers' pending credit requests."""
    require_operator(request.user, "top up wallets")
    if request.method == "GET":
        return render(request, "frontend/operator/wallets.html", _wallets_context(request))
    try:
        organisation = organisation_find(organisation_id=request.POST.get("organisation") or None)
        if organisation is None:
            raise InvalidInput("Choose the organisation whose wallet to top up.")
        amount = credits_to_cents(request.POST.get("amount", ""), field="The amount")
        _, created = wallet_top_up(
            organisation=organisation,
            amount_cents=amount,
            actor=request.user,
            reference=request.POST.get("reference", ""),
            note=request.POST.get("note", ""),
            request=request,
        )
    except (DomainError, ValueError) as error:
        return render(
            request,
            "frontend/operator/wallets.html",
            _wallets_context(request),
            status=form_refused(request, error),
        )
    messages.success(
        request,
        f"{organisation.name}: {amount / 100:.2f} credits added."
        if created
        else "That payment reference was already credited; nothing changed.",
    )
    return redirect("wallet-operations")


@require_POST
@page
@sent_once
def credit_request_decide_action(request, credit_request_id, decision):
    credit_request = credit_request_get(credit_request_id=credit_request_id)
    if decision == "approve":
        credit_request = credit_request_approve(
            credit_request=credit_request,
            actor=request.user,
            payment_reference=request.POST.get("payment_reference", ""),
            request=request,
        )
    else:
        credit_request = credit_request_decline(
            credit_request=credit_request, actor=request.user, request=request
        )
    messages.success(
        request,
        f"Credit request #{credit_request.id} of {credit_request.organisation.name} "
        f"{credit_request.get_status_display().lower()}.",
    )
    return redirect("wallet-operations")


@require_POST
@page
@sent_once
def credit_request_create_action(request):
    """A buyer's "add credits": a pending request the operators approve once the payment arrived."""
    credit_request_require_wallet(request.user)  # before reading the form: the policy answers first
    amount = credits_to_cents(request.POST.get("amount", ""), field="The amount")
    credit_request = credit_request_create(
        user=request.user, amount_cents=amount, note=request.POST.get("note", ""), request=request
    )
    messages.success(
        request,
        f"Request #{credit_request.id} for {amount / 100:.2f} credits sent; the credits "
        "appear here once an operator confirms the payment.",
    )
    return redirect("commerce-wallet")
