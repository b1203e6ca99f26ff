"""Markdown tables and PNG plots of the Guha, CPFL and FD reproductions, from the per-seed JSON
files under ``docs/results/`` (``guha_<dataset>.json``, ``cpfl_fashion.json``, ``fd_mnist.json``).

Every number is mean ± standard deviation (ddof = 1) over the seeds present.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from workers.reproduce.guha import KS, PROXY_SIZES, STRATEGIES
from workers.reproduce.report import mean_std

GUHA_PAPER = {"relative_gain": 51.5, "share_of_global": 90.1}


def _load(path: Path):
    return json.loads(path.read_text()) if path.exists() else []


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def guha_tables(folder: Path) -> str:
    parts = [
        "# Guha et al. reproduction: generated tables",
        "",
        "Mean ROC AUC over devices (each device's own test rows), mean ± std over seeds. "
        "Relative gain = (ensemble − local) / local; share = ensemble / global ideal.",
    ]
    for dataset in ("adult", "magic"):
        runs = _load(folder / f"guha_{dataset}.json")
        if not runs:
            continue
        parts += [
            "",
            f"## {dataset} ({len(runs)} seeds, {runs[0]['n_devices']} devices, Dirichlet β = "
            f"{runs[0]['beta']}, ≥ {runs[0]['min_samples']} training rows to contribute; contributing "
            f"devices: {mean_std([r['n_contributing'] for r in runs], 1)})",
            "",
            "| model | ROC AUC | relative gain over local | share of global ideal |",
            "|---|---|---|---|",
        ]
        rows = [
            ("local models", [r["local"] for r in runs]),
            ("global ideal", [r["global"] for r in runs]),
            ("full ensemble", [r["full"] for r in runs]),
        ]
        rows += [
            (f"{strategy} k={k}", [r["ensembles"][f"{strategy}:{k}"] for r in runs])
            for strategy in STRATEGIES
            for k in KS
        ]
        for name, values in rows:
            gains = [(v - r["local"]) / r["local"] for v, r in zip(values, runs)]
            shares = [v / r["global"] for v, r in zip(values, runs)]
            parts.append(
                f"| {name} | {_auc(values)} | {mean_std(gains)} % | {mean_std(shares)} % |"
            )
        parts += [
            "",
            f"Figure 3 ({dataset}): kernel-distilled student (Guha eq. 3) vs the full ensemble "
            f"({_auc([r['full'] for r in runs])}).",
            "",
            "| proxy points | student ROC AUC | fidelity to the ensemble (%) |",
            "|---|---|---|",
        ]
        for size in PROXY_SIZES:
            cells = [r["distillation"].get(str(size)) for r in runs]
            if all(cells):
                parts.append(
                    f"| {size} | {_auc([c['auc'] for c in cells])} | "
                    f"{mean_std([c['fidelity'] for c in cells])} |"
                )
    parts += _guha_sensitivity(folder)
    return "\n".join(parts) + "\n"


def _guha_sensitivity(folder: Path) -> list[str]:
    """Runs with another number of devices (``guha_<dataset>_devices<N>.json``): the headline only."""
    paths = sorted(folder.glob("guha_*_devices*.json"))
    if not paths:
        return []
    parts = [
        "",
        "## Sensitivity: number of devices (headline only)",
        "",
        "| dataset | devices | seeds | contributing | local | full ensemble | global ideal | relative gain | "
        "share of global |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        runs = _load(path)
        gains = [(r["full"] - r["local"]) / r["local"] for r in runs]
        shares = [r["full"] / r["global"] for r in runs]
        parts.append(
            f"| {runs[0]['dataset']} | {runs[0]['n_devices']} | {len(runs)} | "
            f"{mean_std([r['n_contributing'] for r in runs], 1)} | {_auc([r['local'] for r in runs])} | "
            f"{_auc([r['full'] for r in runs])} | {_auc([r['global'] for r in runs])} | "
            f"{mean_std(gains)} % | {mean_std(shares)} % |"
        )
    return parts


def _auc(values) -> str:
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.4f} ± {values.std(ddof=1) if values.size > 1 else 0.0:.4f}"


def guha_plots(folder: Path) -> None:
    plt = _plt()
    for dataset in ("adult", "magic"):
        runs = _load(folder / f"guha_{dataset}.json")
        if not runs:
            continue
        figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        for strategy in STRATEGIES:
            values = np.array([[r["ensembles"][f"{strategy}:{k}"] for k in KS] for r in runs])
            left.errorbar(
                KS, values.mean(axis=0), yerr=values.std(axis=0, ddof=1), label=strategy, marker="o"
            )
        for key, style in (("local", ":"), ("global", "--"), ("full", "-")):
            left.axhline(np.mean([r[key] for r in runs]), linestyle=style, color="grey", label=key)
        left.set(
            xscale="log",
            xlabel="k (members)",
            ylabel="mean device ROC AUC",
            title=f"{dataset}: Figure 1",
        )
        left.legend(fontsize=8)
        sizes = [s for s in PROXY_SIZES if all(str(s) in r["distillation"] for r in runs)]
        values = np.array([[r["distillation"][str(s)]["auc"] for s in sizes] for r in runs])
        right.errorbar(
            sizes,
            values.mean(axis=0),
            yerr=values.std(axis=0, ddof=1),
            marker="o",
            label="kernel student",
        )
        right.axhline(np.mean([r["full"] for r in runs]), color="grey", label="full ensemble")
        right.set(
            xscale="log",
            xlabel="proxy points",
            ylabel="mean device ROC AUC",
            title=f"{dataset}: Figure 3",
        )
        right.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(folder / f"guha_{dataset}.png", dpi=110)
        plt.close(figure)


def cpfl_tables(folder: Path) -> str:
    records = _load(folder / "cpfl_fashion.json")
    parts = [
        "# CPFL reproduction: generated tables",
        "",
        "Fashion-MNIST, test accuracy (%) on the held-out half of the test set; mean ± std over seeds. "
        "Rounds = rounds until the slowest cohort stopped (cohorts run in parallel); client steps = SGD "
        "steps summed over every client of every round (thousands).",
    ]
    groups = defaultdict(list)
    for record in records:
        groups[(record["alpha"], record["n_cohorts"])].append(record)
    for alpha in sorted({key[0] for key in groups}):
        parts += [
            "",
            f"## Dirichlet α = {alpha:g}",
            "",
            "| cohorts K | seeds | teacher | student | mean cohort model | rounds | client steps (k) |",
            "|---|---|---|---|---|---|---|",
        ]
        for (group_alpha, n_cohorts), runs in sorted(groups.items()):
            if group_alpha != alpha:
                continue
            parts.append(
                f"| {n_cohorts} | {len(runs)} | {mean_std([r['teacher'] for r in runs])} | "
                f"{mean_std([r['student'] for r in runs])} | "
                f"{mean_std([np.mean(r['cohorts']) for r in runs])} | "
                f"{mean_std([r['rounds_to_convergence'] for r in runs], 1)} | "
                f"{mean_std([r['client_steps'] for r in runs], 1e-3)} |"
            )
    return "\n".join(parts) + "\n"


def cpfl_plot(folder: Path) -> None:
    records = _load(folder / "cpfl_fashion.json")
    if not records:
        return
    plt = _plt()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for alpha in sorted({r["alpha"] for r in records}):
        cohorts = sorted({r["n_cohorts"] for r in records if r["alpha"] == alpha})

        def mean(key, k, alpha=alpha):
            return np.mean([r[key] for r in records if r["alpha"] == alpha and r["n_cohorts"] == k])

        left.plot(
            cohorts,
            [100 * mean("student", k) for k in cohorts],
            marker="o",
            label=f"student α={alpha:g}",
        )
        left.plot(
            cohorts,
            [100 * mean("teacher", k) for k in cohorts],
            marker="x",
            linestyle="--",
            label=f"teacher α={alpha:g}",
        )
        right.plot(
            [mean("rounds_to_convergence", k) for k in cohorts],
            [mean("client_steps", k) / 1e3 for k in cohorts],
            marker="o",
            label=f"α={alpha:g} (K = {', '.join(map(str, cohorts))})",
        )
    left.set(
        xscale="log", xlabel="cohorts K", ylabel="test accuracy (%)", title="accuracy vs cohorts"
    )
    right.set(
        xlabel="rounds to convergence (slowest cohort)",
        ylabel="client training steps (k)",
        title="time vs resources",
    )
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(folder / "cpfl_tradeoff.png", dpi=110)
    plt.close(figure)


def fd_tables(folder: Path) -> str:
    records = _load(folder / "fd_mnist.json")
    groups = defaultdict(list)
    for record in records:
        groups[(record["n_devices"], record["protocol"])].append(record)
    parts = [
        "# FD reproduction: generated tables",
        "",
        "MNIST-10k, test accuracy (%); FD: mean over the devices' own models; FedAvg: the global model. "
        "Bits: total over all rounds, uploads and downloads, 32-bit numbers.",
        "",
        "| devices | seeds | local only | FD accuracy | FedAvg accuracy | FD bits | FedAvg bits | FedAvg / FD bits |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n_devices in sorted({key[0] for key in groups}):
        fd, fedavg, local = (
            groups[(n_devices, "fd")],
            groups[(n_devices, "fedavg")],
            groups[(n_devices, "local")],
        )
        if not fd or not fedavg:
            continue
        parts.append(
            f"| {n_devices} | {len(fd)} | {mean_std([r['accuracy'] for r in local])} | "
            f"{mean_std([r['accuracy'] for r in fd])} | "
            f"{mean_std([r['accuracy'] for r in fedavg])} | {fd[0]['bits']:.3e} | {fedavg[0]['bits']:.3e} | "
            f"{fedavg[0]['bits'] / fd[0]['bits']:.0f} |"
        )
    return "\n".join(parts) + "\n"


def fd_plot(folder: Path) -> None:
    records = _load(folder / "fd_mnist.json")
    if not records:
        return
    plt = _plt()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for protocol, marker in (("fd", "o"), ("fedavg", "s"), ("local", "^")):
        devices = sorted({r["n_devices"] for r in records if r["protocol"] == protocol})
        if not devices:
            continue
        values = [
            [
                r["accuracy"] * 100
                for r in records
                if r["protocol"] == protocol and r["n_devices"] == d
            ]
            for d in devices
        ]
        left.errorbar(
            devices,
            [np.mean(v) for v in values],
            yerr=[np.std(v, ddof=1) if len(v) > 1 else 0 for v in values],
            marker=marker,
            label=protocol,
        )
        biggest = [
            r for r in records if r["protocol"] == protocol and r["n_devices"] == max(devices)
        ]
        curves = np.array([[point["accuracy"] * 100 for point in r["curve"]] for r in biggest])
        bits = [point["bits"] for point in biggest[0]["curve"]]
        if protocol != "local":  # no bits to plot against
            right.plot(
                bits,
                curves.mean(axis=0),
                marker=marker,
                label=f"{protocol}, {max(devices)} devices",
            )
    left.set(xlabel="devices", ylabel="test accuracy (%)", title="FD vs FedAvg")
    right.set(
        xscale="log",
        xlabel="bits moved (cumulative)",
        ylabel="test accuracy (%)",
        title="accuracy vs bits",
    )
    left.legend()
    right.legend()
    figure.tight_layout()
    figure.savefig(folder / "fd_accuracy_bits.png", dpi=110)
    plt.close(figure)


def write_paper_reports(folder: Path, which: str) -> Path:
    """Regenerate ``<which>_tables.md`` (and plots) for "guha", "cpfl" or "fd"."""
    writers = {
        "guha": (guha_tables, guha_plots),
        "cpfl": (cpfl_tables, cpfl_plot),
        "fd": (fd_tables, fd_plot),
    }
    tables, plots = writers[which]
    path = folder / f"{which}_tables.md"
    path.write_text(tables(folder))
    plots(folder)
    return path
