"""Schema fuzzing of the market's operations while there is something to find: published and draft listings, a
purchase, wallets with entries. No role gets a server error or a response that breaks the schema."""

from django.db import transaction
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings

from market.accounts.services import api_token_create
from market.commerce.services import listing_create, purchase_create
from tests.security.test_schema_fuzzing import in_process_requests  # noqa: F401 (fixture)

EXAMPLES = 4


def fuzz_with_ids(operation, headers: dict, checks: list, ids: dict, found: list) -> str | None:
    """Like the security suite's fuzzing, but path ids point at rows that exist (every other example);
    ``found`` collects the statuses of those requests."""
    examples = []

    @given(case=operation.as_strategy())
    @hypothesis_settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                         suppress_health_check=list(HealthCheck))
    def run(case):
        examples.append(case)
        existing = bool(case.path_parameters) and len(examples) % 2 == 1
        if existing:
            case.path_parameters = {name: ids.get(name, value) for name, value in case.path_parameters.items()}
        with transaction.atomic():
            response = case.call(headers=headers)
            transaction.set_rollback(True)
        if existing:
            found.append(response.status_code)
        case.validate_response(response, checks=checks)

    try:
        run()
    except Exception as failure:
        return str(failure).strip().splitlines()[0][:300]
    return None

COMMERCE_PREFIXES = ("/api/listings", "/api/purchases", "/api/wallet", "/api/organisations/{organisation_id}/wallet",
                     "/api/earnings", "/api/global-models/{global_model_id}/download-links",
                     "/api/global-models/{global_model_id}/predict", "/api/downloads")


def test_market_operations_never_answer_a_server_error_with_data_present(
        published_listing, make_global_model, operator, buyer_user, silo_user, top_up, in_process_requests):
    import schemathesis
    from django.core.cache import cache
    from django.core.wsgi import get_wsgi_application
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import response_schema_conformance

    listing = published_listing(price_cents=500)
    draft = listing_create(global_model=make_global_model(), name="Draft", description="", licence_text="x",
                           price_cents=1, actor=operator)
    top_up(buyer_user.organisation, 5000)
    purchase_create(listing=listing, user=buyer_user)
    tokens = {role: api_token_create(user=user, name="fuzzing")[1]
              for role, user in {"buyer": buyer_user, "silo": silo_user, "operator": operator}.items()}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application(),
                                            headers={"Authorization": f"Token {tokens['operator']}"})
    ids = {"listing_id": listing.id, "global_model_id": listing.global_model_id,
           "organisation_id": buyer_user.organisation_id}
    failures, fuzzed, found = [], 0, []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith(COMMERCE_PREFIXES):
            continue
        for role, key in tokens.items():
            for listing_id in (listing.id, draft.id):
                cache.clear()
                failure = fuzz_with_ids(operation, {"Authorization": f"Token {key}"},
                                        [not_a_server_error, response_schema_conformance],
                                        {**ids, "listing_id": listing_id}, found)
                fuzzed += 1
                if failure:
                    failures.append(f"{operation.label} as {role}: {failure}")
    assert fuzzed >= 3 * 2 * 14
    assert sum(status < 300 for status in found) >= 10  # the existing rows were reached, not only 404s
    assert not failures, "\n".join(failures)
