"""Table 1 of Jeong et al. 2018 (federated distillation) through the market's FD exchange: simulated silos on
non-IID MNIST run an exchange's rounds over the real HTTP API while a real Celery worker aggregates every round;
the same partition run offline through the simulator gives FD, local-only training and FedAvg beside it.

    nice -n 10 env DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_h4 \\
        CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \\
        .venv/bin/python benchmarks/fd_exchange.py [--devices 5 10] [--rounds 20] [--seeds 0 1 2]

The database in DATABASE_URL is dropped, created and migrated, and the Redis database is purged: give both to
this benchmark alone. Writes ``docs/results/fd_exchange.md`` and ``docs/results/fd_exchange.json``. The defaults (5
and 10 silos, 20 rounds, 3 seeds) take about 6 minutes on the shared 2-core machine.

Setting (the paper's Table 1 non-IID MNIST, as ``docs/results/fd.md`` and ``faug.md``): MNIST-10k, the FedKT split
(7,500 training rows, 1,250 test rows, pixels in [0, 1]); the training rows go IID to N devices and on each,
3 labels drawn at random keep only 5 samples (:func:`workers.reproduce.fd_simulation.starved_partition`).

- *Exchange*: the market runs in its own processes (``manage.py runserver`` and one ``celery worker``), on a
  federation whose N members are the devices. An operator opens an exchange of R rounds with a quorum of all N
  silos. Each silo is a thread of this process with its own API token: per round it waits for the round to open,
  trains its network (:class:`workers.algorithms.fd_local.FDLocalModel`, the zoo MLP 784-128-10, SGD at 0.05,
  batches of 32, β = 1: the simulator's setting) with as many passes over its rows as make about 50 SGD steps,
  uploads its per-label mean logits, waits for the worker to aggregate the round, and downloads its global logits
  (the other silos' average per label). Accuracy: each silo's network on the test split, mean over silos.
- *Offline*: :func:`workers.reproduce.fd_simulation.simulate` on the same partition with the FD reproduction's
  setting (:data:`workers.reproduce.protocols.FD_SETTING`: R rounds of 50 SGD steps): FD, local-only, FedAvg.
- *Bits*: 32-bit numbers, upload plus download, every silo and round: FD moves 2 · C² per silo and round, FL
  (FedAvg) the model twice, 2 · 101,770 numbers. The exchange's bits are counted from the rounds it actually ran
  (participants × payload); the JSON bodies' bytes are given too (what HTTP carried, headers aside).
"""

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from jobs import recreate_database  # noqa: E402  (benchmarks/jobs.py, as scaling.py imports it)

RESULTS = ROOT / "docs" / "results" / "fd_exchange.json"
REPORT = RESULTS.with_suffix(".md")
PLOT = RESULTS.with_name("fd_exchange_accuracy.png")
N_TARGET_LABELS, KEEP = 3, 5
STEPS_PER_ROUND = 50
WAIT_SECONDS = 600
ROUND_DONE = ("aggregated", "missed_quorum")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def market_start(port: int, log: Path) -> list[subprocess.Popen]:
    """The web server and one Celery worker, in their own processes (the environment's database and broker)."""
    output = log.open("ab")
    web = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.celery_app",
            "worker",
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "WARNING",
            "-n",
            "fd-exchange-bench@%h",
        ],
        cwd=ROOT,
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    return [web, worker]


def federation_with_silos(operator, n_devices: int, seed: int):
    """A federation of the ten digits whose members are ``n_devices`` new silo organisations; their tokens."""
    from market.accounts.services import organisation_create, user_create, user_token
    from market.federations.membership import federation_join
    from market.federations.services import federation_create

    federation = federation_create(
        name=f"MNIST FD {n_devices} silos seed {seed}",
        description="Non-IID MNIST: the FD paper's Table 1 setting.",
        class_labels=[str(digit) for digit in range(10)],
        label_column="label",
        allowed_privacy_levels=["L0", "L1"],
        default_privacy_level="L1",
        default_parameters={},
        policies={"membership_policy": "open"},  # the simulated devices join by themselves
        created_by=operator,
    )
    tokens = []
    for index in range(n_devices):
        user = user_create(
            username=f"fd{n_devices}-seed{seed}-silo-{index}",
            password=f"fd{n_devices}-seed{seed}-silo-{index}-password",
            organisation=organisation_create(name=f"FD {n_devices} seed {seed} silo {index}"),
        )
        federation_join(federation=federation, user=user)
        tokens.append(user_token(user=user))
    return federation, tokens


