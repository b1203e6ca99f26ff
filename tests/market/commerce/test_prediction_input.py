"""The prediction API reads a CSV body only as far as its limits allow, and answers a sentence past them."""

import json

import pytest

from market.audit.models import AuditEvent
from market.commerce.purchases import purchase_create
from tests.conftest import csv_bytes


@pytest.fixture
def predict_url(published_listing, buyer_user):
    listing = published_listing(price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    return f"/api/global-models/{listing.global_model_id}/predict/"


def test_a_csv_with_more_rows_than_a_prediction_takes_is_refused_while_it_streams(
    predict_url, buyer_api, adult_evaluation, settings
):
    settings.ONEFOLD_PREDICT_MAX_ROWS = 3
    raw = adult_evaluation[0]
    assert (
        buyer_api.post(predict_url, csv_bytes(raw.iloc[:3]), content_type="text/csv").status_code
        == 200
    )
    response = buyer_api.post(predict_url, csv_bytes(raw.iloc[:40]), content_type="text/csv")
    assert (response.status_code, response.json()) == (
        400,
        {"detail": "The CSV file has more than 3 rows; send at most 3 per request."},
    )
    assert AuditEvent.objects.filter(action="model.predicted").count() == 1


def test_a_csv_body_larger_than_an_upload_may_be_is_a_413(
    predict_url, buyer_api, adult_evaluation, settings
):
    settings.ONEFOLD_MAX_UPLOAD_BYTES = 1024**2 // 4
    body = csv_bytes(adult_evaluation[0].iloc[:1]) + b"\n" * (
        1024**2 // 4
    )  # blank lines: within the row limit
    response = buyer_api.post(predict_url, body, content_type="text/csv")
    assert (response.status_code, response.json()) == (
        413,
        {"detail": "The upload is larger than the 0.25 MB limit; send a smaller file."},
    )


def test_a_nul_inside_a_csv_cell_is_a_400_not_a_truncated_value(
    predict_url, buyer_api, adult_evaluation
):
    raw = adult_evaluation[0].iloc[:2].copy().astype(object)
    raw.iloc[1, 1] = "Private\x00"
    response = buyer_api.post(predict_url, csv_bytes(raw), content_type="text/csv")
    assert (response.status_code, response.json()) == (
        400,
        {
            "detail": "Line 3 of the CSV file holds a NUL character, which no value may contain; remove it."
        },
    )


def test_a_csv_row_with_fewer_fields_than_the_header_is_a_400_not_missing_values(
    predict_url, buyer_api, adult_evaluation
):
    lines = csv_bytes(adult_evaluation[0].iloc[:2]).decode().splitlines()
    n_columns = len(lines[0].split(","))
    lines[2] = lines[2].rsplit(",", 1)[0]  # the last field of row 2 left out
    response = buyer_api.post(predict_url, "\n".join(lines).encode(), content_type="text/csv")
    assert (response.status_code, response.json()) == (
        400,
        {
            "detail": f"Row 2 of the CSV file has {n_columns - 1} fields but the header names {n_columns}; "
            "every row needs as many fields as the header (leave a cell empty for a missing value)."
        },
    )
    assert not AuditEvent.objects.filter(action="model.predicted").exists()


@pytest.mark.parametrize("content_type", ["application/*", "*/*", "application/json"])
def test_rows_with_a_nul_inside_a_category_are_a_400_whatever_the_json_content_type(
    predict_url, buyer_api, adult_evaluation, content_type
):
    rows = adult_evaluation[0].iloc[:2].astype(object).to_dict(orient="records")
    rows[1]["workclass"] = "Private\x00"
    response = buyer_api.post(predict_url, json.dumps({"rows": rows}), content_type=content_type)
    assert (response.status_code, response.json()) == (
        400,
        {
            "detail": "'rows[1].workclass' holds a NUL character (\\u0000), which no field accepts; remove it."
        },
    )
    assert not AuditEvent.objects.filter(action="model.predicted").exists()
