"""The augmentation pages: an operator opens one with the form (the API's checks, each refusal next to its field);
a silo uploads seeds and sees only its own counts and leakages, an operator sees every silo's counts and starts the
training (its ε shown as reserved); the federation hub's exchanges tab lists it."""

from django.core.files.uploadedfile import SimpleUploadedFile

from market.augmentations.models import Augmentation, SeedUpload
from tests.conftest import api_client_for
from tests.frontend.augmentation_helpers import FORM, open_augmentation, seeds_file

NEW = "/federations/adult-income/augmentations/new/"
API_AUGMENTATION = {
    "federation": "adult-income",
    "name": "FAug",
    "n_features": 2,
    "epochs": 1,
    "batch_size": 2,
}


def field_error(page: str, name: str) -> str:
    """The sentence shown next to field ``name`` ('' when none)."""
    marker = f'<p class="field-error" id="error-{name}">'
    if marker not in page:
        return ""
    return page.split(marker, 1)[1].split("</p>", 1)[0]


def test_an_operator_opens_an_augmentation_with_the_form_each_refusal_next_to_its_field(
    client, operator, federation_with_data
):
    client.force_login(operator)
    hub = client.get("/federations/adult-income/?tab=exchanges").content.decode()
    assert f'href="{NEW}"' in hub
    form = client.get(NEW)
    assert form.status_code == 200
    n_features = federation_with_data.public_datasets.first().n_features
    assert f'name="n_features" value="{n_features}"' in form.content.decode()
    assert 'name="use_public_data" type="checkbox" value="true" aria' in form.content.decode()
    n_columns = len(federation_with_data.public_datasets.first().feature_spec["columns"])

    # the serializer's refusals, field by field; the values typed are kept
    bad = client.post(NEW, {**FORM, "n_features": "many", "epochs": "0", "name": ""})
    page = bad.content.decode()
    assert bad.status_code == 400
    assert field_error(page, "n_features") == "A valid integer is required."
    assert field_error(page, "epochs") == "Ensure this value is greater than or equal to 1."
    assert field_error(page, "name") == "This field may not be blank."
    assert 'name="n_features" value="many"' in page and 'aria-invalid="true"' in page
    # the service's refusals, next to the field they are about
    for changes, name, sentence in (
        ({"n_features": "5000"}, "n_features", "Seed samples have 1 to 4096 features, not 5000."),
        (
            {"noise_multiplier": "1.0"},
            "target_epsilon",
            "Give either noise_multiplier or target_epsilon, not both.",
        ),
        ({"delta": "1"}, "delta", "&#x27;delta&#x27; must lie strictly between 0 and 1, not 1.0."),
        (
            {"use_public_data": "true"},
            "use_public_data",
            f"The public data has {n_columns} columns but seed rows have 2 features; they must match "
            "to pretrain on it.",
        ),
    ):
        page = client.post(NEW, {**FORM, **changes}).content.decode()
        assert field_error(page, name) == sentence
    assert not Augmentation.objects.exists()

    opened = client.post(NEW, FORM, follow=True)
    augmentation = Augmentation.objects.get()
    assert opened.redirect_chain == [(f"/augmentations/{augmentation.id}/", 302)]
    assert "FAug on Adult opened: member silos can upload their seeds now." in (
        opened.content.decode()
    )
    assert (
        augmentation.n_features,
        augmentation.private,
        augmentation.target_epsilon,
        augmentation.public_dataset,
    ) == (2, True, 10.0, None)


def test_only_operators_see_and_submit_the_augmentation_form(
    client, federation_with_data, silo_user
):
    client.force_login(silo_user)
    hub = client.get("/federations/adult-income/?tab=exchanges").content.decode()
    assert NEW not in hub
    assert client.get(NEW).status_code == 403
    refused = client.post(NEW, FORM)
    assert refused.status_code == 403
    assert "Only market operators can open federated augmentations." in refused.content.decode()
    assert not Augmentation.objects.exists()