def silo_model(n_rows: int, seed: int):
    """A silo's network, with as many passes over its ``n_rows`` rows per round as make about 50 SGD steps (built
    before the silos' threads start: seeding a module forks torch's global random state)."""
    from workers.algorithms.fd_local import FDLocalModel, FDLocalSetting

    return FDLocalModel(
        n_features=784,
        n_classes=10,
        seed=seed,
        setting=FDLocalSetting(
            hidden_sizes=(128,),
            epochs=max(1, round(STEPS_PER_ROUND * 32 / n_rows)),
            batch_size=32,
            learning_rate=0.05,
            beta=1.0,
        ),
    )


def silo_rounds(client, model, exchange_id: int, rounds: int, features, labels, test_x, test_y):
    """One silo's whole exchange through the API; its accuracy after each round and the bytes it moved."""
    import numpy as np

    global_logits = available = None
    curve, uploaded_bytes, downloaded_bytes, statuses = [], 0, 0, []
    for number in range(1, rounds + 1):
        client.exchange_round_wait(
            exchange_id,
            number,
            statuses=("open", *ROUND_DONE),
            timeout_seconds=WAIT_SECONDS,
            interval_seconds=0.5,
        )
        model.train_round(features, labels, global_logits=global_logits, available=available)
        logits, present = model.label_logits(features, labels)
        body = {"labels": np.flatnonzero(present).tolist(), "logits": logits.tolist()}
        client.exchange_logits_upload(exchange_id, number, **body)
        uploaded_bytes += len(json.dumps(body))
        closed = client.exchange_round_wait(
            exchange_id,
            number,
            statuses=ROUND_DONE,
            timeout_seconds=WAIT_SECONDS,
            interval_seconds=0.5,
        )
        statuses.append(closed["status"])
        global_logits = available = None
        if closed["status"] == "aggregated":
            download = client.exchange_download(exchange_id, number)
            downloaded_bytes += len(json.dumps(download))
            global_logits = np.asarray(download["global_logits"])
            available = np.asarray(download["available"])
        curve.append(float(np.mean(model.predict(test_x) == test_y)))
    return {
        "accuracy": curve[-1],
        "curve": curve,
        "statuses": statuses,
        "epochs_per_round": model.setting.epochs,
        "steps_per_round": model.setting.epochs * math.ceil(len(labels) / 32),
        "rows": int(len(labels)),
        "uploaded_bytes": uploaded_bytes,
        "downloaded_bytes": downloaded_bytes,
    }


def exchange_run(
    url: str, operator_token: str, n_devices: int, rounds: int, data, devices, operator, seed: int
):
    """Open an exchange for ``n_devices`` new silos and run every silo's rounds at once over HTTP."""
    import numpy as np
    from django.db.models import Count

    from market.exchanges.models import ExchangeRound
    from workers.silo.client import OnefoldClient

    federation, tokens = federation_with_silos(operator, n_devices, seed)
    exchange = OnefoldClient(url, operator_token).exchange_create(
        federation=federation.slug,
        name=f"Table 1, {n_devices} silos, seed {seed}",
        rounds=rounds,
        round_seconds=3600,
        min_silos=n_devices,
    )
    models = [
        silo_model(len(rows), 10_000 * seed + 100 * n_devices + index)
        for index, rows in enumerate(devices)
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_devices) as pool:
        futures = [
            pool.submit(
                silo_rounds,
                OnefoldClient(url, token, timeout_seconds=120),
                model,
                exchange["id"],
                rounds,
                data.train_x[rows],
                data.train_y[rows],
                data.test_x,
                data.test_y,
            )
            for token, rows, model in zip(tokens, devices, models)
        ]
        silos = [future.result() for future in futures]
    wall_seconds = time.perf_counter() - started
    closed = list(
        ExchangeRound.objects.filter(exchange_id=exchange["id"])
        .annotate(participants=Count("uploads"))
        .order_by("number")
        .values_list("status", "participants")
    )
    return {
        "exchange": exchange["id"],
        "accuracy": float(np.mean([silo["accuracy"] for silo in silos])),
        "accuracy_std": float(np.std([silo["accuracy"] for silo in silos])),
        "curve": np.mean([silo["curve"] for silo in silos], axis=0).tolist(),
        "rounds": [{"status": status, "participants": count} for status, count in closed],
        "bits": sum(2 * count * 10 * 10 * 32 for status, count in closed if status == "aggregated"),
        "json_bytes": sum(silo["uploaded_bytes"] + silo["downloaded_bytes"] for silo in silos),
        "steps_per_round": [silo["steps_per_round"] for silo in silos],
        "rows": [silo["rows"] for silo in silos],
        "wall_seconds": wall_seconds,
    }


