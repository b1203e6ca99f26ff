"""Guha, Talwalkar, Smith, *One-Shot Federated Learning* (2019): Figure 1 (ensembles of local RBF
SVMs by selection strategy and k, against local models and the global ideal) and Figure 3
(kernel distillation of the ensemble as the number of proxy points grows).

Protocol (the issue's, scaled to 2 shared CPU cores; see ``docs/results/guha.md``):

- The whole dataset (Adult or MAGIC, encoded as ``workers.datasets`` does) minus a proxy pool of
  ``PROXY_SHARE`` (unlabelled, for distillation only) is spread over ``n_devices`` devices with a
  Dirichlet(β) label partition; every device splits its rows 50 / 40 / 10 into train / test /
  validation (stratified where it can).
- A device may contribute a model when it has at least ``min_samples`` training rows of both
  classes. Its local model is an RBF SVM (``C=1``, ``gamma="scale"``) with Platt probabilities;
  a model whose Platt fit fails casts hard votes.
- Scores: ROC AUC on every device's own test rows (devices whose test rows hold one class only
  are skipped), averaged over devices. *Local*: each contributing device's own model on its own
  test rows. *Global ideal*: one RBF SVM on the pooled training rows of all devices (a uniform
  sample of at most ``GLOBAL_ROWS`` rows). *Ensembles*: the average of the selected members'
  probabilities (:mod:`workers.algorithms.ensemble`), selected by
  :func:`workers.algorithms.selection.select_members` from the declared metadata only.
- All members predict all test rows once; every strategy and k reuses those predictions.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from workers.algorithms.ensemble import average_probabilities, stacked_probabilities
from workers.algorithms.kernel_distillation import KernelDistilledClassifier
from workers.algorithms.registry import Member
from workers.algorithms.selection import select_members
from workers.datasets import load_dataset
from workers.partition import dirichlet_label_partition

KS = (1, 10, 50, 100)
STRATEGIES = ("cross_validation", "data", "random")
PROXY_SHARE = 0.2
GLOBAL_ROWS = 10_000
CV_THRESHOLD = 0.5  # fixed in advance: a model must beat chance on its own validation rows
PROXY_SIZES = (50, 100, 250, 500, 1000, 2000, 3500)
KERNEL_RIDGE = 1e-3  # fixed in advance (numerical stability), never tuned on test rows


def _device_splits(indices, labels, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """50 / 40 / 10 train / test / validation of one device's rows (stratified when possible)."""
    seed = int(rng.integers(2**31))
    if len(indices) < 4:
        return indices, indices[:0], indices[:0]
    stratify = (
        labels[indices]
        if np.bincount(labels[indices]).min(initial=0) >= 3 and len(np.unique(labels[indices])) > 1
        else None
    )
    try:
        train, rest = train_test_split(
            indices, train_size=0.5, random_state=seed, stratify=stratify
        )
        test, validation = train_test_split(
            rest,
            train_size=0.8,
            random_state=seed,
            stratify=None if stratify is None else labels[rest],
        )
    except ValueError:
        train, rest = train_test_split(indices, train_size=0.5, random_state=seed)
        test, validation = train_test_split(rest, train_size=0.8, random_state=seed)
    return train, test, validation