def test_a_silo_uploads_seeds_on_the_page_and_sees_only_its_own_counts_and_leakage(
    client, settings, operator, federation_with_data, silo_user, other_silo_user
):
    from market.federations.membership import federation_join

    federation_join(federation=federation_with_data, user=other_silo_user)
    augmentation_id = open_augmentation(operator)
    client.force_login(other_silo_user)
    client.post(f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()})
    client.force_login(silo_user)
    page = client.get(f"/augmentations/{augmentation_id}/").content.decode()
    assert 'id="seeds-file"' in page and "Contoso Bank" not in page
    too_big = client.post(
        f"/augmentations/{augmentation_id}/seeds/",
        {
            "seeds": SimpleUploadedFile(
                "seeds.json", b" " * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
            )
        },
    )
    assert too_big.status_code == 400 and "A seeds file is at most" in too_big.content.decode()
    bad = client.post(
        f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file(labels=[0, 0, 0, 0])}
    )
    assert bad.status_code == 400 and "none of [1] is among your seeds" in bad.content.decode()
    uploaded = client.post(
        f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()}, follow=True
    )
    page = uploaded.content.decode()
    assert "Your seeds were uploaded." in page and "Northwind Hospital" in page
    # device–server 1 / 4; inter-device 1 of the 8 seeds the two silos pooled
    assert "<td>4</td><td>1</td><td>3</td><td>0.25</td><td>0.13</td>" in page
    assert "share of the 8 seeds pooled so far" in page and "Contoso Bank" not in page
    assert 'id="seeds-file"' not in page  # one upload per silo
    assert SeedUpload.objects.count() == 2


def test_an_operator_sees_every_silo_and_starts_the_training_with_its_epsilon_reserved(
    client, operator, federation_with_data, silo_user
):
    augmentation_id = open_augmentation(operator)
    client.force_login(silo_user)
    client.post(f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()})
    client.force_login(operator)
    page = client.get(f"/augmentations/{augmentation_id}/").content.decode()
    assert "<td>Northwind Hospital</td><td>4</td>" in page and "<td>—</td>" in page
    assert "Start training (reserves ε for 1 silo)" in page
    started = client.post(f"/augmentations/{augmentation_id}/start/", follow=True)
    page = started.content.decode()
    assert "The generator&#x27;s training is queued." in page and "Queued for training" in page
    assert "reserved to each contributing silo" in page
    hub = client.get("/federations/adult-income/?tab=exchanges").content.decode()
    assert f'href="/augmentations/{augmentation_id}/"' in hub and "DP-SGD" in hub


def test_the_ledger_api_and_pages_name_the_augmentation_a_dp_generator_reserved_for(
    client, operator, federation_with_data, silo_user
):
    augmentation_id = open_augmentation(operator)
    client.force_login(silo_user)
    client.post(f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()})
    client.force_login(operator)
    client.post(f"/augmentations/{augmentation_id}/start/")
    [line] = api_client_for(operator).get("/api/federations/adult-income/budget-ledger/").json()
    assert (line["kind"], line["augmentation_id"], line["job_id"]) == (
        "reserve",
        augmentation_id,
        None,
    )
    ledger = client.get("/federations/adult-income/budgets/ledger/").content.decode()
    assert (
        f'<a href="/augmentations/{augmentation_id}/">Augmentation #{augmentation_id}</a>' in ledger
    )
    dashboard = client.get("/federations/adult-income/budgets/").content.decode()
    assert f"Augmentation #{augmentation_id}" in dashboard


