"""A buyer's toolkit against a live market: `download --format raw_onnx --package` writes the raw-column model with
its model card and feature specification, and `download --help` says so."""

import io
import json
import zipfile

import pytest

from tests.fixtures.commerce import BUYER_PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def test_download_help_names_the_raw_column_model_and_the_package(run_cli, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli("download", "--help")
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--format FORMAT raw_onnx (raw columns in, probabilities out: runs with onnxruntime alone)"
        in text
    )
    assert "--package a zip of the file with the model card README.md and feature-spec.json" in text
    assert "GET /api/global-models/<id>/feature-spec.json" in text


def test_a_buyer_downloads_the_raw_column_package_of_a_bought_model(
    run_cli,
    live_server,
    published_listing,  # noqa: F811
    buyer_user,  # noqa: F811
    tmp_path,
):
    from market.commerce.purchases import purchase_create

    listing = published_listing(price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    code, _, err = run_cli(
        "login",
        "--market",
        live_server.url,
        "--username",
        buyer_user.username,
        "--password",
        BUYER_PASSWORD,
    )
    assert code == 0, err
    output = tmp_path / "model.zip"

    code, out, err = run_cli(
        "download",
        listing.global_model_id,
        "--format",
        "raw_onnx",
        "--package",
        "--output",
        output,
        "--json",
    )

    assert code == 0, err
    assert json.loads(out)["file"] == str(output)
    with zipfile.ZipFile(io.BytesIO(output.read_bytes())) as package:
        assert sorted(package.namelist()) == sorted(
            [
                f"onefold-global-model-{listing.global_model_id}.raw.onnx",
                "README.md",
                "feature-spec.json",
            ]
        )
        spec = json.loads(package.read("feature-spec.json"))
    assert spec == listing.global_model.job.public_dataset.feature_spec


def test_download_without_output_writes_the_name_the_web_gives_the_file(
    run_cli,
    live_server,
    published_listing,  # noqa: F811
    buyer_user,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """The web's snippet opens ``onefold-global-model-N.raw.onnx``: the toolkit writes the same file names (the
    market's Content-Disposition), so one snippet runs after either download."""
    from market.commerce.purchases import purchase_create

    listing = published_listing(price_cents=0)
    purchase_create(listing=listing, user=buyer_user)
    code, _, err = run_cli(
        "login",
        "--market",
        live_server.url,
        "--username",
        buyer_user.username,
        "--password",
        BUYER_PASSWORD,
    )
    assert code == 0, err
    monkeypatch.chdir(tmp_path)
    model_id = listing.global_model_id

    for arguments, expected in [
        (("--format", "raw_onnx"), f"onefold-global-model-{model_id}.raw.onnx"),
        (("--format", "raw_onnx", "--package"), f"onefold-global-model-{model_id}.raw.onnx.zip"),
        (("--format", "onnx"), f"onefold-global-model-{model_id}.onnx"),
    ]:
        code, out, err = run_cli("download", model_id, *arguments, "--json")
        assert code == 0, err
        assert json.loads(out)["file"] == expected
        assert (tmp_path / expected).stat().st_size > 0
