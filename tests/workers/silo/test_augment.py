"""`augment`: a silo appends generated samples of its target labels to its table (FAug), offline."""

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import scaled_timeout
from workers.algorithms.faug.generator import save_generator
from workers.algorithms.faug.training import GanSetting, GeneratorPrivacy, train_generator

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


@pytest.fixture
def ctgan_samples(tmp_path):
    """A CTGAN augmentation's published rows (.npz): 4 rows of 'one' and 4 of 'two', raw pixel values."""
    from workers.algorithms.faug.samples import samples_save

    features = np.arange(48, dtype=np.float32).reshape(8, 6) * 5
    path = tmp_path / "samples.npz"
    path.write_bytes(samples_save(features, np.repeat([1, 2], 4)))
    return path, features


def test_augment_appends_published_ctgan_rows_of_the_target_labels_without_ctgan(
    image_federation, ctgan_samples, tmp_path
):
    import subprocess
    import sys
    from pathlib import Path

    folder, silo, _ = image_federation
    samples, features = ctgan_samples
    output = tmp_path / "augmented.csv"
    script = (
        "import json, sys\n"
        "from workers.silo.cli import main\n"
        f"code = main(['augment', 'digits', '--generator', {str(samples)!r}, '--data', {str(silo)!r},"
        f" '--pulled', {str(folder)!r}, '--target-label', 'two', '--per-label', '3',"
        f" '--output', {str(output)!r}, '--json'])\n"
        "print('LOADED', json.dumps(sorted({'ctgan', 'rdt'} & set(sys.modules))))\n"
        "sys.exit(code)\n"
    )
    root = Path(__file__).resolve().parents[3]
    finished = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=scaled_timeout(120),
    )
    assert finished.returncode == 0, finished.stderr
    assert "LOADED []" in finished.stdout
    result = json.loads(finished.stdout.split("LOADED")[0])
    assert (result["generated_rows"], result["generator_epsilon"]) == (3, None)
    augmented = pd.read_csv(output)
    generated = augmented.iloc[24:]
    assert len(generated) == 3 and (generated["digit"] == "two").all()
    published = {tuple(row) for row in features[4:].tolist()}
    assert {tuple(row) for row in generated[PIXELS].to_numpy().tolist()} <= published


def test_augment_refuses_a_target_label_the_published_rows_lack(
    run_cli, image_federation, ctgan_samples
):
    folder, silo, _ = image_federation
    samples, _ = ctgan_samples
    code, _, err = run_cli(
        "augment", "digits", "--generator", samples, "--data", silo, "--pulled", folder,
        "--target-label", "zero",
    )  # fmt: skip
    assert code != 0 and "holds no generated row of zero (no silo seeded it)" in err
