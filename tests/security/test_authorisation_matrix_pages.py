"""Every page URL of the web interface, called as every principal on objects owned by every other principal.

The page counterpart of test_authorisation_matrix.py, on the same world and with the same rules: a page must
decide who may see it exactly as the API operation it stands for does (one policy). ``ALLOW`` is a page, a
redirect elsewhere than to sign-in after an action, or a 400/409 about the form's content (sent empty);
``SIGN_IN`` is a redirect to the sign-in page. A URL of ``frontend.urls`` without a row fails the test, as does
a row for a URL that no longer exists. Each call runs inside a savepoint that is rolled back.
"""

import re

from django.core.cache import cache
from django.db import transaction
from django.test import Client

from tests.fixtures.security import MEMBERS, SILOS
from tests.security.principals import (
    ALLOW,
    FORBIDDEN,
    HIDDEN,
    PRINCIPALS,
    SIGN_IN,
    Rule,
    anyone,
    entitled_to_the_model,
    exchange_members,
    invitation_link_holder,
    job_canceller,
    job_participants,
    joiner,
    listing_manager,
    listing_reader,
    members_of_the_federation,
    operator_only,
    operators_act_members_are_refused,
    operators_else_hidden,
    own_earnings,
    own_organisation_only,
    own_token,
    own_wallet,
    owner_or_operator_else_hidden,
    purchaser,
    signed_in,
)


def job_launcher(principal, owner):
    """The world's federation lets no buyer launch jobs: operators only, as POST /api/federations/{slug}/jobs/."""
    return ALLOW if principal == "operator" else FORBIDDEN


def budget_limit_changer(principal, owner):
    """As PATCH /api/budgets/{budget_id}/: another silo's budget does not exist for a silo; its own is refused."""
    if principal == "operator":
        return ALLOW
    return HIDDEN if principal != owner else FORBIDDEN


def signed_out(principal, owner):
    return SIGN_IN  # signing out ends on the sign-in page, whoever asked


def organisation_members(principal, owner):
    """Registering a webhook: people of an organisation; an operator, of none, is told no."""
    return ALLOW if principal in MEMBERS else FORBIDDEN


def members_only(principal, owner):
    return ALLOW if principal in SILOS | {"operator"} else FORBIDDEN


