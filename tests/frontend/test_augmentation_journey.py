"""A silo takes part in a federated augmentation in a real Chromium: it finds the augmentation in the federation
hub, sees the leakage of its seeds file before uploading it, uploads it and sees its own counts only."""

import json

import pytest

from tests.frontend.journey_helpers import screenshots, sign_in


@pytest.mark.browser
def test_a_silo_sees_its_seeds_leakage_before_upload_and_its_own_counts_after(
    live_server, federation_with_data, operator, silo_user, other_silo_user, page, tmp_path
):
    from market.augmentations.services import augmentation_create, seeds_upload
    from market.federations.services import federation_join

    augmentation = augmentation_create(
        federation=federation_with_data,
        name="FAug on Adult",
        n_features=2,
        epochs=1,
        batch_size=2,
        noise_multiplier=1.0,
        actor=operator,
    )
    federation_join(federation=federation_with_data, user=other_silo_user)
    seeds_upload(
        augmentation=augmentation,
        user=other_silo_user,
        target_labels=[0],
        labels=[0, 1],
        features=[[0.1, 0.2], [0.3, 0.4]],
    )
    seeds = tmp_path / "seeds.json"
    seeds.write_text(
        json.dumps(
            {
                "target_labels": [1],
                "labels": [1, 1, 0, 0, 0, 0, 0, 0],
                "features": [[0.1 * index, 0.5] for index in range(8)],
            }
        )
    )

    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    sign_in(page, live_server.url, "sam-silo", "silo-password")
    page.goto(f"{live_server.url}/federations/adult-income/?tab=exchanges")
    page.get_by_role("link", name="FAug on Adult").click()
    page.wait_for_url(f"{live_server.url}/augmentations/{augmentation.id}/")
    assert "Contoso Bank" not in page.content()  # another silo's seeds are not shown to this one
    page.get_by_label("Seeds (JSON").set_input_files(seeds)
    leakage = page.locator("#seeds-leakage")
    leakage.filter(has_text="Leakage").wait_for()
    assert leakage.inner_text() == "Leakage 0.25: 2 target and 6 redundant seeds."
    page.get_by_role("button", name="Upload seeds").click()
    page.get_by_text("Your seeds were uploaded.").wait_for()
    row = page.locator("#augmentation-seeds tbody tr")
    assert row.count() == 1
    assert [row.locator("td").nth(index).inner_text() for index in range(6)] == [
        "Northwind Hospital",
        "8",
        "2",
        "6",
        "0.25",
        ">50K",
    ]
    assert "computed when training starts" in page.locator("#generator-epsilon").inner_text()
    screenshots(page, "augmentation")
    assert script_errors == []
