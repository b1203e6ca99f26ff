"""Schema fuzzing in the test suite: schemathesis generates requests for every operation of the OpenAPI schema
and sends them, with each role's token, to the real Django application (in process, on the test database).

Zero server errors, zero responses that break the schema and zero authorisation bypasses (``ignored_auth``
sends each request again without the token). Two phases, as `schemathesis run` has them:

- per operation: 20 examples per operation and role (``ONEFOLD_FUZZ_EXAMPLES`` asks for more; `make fuzz`
  sends 100 over HTTP), every other one with its path pointing at an object
  of the authorisation matrix's world (a job, a listing, a budget...), each request that may write (POST,
  PUT, PATCH, DELETE) in a savepoint that is rolled back (a read changes nothing the next example reads: at
  most it appends an audit event);
- stateful: scenarios chaining operations through the links schemathesis infers from the schema (a job
  created, then read and cancelled; a federation joined, then its budgets read), checking also that what
  was created can be read back and what was deleted stays gone;
- hostile values: every path parameter, query parameter and top-level body property of a few generated
  requests replaced, one at a time, by a value that the schema allows or that a client may send anyway and
  that once broke the market (issue 17): non-finite numbers, integers beyond 32 and 64 bits, NUL characters,
  JSON nested hundreds of levels deep, in JSON bodies and as text in multipart fields. Each JSON body is also
  sent under every other Content-Type DRF reads it by (``application/*`` and ``*/*``, which its negotiation
  matches to the JSON parser; refused with a 400 as under ``application/json``) and as form-encoded and
  multipart fields holding hostile JSON text, and an operation that reads CSV gets hostile CSV bodies (issue
  32). No server error, and every refusal is JSON.

`make fuzz` runs the same over HTTP against a live server (.ci/fuzz).
"""

import json
import os
import zlib
from urllib.parse import urlencode

import pytest
import schemathesis
from django.conf import settings
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    ensure_resource_availability,
    ignored_auth,
    response_schema_conformance,
    use_after_free,
)

from market.accounts.models import ApiToken