# (method, route of frontend.urls) → rule; ``targets`` names the world's objects (see tests/fixtures/security.py).
PAGE_POLICY = {
    ("GET", ""): Rule("none", signed_in),
    ("GET", "sign-in/"): Rule("public", anyone),
    ("POST", "sign-in/"): Rule("public", anyone),
    ("POST", "sign-out/"): Rule("public", signed_out),
    ("GET", "federations/"): Rule("none", signed_in),
    ("GET", "federations/<slug:slug>/"): Rule("federation", signed_in),
    ("POST", "federations/<slug:slug>/join/"): Rule("federation", joiner),
    ("GET", "federations/<slug:slug>/edit/"): Rule("federation", operator_only),
    ("POST", "federations/<slug:slug>/edit/"): Rule("federation", operator_only),
    ("POST", "federations/<slug:slug>/members/<int:organisation_id>/remove/"): Rule(
        "member", operator_only
    ),
    ("POST", "join-requests/<int:join_request_id>/admit/"): Rule("join_request", operator_only),
    ("POST", "join-requests/<int:join_request_id>/refuse/"): Rule("join_request", operator_only),
    ("GET", "people/"): Rule("none", operator_only),
    ("POST", "people/"): Rule("none", operator_only),
    ("POST", "people/invitations/<int:invitation_id>/withdraw/"): Rule("invitation", operator_only),
    ("GET", "invitations/<str:token>/"): Rule("public_invitation_link", invitation_link_holder),
    ("POST", "invitations/<str:token>/"): Rule("public_invitation_link", invitation_link_holder),
    ("GET", "federations/<slug:slug>/upload/"): Rule("federation", members_of_the_federation),
    ("GET", "submissions/"): Rule("none", signed_in),
    ("GET", "exchanges/"): Rule("none", signed_in),
    ("GET", "exchanges/<int:exchange_id>/"): Rule("exchange", exchange_members),
    ("GET", "federations/<slug:slug>/augmentations/new/"): Rule("federation", operator_only),
    ("POST", "federations/<slug:slug>/augmentations/new/"): Rule("federation", operator_only),
    ("GET", "augmentations/<int:augmentation_id>/"): Rule("augmentation", exchange_members),
    ("POST", "augmentations/<int:augmentation_id>/seeds/"): Rule("augmentation", exchange_members),
    ("POST", "augmentations/<int:augmentation_id>/start/"): Rule(
        "augmentation", operators_act_members_are_refused
    ),
    ("POST", "augmentations/<int:augmentation_id>/cancel/"): Rule(
        "augmentation", operators_act_members_are_refused
    ),
    ("GET", "submissions/<int:submission_id>/status/"): Rule(
        "submission", owner_or_operator_else_hidden
    ),
    ("GET", "security/audit/"): Rule("none", operator_only),
    ("GET", "security/audit/export.jsonl"): Rule("none", operator_only),
    ("GET", "security/tokens/"): Rule("none", signed_in),
    ("POST", "security/tokens/new/"): Rule("none", signed_in),
    ("POST", "security/tokens/<int:token_id>/revoke/"): Rule("token", own_token),
    ("GET", "security/webhooks/"): Rule("none", signed_in),
    ("POST", "security/webhooks/new/"): Rule("none", organisation_members),
    ("GET", "security/webhooks/<int:endpoint_id>/"): Rule("webhook", own_organisation_only),
    ("POST", "security/webhooks/<int:endpoint_id>/rotate/"): Rule("webhook", own_organisation_only),
    ("POST", "security/webhooks/<int:endpoint_id>/active/"): Rule("webhook", own_organisation_only),
    ("POST", "security/webhooks/<int:endpoint_id>/ping/"): Rule("webhook", own_organisation_only),
    ("POST", "security/webhooks/deliveries/<int:delivery_id>/redeliver/"): Rule(
        "webhook_delivery", own_organisation_only
    ),
    ("GET", "market/"): Rule("none", signed_in),
    ("GET", "market/listings/<int:listing_id>/"): Rule("listing", listing_reader),
    ("GET", "market/listings/<int:listing_id>/buy/"): Rule("listing", listing_reader),
    ("POST", "market/listings/<int:listing_id>/purchase/"): Rule("listing", purchaser),
    ("POST", "market/listings/<int:listing_id>/publish/"): Rule("listing", listing_manager),
    ("POST", "market/listings/<int:listing_id>/retire/"): Rule("listing", listing_manager),
    ("GET", "market/purchases/"): Rule("none", signed_in),
    ("GET", "market/usage/"): Rule("none", signed_in),
    ("POST", "market/listings/<int:listing_id>/plans/"): Rule("listing", listing_manager),
    ("POST", "market/models/<int:global_model_id>/download/"): Rule(
        "global_model", entitled_to_the_model
    ),
    ("GET", "market/wallet/"): Rule("none", own_wallet),
    ("GET", "market/earnings/"): Rule("none", own_earnings),
    ("GET", "budgets/"): Rule("none", signed_in),
    ("GET", "federations/<slug:slug>/budgets/"): Rule("federation", members_of_the_federation),
    ("GET", "federations/<slug:slug>/budgets/ledger/"): Rule(
        "federation", members_of_the_federation
    ),
    ("POST", "federations/<slug:slug>/budgets/price/"): Rule("federation", members_only),
    ("POST", "federations/<slug:slug>/budgets/<int:budget_id>/limit/"): Rule(
        "federation_budget", budget_limit_changer
    ),
    ("GET", "jobs/"): Rule("none", signed_in),
    ("GET", "jobs/<int:job_id>/"): Rule("job", job_participants),
    ("GET", "jobs/<int:job_id>/progress/"): Rule("job", job_participants),
    ("POST", "jobs/<int:job_id>/cancel/"): Rule("job", job_canceller),
    ("GET", "jobs/<int:job_id>/comparison.png"): Rule("job", job_participants),
    ("GET", "federations/<slug:slug>/jobs/new/"): Rule("federation", job_launcher),
    ("POST", "federations/<slug:slug>/jobs/new/"): Rule("federation", job_launcher),
    ("GET", "federations/<slug:slug>/jobs/price/"): Rule("federation", job_launcher),
    ("POST", "federations/<slug:slug>/jobs/estimate/"): Rule("federation", operator_only),
    ("GET", "job-estimates/<int:estimate_id>/"): Rule("estimate", operators_else_hidden),
    # The operator's workflow (frontend/operator_views.py) and a bought model's page (frontend/model_use_views.py).
    ("GET", "federations/new/"): Rule("none", operator_only),
    ("POST", "federations/new/"): Rule("none", operator_only),
    ("GET", "federations/<slug:slug>/data/"): Rule("federation", operator_only),
    ("POST", "federations/<slug:slug>/data/"): Rule("federation", operator_only),
    ("GET", "market/models/<int:global_model_id>/list/"): Rule("global_model", operator_only),
    ("POST", "market/models/<int:global_model_id>/list/"): Rule("global_model", operator_only),
    ("GET", "market/wallets/"): Rule("none", operator_only),
    ("POST", "market/wallets/"): Rule("none", operator_only),
    ("GET", "market/money/"): Rule("none", operator_only),
    ("GET", "market/money/organisations/<int:organisation_id>/"): Rule(
        "organisation", operator_only
    ),
    ("POST", "market/money/organisations/<int:organisation_id>/"): Rule(
        "organisation", operator_only
    ),
    ("GET", "notices/"): Rule("none", signed_in),
    ("POST", "market/credit-requests/<int:credit_request_id>/approve/"): Rule(
        "credit_request", operator_only
    ),
    ("POST", "market/credit-requests/<int:credit_request_id>/decline/"): Rule(
        "credit_request", operator_only
    ),
    ("POST", "market/wallet/add-credits/"): Rule(
        "none", own_earnings
    ),  # an organisation's member; operators none
    ("GET", "market/models/<int:global_model_id>/use/"): Rule(
        "global_model", entitled_to_the_model
    ),
    ("POST", "market/models/<int:global_model_id>/package/"): Rule(
        "global_model", entitled_to_the_model
    ),
    ("GET", "market/models/<int:global_model_id>/feature-spec.json"): Rule(
        "global_model", entitled_to_the_model
    ),
    ("POST", "market/models/<int:global_model_id>/try/"): Rule(
        "global_model", entitled_to_the_model
    ),
}

