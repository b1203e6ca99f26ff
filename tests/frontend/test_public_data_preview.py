"""Issue 43 item 3: a public-data preview forgot the chosen file (a browser cannot put a file back into a form), so
confirming meant choosing it again. The preview now keeps the file for its operator (market.federations.previews),
and "Upload public data" uploads the kept file; a key opens only its own operator's file."""

import hashlib

import pytest
from django.core.files.storage import default_storage

from market.accounts.services import user_create
from market.errors import InvalidInput
from market.federations.models import PublicDataset
from market.federations.previews import (
    PREVIEW_FOLDER,
    previewed_public_data_read,
    public_data_preview,
)
from tests.frontend.journey_helpers import page_problems, sign_in


@pytest.mark.browser
def test_a_previewed_file_is_uploaded_without_choosing_it_again(
    page,
    live_server,  # noqa: F811
    transactional_db,
    operator,
    federation,
    adult_public_csv,
):
    sign_in(page, live_server.url, operator.username, "operator-password")
    page.goto(f"{live_server.url}/federations/{federation.slug}/data/")
    page.locator("#public-form input[type=file]").set_input_files(
        {"name": "adult-public.csv", "mimeType": "text/csv", "buffer": adult_public_csv}
    )
    page.get_by_role("button", name="Preview the feature specification").click()

    page.get_by_text("Preview: the feature specification adult-public.csv would give").wait_for()
    assert "Previewed file kept: adult-public.csv" in page.locator("#previewed-file").inner_text()
    assert page.locator("#spec-table tbody tr").count() == 14
    assert not PublicDataset.objects.exists()
    problems = []
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        problems += page_problems(page, f"preview @{width}px")
    assert problems == []

    page.get_by_role("button", name="Upload public data").click()  # no file chosen again

    page.get_by_text("Public data uploaded: 2000 rows, 14 columns").wait_for()
    dataset = PublicDataset.objects.get()
    assert dataset.content_sha256 == hashlib.sha256(adult_public_csv).hexdigest()
    folder = f"{PREVIEW_FOLDER}/{federation.id}/{operator.id}"
    assert [
        name
        for key in default_storage.listdir(folder)[0]
        for name in default_storage.listdir(f"{folder}/{key}")[1]
    ] == []  # the kept file went with the upload


def test_a_preview_key_opens_only_its_own_operators_file_and_a_new_preview_replaces_the_last(
    db, operator, federation, adult_public_csv
):
    first = public_data_preview(
        federation=federation, data=adult_public_csv, file_name="../adult public.csv", user=operator
    )
    assert first.file_name == "adult_public.csv" and len(first.spec["columns"]) == 14
    assert (
        previewed_public_data_read(federation=federation, user=operator, key=first.key)
        == adult_public_csv
    )
    other_operator = user_create(username="otto", password="otto-password", is_operator=True)
    for user, key in ((other_operator, first.key), (operator, "../" + first.key), (operator, "")):
        with pytest.raises(InvalidInput, match="choose the file again") as refused:
            previewed_public_data_read(federation=federation, user=user, key=key)
        assert refused.value.field == "file"
    second = public_data_preview(
        federation=federation, data=adult_public_csv, file_name="again.csv", user=operator
    )
    with pytest.raises(InvalidInput):
        previewed_public_data_read(federation=federation, user=operator, key=first.key)
    assert (
        previewed_public_data_read(federation=federation, user=operator, key=second.key)
        == adult_public_csv
    )