def test_the_page_shows_a_ctgan_augmentation_as_such_and_without_dp(
    client, operator, federation_with_data
):
    response = api_client_for(operator).post(
        "/api/augmentations/",
        {"federation": "adult-income", "name": "Tabular FAug", "n_features": 2, "epochs": 1,
         "batch_size": 2, "generator": "ctgan"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.json()
    client.force_login(operator)
    page = client.get(f"/augmentations/{response.json()['id']}/").content.decode()
    assert 'id="generator-kind">CTGAN, tabular (published as generated samples; no DP)' in page
    assert "a CTGAN's gradient penalty rules out DP-SGD" in page
    assert 'id="generator-public-data">not used: the GAN learns from the seeds only' in page


def test_where_a_silo_uploads_seeds_to_a_ctgan_it_is_told_its_rows_may_be_published(
    client, operator, silo_user, federation_with_data
):
    pages = {}
    for generator in ("ctgan", "mlp_gan"):
        response = api_client_for(operator).post(
            "/api/augmentations/",
            {"federation": "adult-income", "name": f"FAug {generator}", "n_features": 2, "epochs": 1,
             "batch_size": 2, "generator": generator},
            format="json",
        )  # fmt: skip
        assert response.status_code == 201, response.json()
        client.force_login(silo_user)
        pages[generator] = client.get(f"/augmentations/{response.json()['id']}/").content.decode()
    warning = (
        '<p class="help" id="seeds-copies-warning"><strong>A CTGAN trained on few seeds can reproduce them: the rows '
        "it generates are published to every member of the federation, and some may be your seed rows, or "
        "nearly.</strong>"
    )
    assert 'id="seeds-form"' in pages["ctgan"] and warning in pages["ctgan"]
    assert 'id="seeds-form"' in pages["mlp_gan"] and "seeds-copies-warning" not in pages["mlp_gan"]


def test_the_page_says_which_public_data_the_gan_pretrains_on(
    client, operator, federation_with_data
):
    public = federation_with_data.public_datasets.first()
    augmentation = Augmentation.objects.get(
        id=api_client_for(operator)
        .post("/api/augmentations/", {**API_AUGMENTATION, "noise_multiplier": 1.0}, format="json")
        .json()["id"]
    )
    augmentation.public_dataset = (
        public  # what opening with use_public_data pins, when the rows are in [0, 1]
    )
    augmentation.save(update_fields=["public_dataset"])
    client.force_login(operator)
    page = client.get(f"/augmentations/{augmentation.id}/").content.decode()
    assert (
        f'id="generator-public-data">pretrains on the {public.n_rows} unlabelled rows of the public data '
        f"uploaded {public.created_at:%Y-%m-%d}, before the seeds and at no ε"
    ) in page


def test_the_form_offers_the_generators_and_opens_a_ctgan_without_dp(
    client, operator, federation_with_data
):
    client.force_login(operator)
    form = client.get(NEW).content.decode()
    assert '<select id="field-generator" name="generator"' in form
    assert '<option value="mlp_gan" selected>' in form and '<option value="ctgan">' in form

    # a CTGAN with a target ε: the service's refusal, next to a field, and the choice is kept
    page = client.post(NEW, {**FORM, "generator": "ctgan"}).content.decode()
    assert "A CTGAN cannot be trained with DP-SGD" in page
    assert '<option value="ctgan" selected>' in page
    assert not Augmentation.objects.exists()

    client.post(NEW, {**FORM, "generator": "ctgan", "target_epsilon": "", "delta": ""})
    augmentation = Augmentation.objects.get()
    assert (augmentation.generator, augmentation.private) == ("ctgan", False)


def test_an_operator_cancels_a_queued_augmentation_on_its_page_and_the_reserved_epsilon_is_released(
    client, operator, federation_with_data, silo_user
):
    from market.budgets.models import BudgetEntry

    augmentation_id = open_augmentation(operator)
    client.force_login(silo_user)
    client.post(f"/augmentations/{augmentation_id}/seeds/", {"seeds": seeds_file()})
    assert (
        'id="cancel-augmentation"'
        not in client.get(f"/augmentations/{augmentation_id}/").content.decode()
    )
    refused = client.post(f"/augmentations/{augmentation_id}/cancel/")
    assert refused.status_code == 403
    client.force_login(operator)
    client.post(f"/augmentations/{augmentation_id}/start/")
    page = client.get(f"/augmentations/{augmentation_id}/").content.decode()
    assert "Cancel this augmentation (releases the reserved ε)" in page
    cancelled = client.post(f"/augmentations/{augmentation_id}/cancel/", follow=True)
    page = cancelled.content.decode()
    assert f"Augmentation #{augmentation_id}: cancelled." in page
    assert "Cancelled by olivia-operator before training." in page
    assert "released, nothing charged" in page and 'id="cancel-augmentation"' not in page
    assert Augmentation.objects.get(id=augmentation_id).status == "cancelled"
    assert list(BudgetEntry.objects.order_by("id").values_list("kind", flat=True)) == [
        "reserve",
        "release",
    ]
    again = client.post(f"/augmentations/{augmentation_id}/cancel/")
    assert again.status_code == 409 and "there is nothing to cancel" in again.content.decode()