# Forms filled in enough that the authorisation decision, not validation, answers (others are sent empty).
PAGE_BODIES = {
    ("POST", "market/models/<int:global_model_id>/download/"): {"format": "onnx"},
    ("POST", "market/models/<int:global_model_id>/package/"): {"format": "raw_onnx"},
    ("POST", "federations/<slug:slug>/budgets/<int:budget_id>/limit/"): {
        "epsilon_limit": "9",
        "reason": "matrix",
    },
}
# Pages that answer anonymous visitors themselves rather than sending them to sign in.
PUBLIC_PAGES = {"sign-in/", "sign-out/", "invitations/<str:token>/"}


def allowed_methods(view) -> set[str]:
    """The methods a view of frontend.urls accepts, read from its class or its require_http_methods closure."""
    view_class = getattr(view, "view_class", None)
    if view_class is not None:  # Django's sign-in and sign-out views
        return {
            method.upper() for method in view_class.http_method_names if hasattr(view_class, method)
        } & {"GET", "POST"}
    for cell in view.__closure__ or ():
        if isinstance(cell.cell_contents, list) and all(
            isinstance(method, str) for method in cell.cell_contents
        ):
            return set(cell.cell_contents) & {"GET", "POST"}
    return {"GET", "POST"}


def page_routes() -> set[tuple[str, str]]:
    from frontend.urls import urlpatterns

    return {
        (method, str(pattern.pattern))
        for pattern in urlpatterns
        for method in allowed_methods(pattern.callback)
    }


