"""Request bodies the market cannot read or store get a JSON 4xx with a sentence on every URL, anonymous or not,
and nothing is written."""

import io
import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from market.federations.models import Federation
from market.submissions.models import Submission
from tests.market.submissions.helpers import submit

FEDERATION = {
    "name": "Checked",
    "class_labels": ["a", "b"],
    "allowed_privacy_levels": ["L1"],
    "default_privacy_level": "L1",
}
DEEP = "[" * 990 + "]" * 990
TOO_DEEP = "The JSON nests deeper than 32 levels; send a flatter value."
NOT_FINITE = (
    "'default_parameters.gamma' holds a number that is not finite ({}); send a finite number (NaN, Infinity "
    "and numbers beyond ±1.8e308, such as 1e400, cannot be stored)."
)
HUGE = (
    "'default_parameters.gamma' holds an integer beyond the 64-bit range (±9223372036854775807); send a smaller "
    "number."
)


def federation_body(gamma: str) -> str:
    return json.dumps({**FEDERATION, "default_parameters": {"gamma": 0}}).replace(
        '"gamma": 0', f'"gamma": {gamma}'
    )


@pytest.mark.parametrize(
    "path", ["/api/federations/", "/api/auth/token/", "/federations/", "/no/such/page/"]
)
def test_a_deeply_nested_json_body_is_a_400_on_any_url_even_anonymously(db, path):
    response = Client(raise_request_exception=False).post(
        path, DEEP, content_type="application/json"
    )
    assert (response.status_code, response.json()) == (400, {"detail": TOO_DEEP})


@pytest.mark.parametrize(
    "gamma, shown",
    [
        ("1e400", "inf"),
        ("-1e400", "-inf"),
        ("NaN", "nan"),
        ("Infinity", "inf"),
        ("-Infinity", "-inf"),
    ],
)
def test_a_json_body_with_a_non_finite_number_is_a_400_and_creates_nothing(
    operator_api, gamma, shown
):
    response = operator_api.post(
        "/api/federations/", federation_body(gamma), content_type="application/json"
    )
    assert (response.status_code, response.json()) == (400, {"detail": NOT_FINITE.format(shown)})
    assert not Federation.objects.exists()


def test_a_json_body_with_an_integer_beyond_64_bits_is_a_400(operator_api):
    response = operator_api.post(
        "/api/federations/", federation_body(str(2**63)), content_type="application/json"
    )
    assert (response.status_code, response.json()) == (400, {"detail": HUGE})
    assert (
        operator_api.post(
            "/api/federations/", federation_body(str(2**63 - 1)), content_type="application/json"
        ).status_code
        == 201
    )


def test_a_json_body_nested_just_past_the_limit_is_refused_and_at_the_limit_accepted(operator_api):
    def nested(depth):
        return {**FEDERATION, "default_parameters": {"note": json.loads("[" * depth + "]" * depth)}}

    refused = operator_api.post(
        "/api/federations/", nested(32), format="json"
    )  # 34 levels with the body's own two
    assert (refused.status_code, refused.json()) == (400, {"detail": TOO_DEEP})
    assert operator_api.post("/api/federations/", nested(31), format="json").status_code == 201