def _svm(features, labels, seed: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return SVC(kernel="rbf", C=1.0, gamma="scale", probability=True, random_state=seed).fit(
                features, labels
            )
        except ValueError:  # too few rows per class for Platt's internal cross-validation
            return SVC(kernel="rbf", C=1.0, gamma="scale").fit(features, labels)


def _auc(labels, scores) -> float | None:
    return float(roc_auc_score(labels, scores)) if len(np.unique(labels)) == 2 else None


def _mean_device_auc(devices, labels, scores_of_rows) -> float:
    values = [_auc(labels[test], scores_of_rows[position]) for test, position in devices]
    values = [value for value in values if value is not None]
    return float(np.mean(values))


def run_guha(
    dataset: str, seed: int, *, n_devices: int, beta: float, min_samples: int, log=print
) -> dict:
    """One seed of Figure 1 and Figure 3 on ``dataset``; returns the JSON-ready results."""
    started = time.perf_counter()
    data = load_dataset(dataset, seed=seed)
    features = np.concatenate([data.train_x, data.public_x, data.test_x]).astype(np.float64)
    labels = np.concatenate([data.train_y, data.public_y, data.test_y])
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    proxy_pool, spread = (
        order[: int(PROXY_SHARE * len(order))],
        order[int(PROXY_SHARE * len(order)) :],
    )
    # devices with almost no rows are allowed (min_size=0): they simply cannot contribute or be scored
    parts = dirichlet_label_partition(labels[spread], n_devices, beta=beta, seed=seed, min_size=0)
    splits = [_device_splits(spread[part], labels, rng) for part in parts]
    contributing = [
        j
        for j, (train, _, _) in enumerate(splits)
        if len(train) >= min_samples and len(np.unique(labels[train])) == 2
    ]
    models, members = [], []
    for j in contributing:
        train, _, validation = splits[j]
        model = _svm(features[train], labels[train], seed)
        models.append(model)
        score = _auc(labels[validation], _positive_scores(model, features[validation]))
        members.append(
            Member(
                key=str(j),
                organisation=str(j),
                n_examples=len(train),
                validation_score=-1.0 if score is None else score,
            )
        )
    test_rows = np.concatenate([splits[j][1] for j in range(n_devices)])
    offsets = np.cumsum([0] + [len(splits[j][1]) for j in range(n_devices)])
    device_tests = [(splits[j][1], np.arange(offsets[j], offsets[j + 1])) for j in range(n_devices)]
    log(
        f"  [{dataset} seed {seed}] {len(contributing)} of {n_devices} devices contribute; "
        f"fitted in {time.perf_counter() - started:.0f} s"
    )
    stacked = stacked_probabilities(models, features[test_rows], 2)  # computed once, reused below
    results = {
        "dataset": dataset,
        "seed": seed,
        "n_devices": n_devices,
        "beta": beta,
        "min_samples": min_samples,
        "n_contributing": len(contributing),
        "device_sizes": [int(len(part)) for part in parts],
    }
    local = [
        _auc(labels[splits[j][1]], stacked[i, offsets[j] : offsets[j + 1], 1])
        for i, j in enumerate(contributing)
    ]
    results["local"] = float(np.mean([value for value in local if value is not None]))
    pooled = np.concatenate([splits[j][0] for j in range(n_devices)])
    pooled = (
        pooled if len(pooled) <= GLOBAL_ROWS else rng.choice(pooled, GLOBAL_ROWS, replace=False)
    )
    global_model = SVC(kernel="rbf", C=1.0, gamma="scale").fit(features[pooled], labels[pooled])
    results["global"] = _mean_device_auc(
        device_tests, labels, global_model.decision_function(features[test_rows])
    )
    results["full"] = _mean_device_auc(device_tests, labels, average_probabilities(stacked)[:, 1])
    results["ensembles"] = {}
    for strategy in STRATEGIES:
        for k in KS:
            threshold = CV_THRESHOLD if strategy == "cross_validation" else None
            chosen = select_members(members, strategy=strategy, k=k, threshold=threshold, seed=seed)
            averaged = average_probabilities(stacked, chosen)[:, 1]
            results["ensembles"][f"{strategy}:{k}"] = _mean_device_auc(
                device_tests, labels, averaged
            )
    results["distillation"] = _distillation(
        features, labels, proxy_pool, models, test_rows, device_tests, stacked, rng
    )
    results["wall_seconds"] = time.perf_counter() - started
    log(
        f"  [{dataset} seed {seed}] local {results['local']:.3f} global {results['global']:.3f} "
        f"full ensemble {results['full']:.3f} in {results['wall_seconds']:.0f} s"
    )
    return results


def _positive_scores(model, features) -> np.ndarray:
    return (
        model.predict_proba(features)[:, 1]
        if hasattr(model, "predict_proba")
        else model.decision_function(features)
    )


def _distillation(
    features, labels, proxy_pool, models, test_rows, device_tests, stacked, rng
) -> dict:
    """Figure 3: kernel students on nested proxy samples against the full ensemble."""
    proxy_order = rng.permutation(proxy_pool)
    teacher_on_proxy = average_probabilities(
        stacked_probabilities(models, features[proxy_order[: max(PROXY_SIZES)]], 2)
    )
    ensemble_labels = average_probabilities(stacked).argmax(axis=1)
    curve = {}
    for size in PROXY_SIZES:
        if size > len(proxy_order):
            continue
        student = KernelDistilledClassifier(ridge=KERNEL_RIDGE).fit(
            features[proxy_order[:size]], teacher_on_proxy[:size]
        )
        outputs = student.decision_function(features[test_rows])
        curve[str(size)] = {
            "auc": _mean_device_auc(device_tests, labels, outputs[:, 1] - outputs[:, 0]),
            "fidelity": float(np.mean(outputs.argmax(axis=1) == ensemble_labels)),
        }
    return curve