def test_every_page_url_has_a_policy_row_and_every_row_a_page_url():
    routes = page_routes()
    assert sorted(routes - set(PAGE_POLICY)) == [], (
        "page URLs without a policy row: declare who may open them"
    )
    assert sorted(set(PAGE_POLICY) - routes) == [], "policy rows for page URLs that no longer exist"


def outcome_of(response) -> str | int:
    status = response.status_code
    if status == 302 and response["Location"].startswith("/sign-in/"):
        return SIGN_IN
    if status in (401, 403, 404):
        return status
    if 200 <= status < 400 or status in (400, 409, 415):
        return ALLOW
    return status  # a 5xx, a 405... is never expected


def expected_for(rule: Rule, route: str, principal: str, owner):
    if principal == "anonymous" and route not in PUBLIC_PAGES:
        return SIGN_IN
    return rule.decide(principal, owner)


def browser_for(world, principal: str) -> Client:
    browser = Client(raise_request_exception=False)  # a server error is a 500 to compare
    if principal != "anonymous":
        browser.force_login(world.people[principal])
    return browser


def url_of(route: str, parameters: dict) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda match: str(parameters[match.group(1)]), route)


def test_every_principal_gets_exactly_what_the_page_policy_allows_on_every_object(world):
    slug = world.targets["federation"][None]["slug"]
    targets = {
        **world.targets,
        "federation_budget": {
            owner: {**parameters, "slug": slug}
            for owner, parameters in world.targets["budget"].items()
        },
    }
    mismatches = []
    for (method, route), rule in sorted(PAGE_POLICY.items()):
        for owner, parameters in targets[rule.targets].items():
            url = url_of(route, parameters)
            for principal in PRINCIPALS:
                cache.clear()  # throttles count every call; this test is about who, not how often
                browser = browser_for(world, principal)  # afresh: signing out must not carry over
                with transaction.atomic():
                    body = PAGE_BODIES.get((method, route), {})
                    response = browser.get(url) if method == "GET" else browser.post(url, body)
                    transaction.set_rollback(True)
                expected = expected_for(rule, route, principal, owner)
                if outcome_of(response) != expected:
                    mismatches.append(
                        f"{method} {url} as {principal} (target owned by {owner}): expected {expected}, "
                        f"got {response.status_code} {response.get('Location', '')}"
                    )
    assert not mismatches, "\n".join(mismatches)


LAUNCHER_ROUTES = [
    ("GET", "federations/<slug:slug>/jobs/new/"),
    ("POST", "federations/<slug:slug>/jobs/new/"),
    ("GET", "federations/<slug:slug>/jobs/price/"),
]


def test_where_buyers_may_launch_jobs_the_launcher_opens_to_buyers_and_stays_closed_to_silos(world):
    from market.federations.models import Federation

    slug = world.targets["federation"][None]["slug"]
    Federation.objects.filter(slug=slug).update(buyers_may_launch_jobs=True)
    expected = {
        "operator": ALLOW,
        "buyer_a": ALLOW,
        "buyer_b": ALLOW,
        "silo_a": FORBIDDEN,
        "silo_b": FORBIDDEN,
        "anonymous": SIGN_IN,
    }
    outcomes = {}
    for method, route in LAUNCHER_ROUTES:
        for principal in PRINCIPALS:
            browser = browser_for(world, principal)
            with transaction.atomic():
                url = url_of(route, {"slug": slug})
                response = browser.get(url) if method == "GET" else browser.post(url, {})
                transaction.set_rollback(True)
            outcomes[(method, route, principal)] = outcome_of(response)
    assert outcomes == {
        (method, route, principal): expected[principal]
        for method, route in LAUNCHER_ROUTES
        for principal in PRINCIPALS
    }