def test_a_json_body_larger_than_the_memory_limit_is_a_json_413(operator_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = operator_api.post(
        "/api/federations/", {**FEDERATION, "description": "x" * 1000}, format="json"
    )
    assert (response.status_code, response.json()) == (
        413,
        {
            "detail": "The request's fields (files aside) are larger than 0.000953674 MB; send less data or put it in "
            "a file."
        },
    )
    assert not Federation.objects.exists()


def test_an_upload_with_more_files_than_allowed_is_a_json_400(
    silo_api, federation_with_data, settings
):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    response = submit(silo_api, {f"model{index}.json": b"{}" for index in range(3)})
    assert (response.status_code, response.json()) == (
        400,
        {"detail": "The request holds more than 2 files; send at most that many in one upload."},
    )
    assert not Submission.objects.exists()


def test_multipart_fields_larger_than_the_memory_limit_are_a_json_413(
    silo_api, federation_with_data, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = submit(
        silo_api, {"model.json": b"{}"}, privacy_parameters=json.dumps({"note": "x" * 2000})
    )
    assert response.status_code == 413
    assert response.json()["detail"].startswith(
        "The request's fields (files aside) are larger than"
    )


@pytest.mark.parametrize(
    "field, text, detail",
    [
        (
            "privacy_parameters",
            '{"note": "a\\u0000b"}',
            "'note' holds a NUL character (\\u0000), which no field accepts; remove it.",
        ),
        (
            "label_distribution",
            "[1000, 1e400]",
            "'[1]' holds a number that is not finite (inf); send a finite number "
            "(NaN, Infinity and numbers beyond ±1.8e308, such as 1e400, cannot be "
            "stored).",
        ),
        ("label_distribution", "[NaN, 1000]", "Value must be valid JSON."),  # DRF's strict JSON
        (
            "label_distribution",
            f"[1000, {10**30}]",
            "'[1]' holds an integer beyond the 64-bit range "
            "(±9223372036854775807); send a smaller number.",
        ),
        ("privacy_parameters", DEEP, TOO_DEEP),
    ],
)
def test_hostile_json_text_in_a_multipart_field_is_a_field_error(
    silo_api, federation_with_data, model_files, field, text, detail
):
    response = submit(silo_api, {"boosted.json": model_files["boosted.json"]}, **{field: text})
    assert (response.status_code, response.json()) == (400, {field: [detail]})
    assert not Submission.objects.exists()


def test_a_local_example_count_beyond_the_column_is_a_field_error(
    silo_api, federation_with_data, model_files
):
    response = submit(
        silo_api, {"boosted.json": model_files["boosted.json"]}, n_local_examples=2**31
    )
    assert (response.status_code, response.json()) == (
        400,
        {"n_local_examples": ["Ensure this value is less than or equal to 2147483647."]},
    )
    assert not Submission.objects.exists()


@pytest.mark.parametrize(
    "table, detail",
    [
        (
            b"age,income\ninf,<=50K\ninf,>50K\n",
            "Column 'age', row 1: inf is beyond the ±3.4e38 that the models' 32-bit "
            "features hold; rescale the column or leave the cell empty.",
        ),
        (
            b"age,income\n1e308,<=50K\n-1e308,>50K\n",
            "Column 'age', row 1: 1e+308 is beyond the ±3.4e38 that the models' "
            "32-bit features hold; rescale the column or leave the cell empty.",
        ),
    ],
)
def test_a_public_csv_with_numbers_jsonb_cannot_hold_is_a_400(
    operator_api, federation, table, detail
):
    file = io.BytesIO(table)
    file.name = "public.csv"
    response = operator_api.post(
        f"/api/federations/{federation.slug}/public-dataset/", {"file": file}, format="multipart"
    )
    assert (response.status_code, response.json()) == (400, {"detail": detail})
    assert not federation.public_datasets.exists()


def test_a_malformed_content_length_is_not_a_server_error(db):
    response = APIClient().post(
        "/api/auth/token/", "{}", content_type="application/json", CONTENT_LENGTH="many"
    )
    assert response.status_code < 500


def test_an_unknown_api_address_is_a_json_404_and_an_unknown_page_stays_a_page(client, settings):
    settings.DEBUG = False
    response = client.get("/api/no-such-thing/")
    assert (response.status_code, response.json()) == (
        404,
        {
            "detail": "The API has no address /api/no-such-thing/; see /api/docs/ for the ones it has."
        },
    )
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_a_server_error_under_the_api_is_json(operator_api, settings, monkeypatch):
    from market.federations import apis

    settings.DEBUG = False
    monkeypatch.setattr(apis, "federation_list", lambda **_: 1 / 0)
    operator_api.raise_request_exception = False
    response = operator_api.get("/api/federations/")
    assert (response.status_code, response.json()) == (
        500,
        {
            "detail": "The market failed to answer this request; try again later, and tell its operators if it keeps "
            "failing."
        },
    )
