"""The security tests' world: every kind of principal, each owning every kind of object."""

from dataclasses import dataclass

import pytest

from market.accounts.services import api_token_create, organisation_create, user_create

# Debian's Chromium for Playwright, as the page tests use it.
from tests.frontend.conftest import browser_type_launch_args, context  # noqa: E402,F401

# The commerce tests' builders of sellable global models (real files in the contract's formats), reused here.
from tests.market.commerce.conftest import (  # noqa: F401
    adult_evaluation,
    global_model_artifacts,
    make_global_model,
    published_listing,
    top_up,
)

SILOS, BUYERS = {"silo_a", "silo_b"}, {"buyer_a", "buyer_b"}
MEMBERS = SILOS | BUYERS  # people who belong to an organisation


@dataclass(frozen=True)
class World:
    people: dict  # principal name → user
    tokens: dict  # principal name → API token
    targets: dict  # kind of object → owner → path parameters


@pytest.fixture
def world(
    federation_with_data,
    operator,
    silo_user,
    other_silo_user,
    published_listing,
    model_files,
    top_up,
):
    """Two silos (both members, each with a submission and a budget), two buyers (buyer_a bought the model),
    an operator, a job over both silos' submissions, its global model listed (published) and a draft listing.

    ``targets`` names each kind of object by its owner, with the path parameters that reach it."""
    from market.augmentations.services import augmentation_create
    from market.budgets.selectors import budget_list
    from market.commerce.purchases import purchase_create
    from market.commerce.services import listing_create
    from market.commerce.wallets import credit_request_create
    from market.exchanges.services import exchange_create, logits_upload
    from market.federations.membership import federation_join
    from market.federations.models import JoinRequest
    from market.invitations.services import invitation_create
    from market.submissions.services import submission_create
    from market.submissions.uploads import SubmissionUpload, UploadedModel

    federation = federation_with_data
    federation_join(federation=federation, user=other_silo_user)
    people = {"silo_a": silo_user, "silo_b": other_silo_user, "operator": operator}
    for name, organisation in (("buyer_a", "Fabrikam Insurance"), ("buyer_b", "Tailspin Retail")):
        people[name] = user_create(
            username=name.replace("_", "-"),
            password=f"{name}-password",
            organisation=organisation_create(name=organisation, is_silo=False, is_buyer=True),
        )
    submissions = {
        name: submission_create(
            federation=federation,
            user=people[name],
            upload=SubmissionUpload(
                models=[UploadedModel(f"{name}.onnx", data)],
                model_family="random_forest",
                n_local_examples=1000,
                local_validation_score=0.8,
                label_distribution=None,
                privacy_level="L1",
                privacy_parameters={},
                declared_epsilon=None,
            ),
        )
        for name, data in (
            ("silo_a", model_files["forest.onnx"]),
            ("silo_b", model_files["boosted.json"]),
        )
    }
    listing = published_listing(price_cents=500)
    listing.global_model.job.submissions.set(submissions.values())
    draft = listing_create(
        global_model=listing.global_model,
        name="Adult income, next version",
        description="Not yet published.",
        licence_text="Lawful use.",
        price_cents=700,
        actor=operator,
    )
    top_up(people["buyer_a"].organisation, 1000)
    purchase_create(listing=listing, user=people["buyer_a"])
    budgets = {
        budget.organisation_id: budget
        for budget in budget_list(federation=federation, user=operator)
    }
    exchange = exchange_create(
        federation=federation, name="FD", rounds=2, round_seconds=3600, min_silos=3, actor=operator
    )
    logits_upload(
        exchange_round=exchange.exchange_rounds.get(number=1),
        user=silo_user,
        labels=[0],
        logits=[[1.0, -1.0], [0.0, 0.0]],
    )
    augmentation = augmentation_create(
        federation=federation, name="FAug", n_features=4, epochs=1, batch_size=2, actor=operator
    )
    estimate = _succeeded_estimate(federation, operator, list(submissions.values()))
    # A third silo waits to be admitted; an open invitation brings a fourth into the federation.
    waiting = user_create(
        username="wanda-waiting",
        password="waiting-password",
        organisation=organisation_create(name="Waiting Clinic"),
    )
    join_request = JoinRequest.objects.create(
        federation=federation, organisation=waiting.organisation, requested_by=waiting
    )
    invitation, invitation_token = invitation_create(
        user=operator,
        kind="organisation",
        organisation_name="Invited Lab",
        is_silo=True,
        federation=federation,
    )
    targets = {
        "none": {None: {}},
        "join_request": {None: {"join_request_id": join_request.id}},
        "member": {
            "silo_a": {"slug": federation.slug, "organisation_id": silo_user.organisation_id}
        },
        "invitation": {None: {"invitation_id": invitation.id}},
        "public_invitation_link": {
            "open": {"token": invitation_token},
            "forged": {"token": "not-a-token-the-market-made"},
        },
        "public": {None: {}},
        "federation": {None: {"slug": federation.slug}},
        "token": {
            name: {"token_id": api_token_create(user=people[name], name="target")[0].id}
            for name in people
        },
        "budget": {name: {"budget_id": budgets[people[name].organisation_id].id} for name in SILOS},
        "submission": {
            name: {"submission_id": submission.id} for name, submission in submissions.items()
        },
        "job": {None: {"job_id": listing.global_model.job_id}},
        "global_model": {None: {"global_model_id": listing.global_model_id}},
        "listing": {"published": {"listing_id": listing.id}, "draft": {"listing_id": draft.id}},
        "organisation": {
            name: {"organisation_id": people[name].organisation_id} for name in MEMBERS
        },
        "download_link": {None: {"token": "forged.signature"}},
        "credit_request": {
            "buyer_b": {
                "credit_request_id": credit_request_create(
                    user=people["buyer_b"], amount_cents=300
                ).id
            }
        },
        "exchange": {None: {"exchange_id": exchange.id, "number": 1}},
        "exchange_round": {"silo_a": {"exchange_id": exchange.id, "number": 1}},
        "augmentation": {None: {"augmentation_id": augmentation.id}},
        "estimate": {None: {"estimate_id": estimate.id}},
        **_webhook_targets(people),
    }
    tokens = {name: api_token_create(user=user, name="world")[1] for name, user in people.items()}
    return World(people=people, tokens=tokens, targets=targets)