# 20 keeps the suite within its 15 minutes on 2 cores: this phase was the suite's largest single cost (40 took
# 19 min 23 s of a 77-minute run under load 8-10, 2026-11-28; 20 took under 4 min at load 4-5). The derandomised
# examples still cover every operation, role and kind of object (every other one on an existing object), the
# stateful and hostile-value phases below are unchanged, and `make fuzz` sends 100 per operation over HTTP.
EXAMPLES_PER_OPERATION_AND_ROLE = int(os.environ.get("ONEFOLD_FUZZ_EXAMPLES", "20"))
#: Operations that take nothing at all (no path, query, header or body): one request is every case there is.
ONE_CASE_OPERATIONS = {"GET /api/toolkit/"}
SCENARIOS_PER_ROLE = 50
STEPS_PER_SCENARIO = 10
# Fuzzing may revoke the very token it sends; revocation is covered by the token and matrix tests.
NOT_FUZZED_PATHS = "/revoke/$"
CHECKS = [not_a_server_error, ignored_auth, response_schema_conformance]
STATEFUL_CHECKS = CHECKS + [ensure_resource_availability, use_after_free]
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def hypothesis_run_settings(max_examples: int) -> hypothesis_settings:
    return hypothesis_settings(
        max_examples=max_examples,
        stateful_step_count=STEPS_PER_SCENARIO,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture
def role_tokens(world):
    """A silo, the other silo, a buyer who owns a model and the operator, in the security tests' world."""
    return {role: world.tokens[role] for role in ("silo_a", "silo_b", "buyer_a", "operator")}


@pytest.fixture
def fresh_start(world):
    """Call before each operation and role: clears the throttles' counters (they would answer 429 long before the
    examples run out) and records the world's tokens as just used, outside any savepoint, so that a request
    reads its token without writing its last use again (``api_token_mark_used`` writes at most once a minute;
    inside a rolled-back savepoint that write would be undone for every next request to repeat)."""

    def start() -> None:
        cache.clear()
        ApiToken.objects.filter(user__in=world.people.values()).update(last_used_at=timezone.now())

    return start


@pytest.fixture
def schema(role_tokens):
    """The app's schema, with Django's per-request connection closing off (it would end the test's transaction)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json",
        get_wsgi_application(),
        headers={"Authorization": f"Token {role_tokens['operator']}"},
    ).exclude(path_regex=NOT_FUZZED_PATHS)
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


FAILURES = (
    Exception,
    BaseExceptionGroup,
)  # schemathesis reports what it found as a BaseExceptionGroup


def failure_sentence(failure: BaseException) -> str:
    """What failed ("- ST101 Server error") and the curl command that reproduces it, or the error's text."""
    lines = [line.strip() for line in str(failure).splitlines()]
    found = [line for line in lines if line.startswith(("- ", "curl "))]
    return "; ".join(found) if found else " ".join(str(failure).split())[:400]


@pytest.fixture
def existing_path_values(world) -> dict[str, list]:
    """Path parameter name → the values that reach the world's objects (job_id → [the job's id]...)."""
    values = {}
    for owners in world.targets.values():
        for parameters in owners.values():
            for name, value in parameters.items():
                values.setdefault(name, []).append(value)
    return values


def pointed_at_existing_objects(path_parameters: dict, existing_path_values: dict) -> dict:
    """About half the time, each generated value replaced by an existing object's. The choice is a function of
    the generated value, so that Hypothesis replays (and shrinks) a failing case exactly."""
    pointed = {}
    for name, value in path_parameters.items():
        existing = existing_path_values.get(name, [])
        choice = zlib.crc32(repr(value).encode()) % (2 * len(existing) or 1)
        pointed[name] = existing[choice] if choice < len(existing) else value
    return pointed


def fuzz_operation(
    operation, headers: dict, existing_path_values: dict, statuses: list
) -> str | None:
    """Run the operation's generated cases; the first failure as a sentence, or None. ``statuses`` receives
    every response's status."""

    @given(case=operation.as_strategy())
    @hypothesis_run_settings(EXAMPLES_PER_OPERATION_AND_ROLE)
    def run(case):
        case.path_parameters = pointed_at_existing_objects(
            case.path_parameters or {}, existing_path_values
        )
        response = call_in_savepoint(case, headers=headers)
        statuses.append(response.status_code)
        case.validate_response(response, checks=CHECKS, headers=headers)

    try:
        run()
    except FAILURES as failure:
        return failure_sentence(failure)
    return None


def test_no_operation_answers_a_server_error_or_breaks_its_schema_for_any_role(
    role_tokens, schema, existing_path_values, fresh_start
):
    failures, statuses = [], {}
    for result in schema.get_all_operations():
        operation = result.ok()
        for role, key in role_tokens.items():
            fresh_start()
            answered = statuses[operation.label, role] = []
            failure = fuzz_operation(
                operation, {"Authorization": f"Token {key}"}, existing_path_values, answered
            )
            if failure:
                failures.append(f"{operation.label} as {role}: {failure}")
    assert not failures, "\n".join(failures)
    assert len({label for label, _ in statuses}) >= 40
    too_few = {
        pair: len(answered)
        for pair, answered in statuses.items()
        if len(answered) < EXAMPLES_PER_OPERATION_AND_ROLE
        and not (pair[0] in ONE_CASE_OPERATIONS and answered)
    }
    assert not too_few, f"Fewer examples than asked for: {too_few}"
    reached = {
        label
        for (label, _), answered in statuses.items()
        if "{" in label and any(200 <= status < 300 for status in answered)
    }
    assert len(reached) >= 15, (
        f"Too few operations on existing objects answered 2xx: {sorted(reached)}"
    )


def test_no_chain_of_operations_answers_a_server_error_or_breaks_its_schema_for_any_role(
    role_tokens, schema, fresh_start
):
    machine = schema.as_state_machine()
    links = sum(len(operation.outgoing) for operation in machine._transitions.operations.values())
    assert links >= 20, "schemathesis inferred (almost) no links between operations"
    failures, steps = [], {}
    for role, key in role_tokens.items():
        fresh_start()

        class RoleStateMachine(machine):
            """Each scenario starts from the same world (a savepoint rolled back at its end), so that
            Hypothesis can replay and shrink a failing one."""

            role_headers = {"Authorization": f"Token {key}"}
            role_operations_called = steps.setdefault(role, set())

            def setup(self):
                cache.clear()  # the throttles, as above
                self.scenario = transaction.atomic()
                self.scenario.__enter__()

            def teardown(self):
                transaction.set_rollback(True)
                self.scenario.__exit__(None, None, None)

            def get_call_kwargs(self, case):
                self.role_operations_called.add(case.operation.label)
                return {"headers": self.role_headers}

            def validate_response(self, response, case, additional_checks=None, **kwargs):
                case.validate_response(
                    response,
                    checks=STATEFUL_CHECKS,
                    headers=self.role_headers,
                    recorder=self.recorder,
                )

        try:
            RoleStateMachine.run(settings=hypothesis_run_settings(SCENARIOS_PER_ROLE))
        except FAILURES as failure:
            failures.append(f"a scenario as {role}: {failure_sentence(failure)}")
    assert not failures, "\n".join(failures)
    assert all(len(called) >= 15 for called in steps.values()), steps


HOSTILE_EXAMPLES_PER_OPERATION_AND_ROLE = 1
HOSTILE_ROLES = (
    "silo_a",
    "operator",
)  # a silo uploads submissions; the operator may call every other operation
# JSON text no JSON body may hold, whatever the operation (refused before any view: 400): non-finite numbers,
# integers beyond 64 bits, NUL characters, nesting deeper than any recursion limit Hypothesis sets.
REFUSED_JSON_TEXTS = [
    "1e400",
    "-1e400",
    str(2**70),
    '"a\\u0000b"',
    '{"key": ["a\\u0000b"]}',
    '{"key": 1e400}',
    "[" * 5000 + "]" * 5000,
]
# Text in a path, a query string or a multipart field (where JSON fields arrive as text); 5,000 digits pass
# Python's limit on converting text to int, "²" passes str.isdigit() but not int().
HOSTILE_TEXTS = [
    "1e400",
    "NaN",
    str(2**31),
    str(2**70),
    "9" * 5000,
    "²",
    "a\x00b",
    '{"key": "a\\u0000b"}',
    "[" * 5000 + "]" * 5000,
]
PLACEHOLDER = "hostile value"
# Content-Types under which DRF reads a JSON body although the schema names application/json: its content
# negotiation matches a wildcard to the first parser that fits, the JSON parser. The whole body nested 100,000
# deep as well (issue 32 found 500s there).
WILDCARD_CONTENT_TYPES = ["application/*", "*/*"]
REFUSED_WILDCARD_BODIES = [*REFUSED_JSON_TEXTS, "[" * 100_000 + "]" * 100_000]
# JSON text inside the fields of a form-encoded or multipart body sent to an operation that takes JSON: DRF
# reads such a body too, and a JSON field parses its text.
FORM_CONTENT_TYPES = ["application/x-www-form-urlencoded", MULTIPART_CONTENT]
HOSTILE_FIELD_TEXTS = [
    "[" * 50_000 + "]" * 50_000,
    '{"key": 1e400}',
    "[NaN]",
    f"[{2**70}]",
    '["a\\u0000b"]',
    "a\x00b",
]
# CSV bodies for the operations that also read text/csv (predictions): a row shorter than the header, a NUL
# inside a cell, a number no float holds, a quote left open, JSON text in a cell.
HOSTILE_CSV_TEXTS = [
    "age,workclass\n39,State-gov\n50\n",
    "age,workclass\n39,Priv\x00ate\n",
    "age,workclass\n1e400,State-gov\n",
    'age,workclass\n39,"State-gov\n',
    "age,workclass\n39," + "[" * 5000 + "]" * 5000 + "\n",
]


def hostile_variants(case):
    """(location, name, value): each path parameter, declared query parameter and declared top-level body
    property, generated or not, with each hostile value; and one body too large to read."""
    names = {
        "path_parameters": list(case.path_parameters or {}),
        "query": [parameter.name for parameter in case.operation.query],
    }
    for location, declared in names.items():
        yield from ((location, name, text) for name in declared for text in HOSTILE_TEXTS)
    if isinstance(case.body, dict):
        body = next(body for body in case.operation.body if body.media_type == case.media_type)
        values = HOSTILE_TEXTS if "multipart" in case.media_type else REFUSED_JSON_TEXTS
        properties = list(body.resolved_schema.get("properties", {}))
        for name in properties:
            yield from (("body", name, value) for value in values)
        if (
            properties
        ):  # one value larger than Django reads into memory: a JSON 413, not Django's HTML page
            yield "body", properties[0], "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
        if properties and is_json_body(case):
            for content_type in WILDCARD_CONTENT_TYPES:
                location = f"body as {content_type}"
                yield from ((location, properties[0], value) for value in REFUSED_WILDCARD_BODIES)
            for content_type in FORM_CONTENT_TYPES:
                location = f"body as {content_type}"
                for name in properties:
                    yield from ((location, name, text) for text in HOSTILE_FIELD_TEXTS)
    if "text/csv" in {body.media_type for body in case.operation.body}:
        yield from (("body as text/csv", "", text) for text in HOSTILE_CSV_TEXTS)


def is_json_body(case) -> bool:
    return "json" in (case.media_type or "") and isinstance(case.body, dict)


def json_text_with(case, name: str, value: str) -> str:
    """The case's JSON body with one property's value replaced by raw JSON text (json.dumps cannot write 1e400,
    and schemathesis refuses NaN and Infinity)."""
    return json.dumps({**case.body, name: PLACEHOLDER}).replace(json.dumps(PLACEHOLDER), value)


def form_body_with(case, content_type: str, name: str, text: str) -> tuple[str | bytes, str]:
    """The case's JSON body as form fields (text as is, any other value as JSON text) with one field's text
    replaced, encoded as ``content_type``; and the Content-Type header to send."""
    fields = {
        key: value if isinstance(value, str) else json.dumps(value)
        for key, value in case.body.items()
    }
    fields[name] = text
    if content_type == MULTIPART_CONTENT:
        return encode_multipart(BOUNDARY, fields), MULTIPART_CONTENT
    return urlencode(fields), content_type


def call_with(case, headers: dict, location: str, name: str, value):
    """The answer to the case with one value replaced, in a savepoint that is rolled back. Into a JSON body the
    value goes as raw JSON text, under the schema's Content-Type or another that DRF reads as JSON; into form
    fields as their text."""
    if location == "body" and is_json_body(case):
        return call_in_savepoint(case, headers=headers, data=json_text_with(case, name, value))
    if location.startswith("body as "):
        content_type = location.removeprefix("body as ")
        if content_type in WILDCARD_CONTENT_TYPES:
            data = json_text_with(case, name, value)
        elif content_type == "text/csv":
            data = value
        else:
            data, content_type = form_body_with(case, content_type, name, value)
        return call_in_savepoint(case, headers={**headers, "Content-Type": content_type}, data=data)
    original = getattr(case, location)
    setattr(case, location, {**(original or {}), name: value})
    try:
        return call_in_savepoint(case, headers=headers)
    finally:
        setattr(case, location, original)


def call_in_savepoint(case, **call_arguments):
    """The case's answer; a request that may write runs in a savepoint that is rolled back, so that every example
    starts from the same world (a read goes without: the savepoint's two statements would cost more than it)."""
    if case.method.upper() in READ_METHODS:
        return case.call(**call_arguments)
    with transaction.atomic():
        response = case.call(**call_arguments)
        transaction.set_rollback(True)
    return response


def hostile_failure(case, headers: dict, location: str, name: str, value) -> str | None:
    """Send the case with one value replaced; what is wrong with the answer, or None."""
    sent = f"{location} {name} = {repr(value)[:40]}"
    try:
        response = call_with(case, headers, location, name, value)
    except Exception as error:  # noqa: BLE001 - schemathesis re-raises what the application raised
        return f"{sent}: raised {type(error).__name__}: {str(error)[:200]}"
    content_type = " ".join(response.headers.get("content-type", []))
    if response.status_code >= 500:
        return f"{sent}: {response.status_code}"
    if response.status_code in (400, 413) and "json" not in content_type:
        return f"{sent}: {response.status_code} answered as {content_type or 'no content type'}"
    refused_json_body = (
        location == "body" and is_json_body(case) and value in REFUSED_JSON_TEXTS
    ) or (location in {f"body as {content_type}" for content_type in WILDCARD_CONTENT_TYPES})
    if refused_json_body and response.status_code != 400:
        return f"{sent}: {response.status_code}, not refused"
    return None


def hostile_run(
    operation, role: str, headers: dict, existing_path_values: dict, failures: set, sent: list
):
    """A Hypothesis test that sends the operation's generated cases with each hostile variant, as ``role``."""

    @given(case=operation.as_strategy())
    @hypothesis_run_settings(HOSTILE_EXAMPLES_PER_OPERATION_AND_ROLE)
    def run(case):
        case.path_parameters = pointed_at_existing_objects(
            case.path_parameters or {}, existing_path_values
        )
        for variant in hostile_variants(case):
            cache.clear()  # the throttles, as above
            sent.append(variant)
            failure = hostile_failure(case, headers, *variant)
            if failure:
                failures.add(f"{operation.label} as {role}: {failure}")

    return run


def test_no_operation_answers_a_server_error_or_a_page_to_hostile_values(
    role_tokens, schema, existing_path_values, fresh_start
):
    failures, sent = set(), []
    for result in schema.get_all_operations():
        operation = result.ok()
        for role in HOSTILE_ROLES:
            fresh_start()
            hostile_run(
                operation,
                role,
                {"Authorization": f"Token {role_tokens[role]}"},
                existing_path_values,
                failures,
                sent,
            )()
    assert not failures, "\n".join(sorted(failures))
    assert {location for location, _, _ in sent} == {
        "path_parameters",
        "query",
        "body",
        *(
            f"body as {content_type}"
            for content_type in [*WILDCARD_CONTENT_TYPES, *FORM_CONTENT_TYPES, "text/csv"]
        ),
    }
