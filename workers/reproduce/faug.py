"""Federated augmentation on non-IID MNIST (issue 15, item 2): local models with and without samples of their
missing labels from a conditional generator, and the generator trained with DP-SGD at two values of ε.

``python -m workers.reproduce.faug [--seeds 0,1] [--epsilons 2,10] [--gan-epochs 60] [--public-data]``

Protocol: the FedKT split of :mod:`workers.datasets` (MNIST 10k; train / test / public = 75 / 12.5 / 12.5 %).
The training split goes IID to 10 devices; on each, 3 target labels drawn at random keep only 5 samples (the
FD paper's Table 1 non-IID setting, :func:`workers.reproduce.fd_simulation.starved_partition`). Each device
uploads its 15 target samples as seeds and 15 redundant samples of other labels (device–server leakage 0.5);
the server trains one conditional GAN (:func:`workers.algorithms.faug.training.train_generator`) on the 300 pooled
seeds. Each device then appends generated samples of its target labels, as many per label as its mean count
of the other labels, and trains the zoo MLP (784-100-10, Adam 1e-3, batch 64, 10 epochs). Reported: test
accuracy of each device's model, mean over devices, on the whole test split and on the test rows of that
device's target labels. Rows: ``local`` (own data only), ``faug`` (non-private generator), ``faug_dp`` at each
ε (discriminator under DP-SGD through Opacus, δ = 1e-5, clipping 1, ε by the market's accountant). Each row also
runs federated distillation on the same devices' data, generated rows included (FD + FAug; the FD reproduction's
setting, :data:`workers.reproduce.protocols.FD_SETTING`): ``fd_accuracy``, the mean device accuracy. Results go
to ``docs/results/faug.json``, a sample grid per generator to ``docs/results/faug_samples.png``;
``docs/results/faug.md`` discusses them.

``--public-data`` pretrains every generator on the public split's 1,250 unlabelled rows first
(``GanSetting.public_epochs`` unconditional epochs, no ε: :func:`workers.algorithms.faug.training.train_generator`) and
writes its generator rows, named ``faug_public`` and ``faug_public_dp_eps…``, to ``docs/results/faug_public.json``
and its samples to ``docs/results/faug_public_samples.png`` (the ``local`` row is the same as without, so it is
not rerun).

``--choose-public-epochs 0,5,20`` picks ``public_epochs`` without reading the test split: on each seed it cuts a
stratified validation set (``VALIDATION_FRACTION`` of the training split, 1,250 rows) out of the training split
*before* partitioning, partitions the rest as above, trains the non-private public-pretrained generator with
each candidate and the devices' local models as above, and scores each candidate by the local models' mean
accuracy on the validation rows (:func:`validation_split`, :func:`choose_public_epochs`; no FD, no DP rows).
It prints the scores and the choice and writes them to ``docs/results/faug_public_selection.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from workers.datasets import Dataset, load_dataset

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "faug.json"
PUBLIC_RESULTS = RESULTS.with_name("faug_public.json")
SELECTION_RESULTS = RESULTS.with_name("faug_public_selection.json")
VALIDATION_FRACTION = 1 / 6  # 1,250 of MNIST's 7,500 training rows: the test split's size
N_DEVICES = 10
N_TARGET_LABELS = 3
KEEP = 5
N_REDUNDANT = 15
LOCAL_MODEL = {
    "hidden_sizes": [100],
    "epochs": 10,
    "batch_size": 64,
    "learning_rate": 1e-3,
    "optimizer": "adam",
}
DELTA = 1e-5


def validation_split(data: Dataset, seed: int) -> Dataset:
    """The dataset with a stratified ``VALIDATION_FRACTION`` of its training rows moved into the test rows' place;
    the test split itself is dropped, so nothing run on the result can read it."""
    from sklearn.model_selection import train_test_split

    train, validation = train_test_split(
        np.arange(len(data.train_y)),
        test_size=VALIDATION_FRACTION,
        random_state=seed,
        stratify=data.train_y,
    )
    return dataclasses.replace(
        data,
        train_x=data.train_x[train],
        train_y=data.train_y[train],
        test_x=data.train_x[validation],
        test_y=data.train_y[validation],
    )


def choose_public_epochs(scores: dict[int, list[float]]) -> int:
    """The candidate with the best mean validation accuracy over seeds; ties go to fewer epochs."""
    return min(scores, key=lambda epochs: (-float(np.mean(scores[epochs])), epochs))


def pool_seeds(train_x, train_y, devices, n_classes: int, rng: np.random.Generator):
    """Each device's target samples plus ``N_REDUNDANT`` samples of its other labels; the devices' targets."""
    pooled, targets = [], []
    for rows in devices:
        target = [label for label in range(n_classes) if (train_y[rows] == label).sum() <= KEEP]
        in_target = np.isin(train_y[rows], target)
        redundant = rng.choice(rows[~in_target], size=N_REDUNDANT, replace=False)
        pooled.append(np.concatenate([rows[in_target], redundant]))
        targets.append(target)
    pooled = np.concatenate(pooled)
    return train_x[pooled], train_y[pooled], targets


def _local_accuracy(
    features, labels, test_x, test_y, target: list[int], seed: int
) -> tuple[float, float]:
    from workers.learners import TorchClassifier

    model = TorchClassifier(random_state=seed, **LOCAL_MODEL).fit(features, labels)
    predicted = model.predict(test_x)
    on_target = np.isin(test_y, target)
    return float((predicted == test_y).mean()), float(
        (predicted[on_target] == test_y[on_target]).mean()
    )


def _federated_distillation(device_data, test_x, test_y, n_classes: int, seed: int) -> dict:
    """FD (the FD reproduction's setting) on the devices' data, generated rows included: mean device accuracy."""
    from workers.reproduce.fd_simulation import simulate
    from workers.reproduce.protocols import FD_SETTING

    features = np.concatenate([features for features, _ in device_data])
    labels = np.concatenate([labels for _, labels in device_data])
    ends = np.cumsum([len(labels) for _, labels in device_data])
    devices = [np.arange(end - len(rows), end) for end, (_, rows) in zip(ends, device_data)]
    result = simulate(
        "fd",
        features,
        labels,
        devices,
        test_x,
        test_y,
        n_classes=n_classes,
        setting=FD_SETTING,
        seed=seed,
    )
    return {
        "fd_accuracy": float(result["accuracy"]),
        "fd_accuracy_std": float(np.std(result["device_accuracies"])),
    }


def _fedkt(device_data, public_x, test_x, test_y, n_classes: int, seed: int) -> dict:
    """FedKT at L0 over the devices' data, generated rows included, with the MNIST reproduction's learners
    (:data:`workers.reproduce.settings.SETTINGS`): the final model's test accuracy."""
    from workers.algorithms.fedkt import FedKTConfig, fedkt_fit
    from workers.reproduce.settings import SETTINGS

    setting = SETTINGS["mnist"]
    config = FedKTConfig(
        teacher=setting.teacher,
        student=setting.student,
        final=setting.student,
        partitions=setting.partitions,
        teachers=setting.teachers,
    )
    result = fedkt_fit(device_data, public_x, n_classes=n_classes, config=config, seed=seed)
    return {"fedkt_accuracy": float((result.final_model.predict(test_x) == test_y).mean())}


def run(
    *,
    seed: int,
    epsilons: list[float],
    gan_epochs: int,
    gan_learning_rate: float = 2e-4,
    fedkt: bool = False,
    public_data: bool = False,
    public_epochs: int | None = None,
    validation: bool = False,
    log=print,
) -> tuple[list[dict], dict]:
    """One seed's rows. ``validation``: on :func:`validation_split`'s data (test rows never read), without FD
    and without the sample grid."""
    import torch

    from workers.algorithms.faug.leakage import device_server_leakage
    from workers.algorithms.faug.training import GanSetting, GeneratorPrivacy, train_generator
    from workers.reproduce.fd_simulation import starved_partition

    torch.set_num_threads(1)
    data = load_dataset("mnist", seed=seed)
    if validation:
        data = validation_split(data, seed)
    n_classes = data.n_classes
    devices = starved_partition(
        data.train_y, N_DEVICES, n_starved=N_TARGET_LABELS, keep=KEEP, seed=seed
    )
    seed_x, seed_y, targets = pool_seeds(
        data.train_x, data.train_y, devices, n_classes, np.random.default_rng(seed)
    )
    leakage = device_server_leakage(N_TARGET_LABELS * KEEP, N_REDUNDANT)
    setting = GanSetting(epochs=gan_epochs, learning_rate=gan_learning_rate)
    if public_epochs is not None:
        setting = dataclasses.replace(setting, public_epochs=public_epochs)
    prefix = "faug_public" if public_data else "faug"
    generators: dict = {} if public_data else {"local": None}
    for name, privacy in [(prefix, None)] + [
        (f"{prefix}_dp_eps{epsilon:g}", GeneratorPrivacy(target_epsilon=epsilon, delta=DELTA))
        for epsilon in epsilons
    ]:
        started = time.perf_counter()
        generators[name] = train_generator(
            seed_x,
            seed_y,
            n_classes=n_classes,
            setting=setting,
            seed=seed,
            privacy=privacy,
            public_features=data.public_x if public_data else None,
        )
        log(
            f"  [faug seed {seed}] generator {name} trained in {time.perf_counter() - started:.0f} s"
        )
    rows = []
    for name, generator in generators.items():
        started = time.perf_counter()
        accuracies, target_accuracies, device_data = [], [], []
        for device, (device_rows, target) in enumerate(zip(devices, targets)):
            features, labels = data.train_x[device_rows], data.train_y[device_rows]
            if generator is not None:
                counts = np.bincount(labels, minlength=n_classes)
                per_label = int(
                    np.mean([counts[label] for label in range(n_classes) if label not in target])
                )
                generated_x, generated_y = generator.generate(
                    target, per_label, seed=seed * 1000 + device
                )
                features, labels = (
                    np.concatenate([features, generated_x]),
                    np.concatenate([labels, generated_y]),
                )
            accuracy, target_accuracy = _local_accuracy(
                features, labels, data.test_x, data.test_y, target, seed * 1000 + device
            )
            accuracies.append(accuracy)
            target_accuracies.append(target_accuracy)
            device_data.append((features, labels))
        row = {
            "seed": seed,
            "method": name,
            "accuracy": float(np.mean(accuracies)),
            "accuracy_std": float(np.std(accuracies)),
            "target_label_accuracy": float(np.mean(target_accuracies)),
            "seconds": round(time.perf_counter() - started, 1),
            **(
                {}
                if validation
                else _federated_distillation(device_data, data.test_x, data.test_y, n_classes, seed)
            ),
            **(
                _fedkt(device_data, data.public_x, data.test_x, data.test_y, n_classes, seed)
                if fedkt
                else {}
            ),
        }
        if generator is not None and generator.privacy_report is not None:
            row.update(
                {
                    "epsilon": generator.privacy_report.epsilon,
                    "delta": DELTA,
                    "noise_multiplier": generator.privacy.noise_multiplier,
                    "steps": generator.privacy.steps,
                    "sample_rate": generator.privacy.sample_rate,
                }
            )
        log(json.dumps(row))
        rows.append(row)
    context = {
        "n_seeds_pooled": int(len(seed_y)),
        "device_server_leakage": leakage,
        "targets": targets,
        "device_sizes": [int(len(rows)) for rows in devices],
    }
    if seed == 0 and not validation:
        plot_samples(
            {name: generator for name, generator in generators.items() if generator is not None},
            n_classes,
            (PUBLIC_RESULTS if public_data else RESULTS).with_name(f"{prefix}_samples.png"),
        )
    return rows, context


def plot_samples(generators: dict, n_classes: int, path: Path) -> None:
    """Five samples of each label from each generator, one panel per generator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(generators), figsize=(3.2 * len(generators), 2.2))
    for axis, (name, generator) in zip(np.atleast_1d(axes), generators.items()):
        features, _ = generator.generate(list(range(n_classes)), 5, seed=0)
        grid = (
            features.reshape(n_classes, 5, 28, 28)
            .transpose(1, 2, 0, 3)
            .reshape(5 * 28, n_classes * 28)
        )
        axis.imshow(grid, cmap="gray_r")
        epsilon = generator.privacy_report.epsilon if generator.privacy_report is not None else None
        axis.set_title(name if epsilon is None else f"DP, ε = {epsilon:.2g}", fontsize=9)
        axis.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.reproduce.faug", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--seeds", default="0", help="comma-separated seeds; each replaces its earlier rows"
    )
    parser.add_argument("--epsilons", default="2,10")
    parser.add_argument("--gan-epochs", type=int, default=60)
    parser.add_argument("--gan-learning-rate", type=float, default=2e-4)
    parser.add_argument(
        "--fedkt", action="store_true", help="also run FedKT (L0) over every row's devices"
    )
    parser.add_argument(
        "--public-data",
        action="store_true",
        help="pretrain the generators on the public split's unlabelled rows; results to faug_public.json",
    )
    parser.add_argument(
        "--public-epochs",
        type=int,
        default=None,
        help="passes over the public rows (default: GanSetting's public_epochs)",
    )
    parser.add_argument(
        "--choose-public-epochs",
        default=None,
        help="comma-separated candidates for --public-epochs: score each on a validation set cut from the "
        "training split (never the test split) and write the choice to faug_public_selection.json",
    )
    arguments = parser.parse_args(argv)
    epsilons = [float(value) for value in arguments.epsilons.split(",")]
    seeds = [int(value) for value in arguments.seeds.split(",")]
    warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
    if arguments.choose_public_epochs is not None:
        return _select_public_epochs(
            [int(value) for value in arguments.choose_public_epochs.split(",")],
            seeds,
            arguments,
            argv,
        )
    runs = []
    for seed in seeds:
        rows, context = run(
            seed=seed,
            epsilons=epsilons,
            gan_epochs=arguments.gan_epochs,
            gan_learning_rate=arguments.gan_learning_rate,
            fedkt=arguments.fedkt,
            public_data=arguments.public_data,
            public_epochs=arguments.public_epochs,
        )
        runs.append(
            {
                "seed": seed,
                "command": "python -m workers.reproduce.faug " + " ".join(argv or sys.argv[1:]),
                "gan_epochs": arguments.gan_epochs,
                "gan_learning_rate": arguments.gan_learning_rate,
                "rows": rows,
                **context,
            }
        )
    setting = {
        "local_model": LOCAL_MODEL,
        "devices": N_DEVICES,
        "target_labels": N_TARGET_LABELS,
        "keep": KEEP,
        "redundant": N_REDUNDANT,
        "delta": DELTA,
    }
    results = PUBLIC_RESULTS if arguments.public_data else RESULTS
    if arguments.public_data:
        from workers.algorithms.faug.training import GanSetting

        setting["public_epochs"] = (
            GanSetting().public_epochs
            if arguments.public_epochs is None
            else arguments.public_epochs
        )
    earlier = (
        json.loads(results.read_text()) if results.exists() else {"runs": []}
    )  # read late: runs may overlap
    runs += [run_ for run_ in earlier.get("runs", []) if run_["seed"] not in seeds]
    results.write_text(
        json.dumps(
            {"setting": setting, "runs": sorted(runs, key=lambda run_: run_["seed"])}, indent=2
        )
        + "\n"
    )
    return 0


def _select_public_epochs(candidates: list[int], seeds: list[int], arguments, argv) -> int:
    """Score every candidate on every seed's validation rows; print and write the scores and the choice."""
    scores: dict[int, list[float]] = {candidate: [] for candidate in candidates}
    for seed in seeds:
        for candidate in candidates:
            rows, _ = run(
                seed=seed,
                epsilons=[],
                gan_epochs=arguments.gan_epochs,
                gan_learning_rate=arguments.gan_learning_rate,
                public_data=True,
                public_epochs=candidate,
                validation=True,
            )
            scores[candidate].append(rows[0]["accuracy"])
    chosen = choose_public_epochs(scores)
    selection = {
        "command": "python -m workers.reproduce.faug " + " ".join(argv or sys.argv[1:]),
        "seeds": seeds,
        "validation_rows": "stratified 1/6 of the training split, cut before partitioning",
        "gan_epochs": arguments.gan_epochs,
        "validation_accuracy": {str(candidate): scores[candidate] for candidate in candidates},
        "mean_validation_accuracy": {
            str(candidate): float(np.mean(scores[candidate])) for candidate in candidates
        },
        "chosen_public_epochs": chosen,
    }
    print(json.dumps(selection, indent=2))
    SELECTION_RESULTS.write_text(json.dumps(selection, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
