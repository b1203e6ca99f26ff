"""A federated augmentation in a real Chromium: an operator opens it with the hub's form (a refusal shown next to
its field, the form fitting a phone), then a silo finds it in the federation hub, sees the leakage of its seeds file
before uploading it, uploads it and sees its own counts and leakages only."""

import json

import pytest

from tests.frontend.journey_helpers import (
    DESKTOP,
    PHONE,
    page_width_overflow,
    screenshots,
    sign_in,
)


@pytest.mark.browser
def test_an_operator_opens_an_augmentation_and_a_silo_sees_its_seeds_leakage_before_upload(
    live_server, federation_with_data, operator, silo_user, other_silo_user, page, tmp_path
):
    from market.augmentations.models import Augmentation
    from market.augmentations.services import seeds_upload
    from market.federations.membership import federation_join

    script_errors = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    sign_in(page, live_server.url, "olivia-operator", "operator-password")
    page.goto(f"{live_server.url}/federations/adult-income/?tab=exchanges")
    page.get_by_role("link", name="Open an augmentation").click()
    page.wait_for_url(f"{live_server.url}/federations/adult-income/augmentations/new/")
    page.get_by_label("Name", exact=True).fill("FAug on Adult")
    page.get_by_label("Features per seed row", exact=True).fill("two")
    page.get_by_label("Epochs", exact=True).fill("1")
    page.get_by_label("Batch size", exact=True).fill("2")
    page.get_by_label("Noise multiplier σ", exact=True).fill("1.0")
    page.get_by_label("Target ε", exact=True).fill("")
    page.get_by_role("button", name="Open the augmentation").click()
    error = page.locator("#error-n_features")
    error.wait_for()
    assert error.inner_text() == "A valid integer is required."
    kept = page.get_by_label("Noise multiplier σ", exact=True).input_value()
    assert kept == "1.0"  # what was typed is kept
    page.set_viewport_size(PHONE)
    assert page_width_overflow(page) <= 0
    page.set_viewport_size(DESKTOP)
    page.get_by_label("Features per seed row", exact=True).fill("2")
    page.get_by_role("button", name="Open the augmentation").click()
    page.get_by_text("FAug on Adult opened: member silos can upload their seeds now.").wait_for()
    augmentation = Augmentation.objects.get()
    assert page.url == f"{live_server.url}/augmentations/{augmentation.id}/"
    assert (augmentation.n_features, augmentation.noise_multiplier) == (2, 1.0)
    page.context.clear_cookies()

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
    assert [row.locator("td").nth(index).inner_text() for index in range(7)] == [
        "Northwind Hospital",
        "8",
        "2",
        "6",
        "0.25",
        "0.20",  # inter-device: its 2 target seeds of the 10 pooled
        ">50K",
    ]
    assert "computed when training starts" in page.locator("#generator-epsilon").inner_text()
    screenshots(page, "augmentation")
    assert script_errors == []
