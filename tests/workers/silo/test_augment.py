"""`augment`: a silo appends generated samples of its target labels to its table (FAug), offline."""

import json

import numpy as np
import pandas as pd
import pytest

from workers.algorithms.faug import GanSetting, GeneratorPrivacy, save_generator, train_generator

PIXELS = [f"pixel{index}" for index in range(6)]
CLASSES = ["zero", "one", "two"]
TINY = GanSetting(
    latent_size=4,
    generator_hidden_sizes=(8,),
    discriminator_hidden_sizes=(8,),
    epochs=2,
    batch_size=8,
)


@pytest.fixture(scope="module")
def image_federation(tmp_path_factory):
    """A pulled image federation of 6 numeric pixel columns and 3 classes, a silo's table lacking 'two',
    and a generator file trained on seeds of every class."""
    tmp_path = tmp_path_factory.mktemp("faug")
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 12)
    pixels = np.clip(rng.normal(0.2 + 0.3 * labels[:, None], 0.05, size=(36, 6)), 0, 1)
    folder = tmp_path / "onefold-digits"
    folder.mkdir()
    spec = {
        "columns": [{"name": name, "type": "numeric", "mean": 0.5, "std": 0.2} for name in PIXELS]
    }
    (folder / "feature-spec.json").write_text(json.dumps(spec))
    (folder / "federation.json").write_text(
        json.dumps(
            {
                "slug": "digits",
                "class_labels": CLASSES,
                "label_column": "digit",
                "allowed_privacy_levels": ["L0"],
            }
        )
    )
    np.savez(folder / "features.npz", features=pixels.astype(np.float32))
    table = pd.DataFrame(pixels * 255, columns=PIXELS)
    table["digit"] = [CLASSES[label] for label in labels]
    silo = tmp_path / "silo.csv"
    table[table["digit"] != "two"].to_csv(silo, index=False)
    generator = tmp_path / "generator.safetensors"
    generator.write_bytes(
        save_generator(
            train_generator(
                pixels,
                labels,
                n_classes=3,
                setting=TINY,
                seed=0,
                privacy=GeneratorPrivacy(noise_multiplier=2.0),
            )
        )
    )
    return folder, silo, generator


def test_augment_appends_generated_rows_of_the_target_labels(run_cli, image_federation, tmp_path):
    folder, silo, generator = image_federation
    output = tmp_path / "augmented.csv"
    code, out, err = run_cli(
        "augment",
        "digits",
        "--generator",
        generator,
        "--data",
        silo,
        "--pulled",
        folder,
        "--target-label",
        "two",
        "--feature-scale",
        "255",
        "--output",
        output,
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["rows"], result["per_label"], result["generated_rows"]) == (24, 12, 12)
    assert result["target_labels"] == ["two"] and 0 < result["generator_epsilon"] < float("inf")
    augmented = pd.read_csv(output)
    assert list(augmented.columns) == [*PIXELS, "digit"] and len(augmented) == 36
    generated = augmented.iloc[24:]
    assert (generated["digit"] == "two").all()
    assert ((generated[PIXELS] >= 0) & (generated[PIXELS] <= 255)).all().all()
    code, text, _ = run_cli(
        "augment",
        "digits",
        "--generator",
        generator,
        "--data",
        silo,
        "--pulled",
        folder,
        "--target-label",
        "two",
        "--per-label",
        "3",
        "--output",
        output,
    )
    assert code == 0 and "12 generated rows" not in text and "3 generated rows" in text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--target-label", "seven"], "among the federation's classes"),
        ([], "give at least one --target-label"),
        (["--target-label", "two", "--per-label", "0"], "between 1 and 100000"),
        (["--target-label", "two", "--feature-scale", "-1"], "--feature-scale"),
    ],
)
def test_augment_refuses_bad_arguments_with_a_sentence(
    run_cli, image_federation, arguments, message
):
    folder, silo, generator = image_federation
    code, _, err = run_cli(
        "augment",
        "digits",
        "--generator",
        generator,
        "--data",
        silo,
        "--pulled",
        folder,
        *arguments,
    )
    assert code != 0 and message in err


def test_augment_refuses_a_pickle_or_a_mismatched_generator(run_cli, image_federation, tmp_path):
    folder, silo, _ = image_federation
    pickled = tmp_path / "generator.pt"
    pickled.write_bytes(b"\x80\x04\x95 a pickle")
    code, _, err = run_cli(
        "augment",
        "digits",
        "--generator",
        pickled,
        "--data",
        silo,
        "--pulled",
        folder,
        "--target-label",
        "two",
    )
    assert code != 0 and "not a usable generator" in err
    rng = np.random.default_rng(1)
    wide = tmp_path / "wide.safetensors"
    wide.write_bytes(
        save_generator(
            train_generator(
                rng.uniform(size=(20, 9)), np.arange(20) % 3, n_classes=3, setting=TINY, seed=0
            )
        )
    )
    code, _, err = run_cli(
        "augment",
        "digits",
        "--generator",
        wide,
        "--data",
        silo,
        "--pulled",
        folder,
        "--target-label",
        "two",
    )
    assert code != 0 and "makes 9 features" in err