def _webhook_targets(people: dict) -> dict:
    """An endpoint of each organisation, with one delivery (rows only: the world makes no outbound call)."""
    from django.utils import timezone

    from market.webhooks.models import WebhookDelivery, WebhookEndpoint

    endpoints = {
        name: WebhookEndpoint.objects.create(
            organisation=people[name].organisation,
            url=f"https://hooks.example.org/{name}",
            events=["job.succeeded"],
            secret=f"whsec_{name}",
        )
        for name in MEMBERS
    }
    deliveries = {
        name: WebhookDelivery.objects.create(
            endpoint=endpoint,
            event_type="webhook.ping",
            payload={"endpoint": endpoint.id},
            next_attempt_at=timezone.now(),
            status="succeeded",
        )
        for name, endpoint in endpoints.items()
    }
    return {
        "webhook": {name: {"endpoint_id": endpoint.id} for name, endpoint in endpoints.items()},
        "webhook_delivery": {
            name: {"delivery_id": delivery.id} for name, delivery in deliveries.items()
        },
    }


def _succeeded_estimate(federation, operator, submissions):
    """An operator's pre-flight estimate (market.jobs.preflight) that a worker finished, with its scores."""
    from market.jobs.models import JobEstimate

    scores = {"accuracy": 0.8, "balanced_accuracy": 0.7, "macro_f1": 0.7, "roc_auc": 0.8}
    return JobEstimate.objects.create(
        federation=federation,
        kind="fedkt",
        privacy_level="L1",
        parameters={"partitions": 2},
        seed=1,
        submission_ids=[submission.id for submission in submissions],
        n_draws=1,
        public_dataset=federation.public_datasets.first(),
        evaluation_split=federation.evaluation_splits.first(),
        requested_by=operator,
        request_sha256="0" * 64,
        status="succeeded",
        result={
            "private": {
                name: {"mean": value, "sd": 0.0, "min": value, "max": value}
                for name, value in scores.items()
                if name in ("accuracy", "balanced_accuracy")
            },
            "draws": [scores],
            "reference": scores,
            "baselines": {
                "majority_class": {
                    **scores,
                    "accuracy": 0.76,
                    "balanced_accuracy": 0.5,
                    "class": 0,
                },
                "best_single_silo": {**scores, "silo": "1"},
                "average_silo": scores,
                "n_silos": 2,
            },
            "n_members": len(submissions),
            "report_rows": 500,
        },
    )
