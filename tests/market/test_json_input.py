"""One set of rules for JSON text, whatever brings it: a body under any Content-Type DRF reads as JSON (wildcards
included), JSON text inside form-encoded and multipart fields, a JSON file a page reads. Each refusal is a 4xx
with a sentence and nothing is written (issue 32, item 9)."""

import ast
import io
import json
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.exceptions import ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.test import APIClient, APIRequestFactory

from market.augmentations.models import SeedUpload
from market.exchanges.models import LogitUpload
from market.federations.models import Federation
from market.jobs.apis import FederationJobListApi
from market.jobs.models import Job
from market.json_input import CheckedJSONParser
from tests.conftest import api_client_for

TOO_DEEP = "The JSON nests deeper than 32 levels; send a flatter value."
NOT_FINITE = (
    "'default_parameters.gamma' holds a number that is not finite (inf); send a finite number (NaN, Infinity "
    "and numbers beyond ±1.8e308, such as 1e400, cannot be stored)."
)
WILDCARDS = ["application/*", "*/*"]
DEPTHS = [50_000, 100_000]


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("content_type", ["application/json", *WILDCARDS])
def test_drf_reads_json_and_wildcard_bodies_with_the_checked_parser(content_type):
    request = APIRequestFactory().post("/api/", "{}", content_type=content_type)
    parsers = FederationJobListApi().get_parsers()
    chosen = DefaultContentNegotiation().select_parser(request, parsers)
    assert type(chosen) is CheckedJSONParser


@pytest.mark.parametrize(
    "text, sentence",
    [
        (deep(100_000), TOO_DEEP),
        ('{"gamma": 1e400}', "'gamma' holds a number that is not finite (inf)"),
        ('{"a": "b\\u0000"}', "'a' holds a NUL character"),
        ('{"a": ', "The text is not JSON (Expecting value at character 6)."),
    ],
)
def test_the_checked_parser_refuses_with_a_sentence(text, sentence):
    with pytest.raises(ParseError) as refusal:
        CheckedJSONParser().parse(io.BytesIO(text.encode()), "application/*", {})
    assert str(refusal.value.detail).startswith(sentence)


@pytest.mark.parametrize("content_type", WILDCARDS)
def test_a_body_nested_100000_deep_under_a_wildcard_type_is_a_400_at_the_anonymous_token_endpoint(
    db, content_type
):
    response = APIClient().post("/api/auth/token/", deep(100_000), content_type=content_type)
    assert (response.status_code, response.json()) == (400, {"detail": TOO_DEEP})


@pytest.mark.parametrize("content_type", WILDCARDS)
def test_a_body_nested_100000_deep_under_a_wildcard_type_is_a_400_when_launching_a_job(
    operator_api, federation_with_data, content_type
):
    response = operator_api.post(
        f"/api/federations/{federation_with_data.slug}/jobs/",
        deep(100_000),
        content_type=content_type,
    )
    assert (response.status_code, response.json()) == (400, {"detail": TOO_DEEP})
    assert not Job.objects.exists()


@pytest.mark.parametrize("content_type", WILDCARDS)
def test_a_non_finite_default_parameter_under_a_wildcard_type_is_a_400(operator_api, content_type):
    body = (
        '{"name": "Checked", "class_labels": ["a", "b"], "allowed_privacy_levels": ["L1"], '
        '"default_privacy_level": "L1", "default_parameters": {"gamma": 1e400}}'
    )
    response = operator_api.post("/api/federations/", body, content_type=content_type)
    assert (response.status_code, response.json()) == (400, {"detail": NOT_FINITE})
    assert not Federation.objects.exists()


def form_posts(client, url: str, fields: dict, depth: int) -> dict:
    """The answers to ``fields`` with the first field's JSON text replaced by text nested ``depth`` deep, sent
    form-encoded, as multipart, and as a whole JSON body under application/*."""
    name = next(iter(fields))
    texts = {**{key: json.dumps(value) for key, value in fields.items()}, name: deep(depth)}
    body = json.dumps({**fields, name: "DEEP"}).replace('"DEEP"', deep(depth))
    return {
        "form": client.post(
            url, urlencode(texts), content_type="application/x-www-form-urlencoded"
        ),
        "multipart": client.post(url, texts, format="multipart"),
        "application/*": client.post(url, body, content_type="application/*"),
    }