def offline_run(data, devices, rounds: int, seed: int) -> dict:
    from dataclasses import replace

    from workers.reproduce.fd_simulation import simulate
    from workers.reproduce.protocols import FD_SETTING

    setting = replace(FD_SETTING, rounds=rounds)
    results = {}
    for protocol in ("local", "fd", "fedavg"):
        result = simulate(
            protocol,
            data.train_x,
            data.train_y,
            devices,
            data.test_x,
            data.test_y,
            n_classes=10,
            setting=setting,
            seed=seed,
        )
        results[protocol] = {
            "accuracy": result["accuracy"],
            "bits": result["bits"],
            "n_parameters": result["n_parameters"],
        }
    return results


def mean_std(values) -> str:
    import numpy as np

    return f"{100 * np.mean(values):.1f} ± {100 * np.std(values):.1f}"


def report(arguments, records: list[dict], began: str) -> str:
    seeds = " ".join(map(str, arguments.seeds))
    lines = [
        "# Federated distillation through the market's FD exchange: the paper's Table 1 setting",
        "",
        f"Command (run {began} UTC, on the shared 2-core machine):",
        "",
        "```",
        "nice -n 10 env DATABASE_URL=postgres://postgres@127.0.0.1:5432/onefold_h4 \\",
        "    CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \\",
        f"    .venv/bin/python benchmarks/fd_exchange.py --devices {' '.join(map(str, arguments.devices))} "
        f"--rounds {arguments.rounds} --seeds {seeds}",
        "```",
        "",
        "Protocol: the module docstring of `benchmarks/fd_exchange.py`; raw numbers (per seed, with per-round "
        "curves) in [`fd_exchange.json`](fd_exchange.json). Non-IID MNIST-10k: training rows IID over the silos, "
        f"on each {N_TARGET_LABELS} labels drawn at random keep {KEEP} samples; {arguments.rounds} rounds. Test "
        "accuracy in %, each silo's own network on the 1,250 test rows (FD, local) or the global model (FedAvg), "
        f"mean ± standard deviation over seeds {seeds} (each seed redraws the split, the partition and every "
        "network). Bits per run: the same for every seed. Accuracy per round: "
        "[`fd_exchange_accuracy.png`](fd_exchange_accuracy.png).",
        "",
        "| silos | rounds aggregated | **FD through the exchange** | FD offline (simulator) | exchange − "
        "offline, per seed | local only | FL (FedAvg) | FD bits | FL bits | FL ÷ FD bits | JSON bytes over "
        "HTTP | wall time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n_devices in arguments.devices:
        rows = [record for record in records if record["n_devices"] == n_devices]
        exchanges = [row["exchange"] for row in rows]
        offline = [row["offline"] for row in rows]
        aggregated = sum(
            item["status"] == "aggregated" for exchange in exchanges for item in exchange["rounds"]
        )
        differences = ", ".join(
            f"{100 * (exchange['accuracy'] - run['fd']['accuracy']):+.1f}"
            for exchange, run in zip(exchanges, offline)
        )
        fd_bits, fl_bits = exchanges[0]["bits"], offline[0]["fedavg"]["bits"]
        lines.append(
            f"| {n_devices} | {aggregated} / {sum(len(e['rounds']) for e in exchanges)} "
            f"| **{mean_std([e['accuracy'] for e in exchanges])}** "
            f"| {mean_std([run['fd']['accuracy'] for run in offline])} | {differences} "
            f"| {mean_std([run['local']['accuracy'] for run in offline])} "
            f"| {mean_std([run['fedavg']['accuracy'] for run in offline])} "
            f"| {fd_bits:.3g} | {fl_bits:.3g} | {fl_bits / fd_bits:,.0f} "
            f"| {round(sum(e['json_bytes'] for e in exchanges) / len(exchanges)):,} "
            f"| {sum(e['wall_seconds'] for e in exchanges) / len(exchanges):.0f} s |"
        )
    return "\n".join(lines) + "\n"


def plot(records: list[dict], path: Path) -> None:
    """Mean test accuracy per round through the exchange, one panel per number of silos, with the offline FD,
    local-only and FedAvg accuracies of the same partitions as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    counts = sorted({record["n_devices"] for record in records})
    figure, axes = plt.subplots(1, len(counts), figsize=(5 * len(counts), 3.6), squeeze=False)
    for axis, n_devices in zip(axes[0], counts):
        rows = [record for record in records if record["n_devices"] == n_devices]
        curve = 100 * np.mean([row["exchange"]["curve"] for row in rows], axis=0)
        axis.plot(range(1, len(curve) + 1), curve, marker=".", label="FD through the exchange")
        for name, label, style in (
            ("fd", "FD offline (final)", "--"),
            ("local", "local only", ":"),
            ("fedavg", "FedAvg", "-."),
        ):
            mean = 100 * np.mean([row["offline"][name]["accuracy"] for row in rows])
            axis.axhline(
                mean, linestyle=style, color="grey" if name != "fedavg" else "black", label=label
            )
        axis.set(
            title=f"{n_devices} silos, mean of {len(rows)} seeds",
            xlabel="round",
            ylabel="test accuracy (%)",
        )
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--plot-only", action="store_true", help="only redraw the plot from the saved runs"
    )
    arguments = parser.parse_args()
    if arguments.plot_only:
        plot(json.loads(RESULTS.read_text())["runs"], PLOT)
        return
    os.environ.setdefault("ONEFOLD_DEBUG", "true")
    os.environ.setdefault("ONEFOLD_LOG_LEVEL", "WARNING")
    os.environ.setdefault("ONEFOLD_MEDIA_ROOT", str(ROOT / "var" / "bench-fd-media"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "market.settings")
    recreate_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    import torch

    from market.accounts.services import user_create, user_token
    from workers.celery_app import app
    from workers.datasets import load_dataset
    from workers.reproduce.fd_simulation import starved_partition
    from workers.simulation import market_wait

    torch.set_num_threads(1)
    app.control.purge()
    began = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    processes = market_start(port, ROOT / "var" / "bench-fd-exchange.log")
    try:
        market_wait(url, timeout_seconds=120)
        operator = user_create(
            username="fd-operator", password="fd-operator-password", is_operator=True
        )
        operator_token = user_token(user=operator)
        records = []
        for seed in arguments.seeds:
            data = load_dataset("mnist", seed=seed)
            for n_devices in arguments.devices:
                devices = starved_partition(
                    data.train_y, n_devices, n_starved=N_TARGET_LABELS, keep=KEEP, seed=seed
                )
                exchange = exchange_run(
                    url, operator_token, n_devices, arguments.rounds, data, devices, operator, seed
                )
                offline = offline_run(data, devices, arguments.rounds, seed)
                print(
                    f"seed {seed}, {n_devices} silos: exchange {exchange['accuracy']:.4f} in "
                    f"{exchange['wall_seconds']:.0f} s; offline "
                    + ", ".join(f"{name} {run['accuracy']:.4f}" for name, run in offline.items()),
                    file=sys.stderr,
                )
                records.append(
                    {"seed": seed, "n_devices": n_devices, "exchange": exchange, "offline": offline}
                )
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
    RESULTS.write_text(json.dumps({"arguments": vars(arguments), "runs": records}, indent=1) + "\n")
    REPORT.write_text(report(arguments, records, began))
    plot(records, PLOT)
    print(REPORT.read_text())


if __name__ == "__main__":
    main()