def open_augmentation(operator_api, federation) -> dict:
    response = operator_api.post(
        "/api/augmentations/",
        {
            "federation": federation.slug,
            "name": "Deep",
            "n_features": 2,
            "epochs": 2,
            "batch_size": 4,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.mark.parametrize("depth", DEPTHS)
def test_seeds_nested_deep_in_any_form_are_a_400_and_nothing_is_stored(
    operator_api, federation_with_data, silo_user, depth
):
    augmentation = open_augmentation(operator_api, federation_with_data)
    answers = form_posts(
        api_client_for(silo_user),
        f"/api/augmentations/{augmentation['id']}/seeds/",
        {"labels": [1, 0], "target_labels": [1], "features": [[0.1, 0.2], [0.3, 0.4]]},
        depth,
    )
    assert {kind: (answer.status_code, answer.json()) for kind, answer in answers.items()} == {
        "form": (400, {"labels": [TOO_DEEP]}),
        "multipart": (400, {"labels": [TOO_DEEP]}),
        "application/*": (400, {"detail": TOO_DEEP}),
    }
    assert not SeedUpload.objects.exists()


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_seeds_file_nested_deep_on_the_page_is_a_400_with_the_sentence(
    client, operator_api, federation_with_data, silo_user, depth
):
    augmentation = open_augmentation(operator_api, federation_with_data)
    client.force_login(silo_user)
    response = client.post(
        f"/augmentations/{augmentation['id']}/seeds/",
        {"seeds": SimpleUploadedFile("seeds.json", deep(depth).encode())},
    )
    assert response.status_code == 400
    assert f"The seeds file cannot be used: {TOO_DEEP}" in response.content.decode()
    assert not SeedUpload.objects.exists()


@pytest.mark.parametrize("depth", DEPTHS)
def test_logits_nested_deep_in_any_form_are_a_400_and_nothing_is_stored(
    operator_api, federation_with_data, silo_user, depth
):
    exchange = operator_api.post(
        "/api/exchanges/",
        {
            "federation": federation_with_data.slug,
            "name": "Deep",
            "rounds": 1,
            "round_seconds": 3600,
            "min_silos": 3,
        },
        format="json",
    ).json()
    answers = form_posts(
        api_client_for(silo_user),
        f"/api/exchanges/{exchange['id']}/rounds/1/logits/",
        {"logits": [[0.5, -0.5], [0.0, 0.0]], "labels": [0]},
        depth,
    )
    assert {kind: (answer.status_code, answer.json()) for kind, answer in answers.items()} == {
        "form": (400, {"logits": [TOO_DEEP]}),
        "multipart": (400, {"logits": [TOO_DEEP]}),
        "application/*": (400, {"detail": TOO_DEEP}),
    }
    assert not LogitUpload.objects.exists()


ROOT = Path(__file__).resolve().parents[2]


def json_reading_calls(path: Path) -> list[str]:
    """``file:line`` of each json.load/json.loads call, use of DRF's JSONParser and JSON field outside an output
    serializer in a module: only market/json_input.py may parse JSON text that a request brings."""
    tree = ast.parse(path.read_text())
    names = {"JSONParser"}
    found = [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr in names)
        or (isinstance(node, ast.Name) and node.id in names)
        or (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id, node.attr) in {("json", "load"), ("json", "loads")}
        )
        or (
            isinstance(node, ast.ImportFrom)
            and node.module == "json"
            and {alias.name for alias in node.names} & {"load", "loads"}
        )
    ]
    for klass in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        if not klass.name.endswith("Output"):
            found.extend(
                node.lineno
                for node in ast.walk(klass)
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "JSONField"
                    and isinstance(node.value, ast.Name)
                    and node.value.id in {"serializers", "forms"}
                )
                or (isinstance(node, ast.Name) and node.id == "JSONField")
            )
    return [f"{path.relative_to(ROOT)}:{line}" for line in sorted(found)]


def test_only_market_json_input_parses_json_from_requests():
    modules = [
        path
        for folder in ("market", "frontend")
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts and path != ROOT / "market" / "json_input.py"
    ]
    assert len(modules) > 50
    assert [found for path in modules for found in json_reading_calls(path)] == []
