"""``docs/results/suite.md`` from the suite's saved results (:mod:`workers.reproduce.suite`, issue 31).

Everything on the page is computed from ``suite_validation.json`` and ``suite_test.json``: the protocol and
commands, the issue's targets judged on the test runs of :data:`~workers.reproduce.suite.DEFAULT_CANDIDATE`, every
candidate against the same targets (on validation rows: what defaults are chosen on; on the test split: the
report), and per data set and silo count the accuracy and balanced accuracy of every model, mean ± sd over seeds.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from workers.reproduce.report import mean_std
from workers.reproduce.suite_settings import (
    CANDIDATES,
    CENTRAL_XGBOOST,
    DEFAULT_CANDIDATE,
    OWN_MODEL,
    RESULTS,
    RESULTS_DIR,
    SUITE,
)

PAGE = RESULTS_DIR / "suite.md"
#: The same harness on validation rows before issue 31's fusions, own models and adaptive FedKT were merged.
BEFORE = RESULTS_DIR / "suite_validation_before.json"
METRICS = ("accuracy", "balanced_accuracy")
BASELINES = ("majority", "average_silo", "best_silo", "centralised")
HEADINGS = {
    "majority": "majority",
    "average_silo": "average silo",
    "best_silo": "best silo",
    "centralised": "centralised",
}
COMMANDS = """```sh
nice -n 10 python -m workers.reproduce.suite --test --seeds 3     # the test split, read once for the report
nice -n 10 python -m workers.reproduce.suite --seeds 1            # validation rows only: seed 0...
nice -n 10 python -m workers.reproduce.suite --first-seed 1 --seeds 2   # ...then seeds 1 and 2
python -m workers.reproduce.suite --summary                       # this page, from the JSON files
```

Both ran in this order after the merge of issue 31's fusions, own models and adaptive FedKT; the defaults they
judge were chosen before, on validation rows (the stacked fusion's in [stack.md](stack.md), the toolkit's own model's
by `benchmarks/own_model_defaults.py`), and nothing was chosen from the test run. A full `--seeds 3` validation pass
of this harness before the merge is kept in `suite_validation_before.json` (below)."""


def _mean_sd(values, metric: str) -> str:
    """Mean ± sd (ddof 1) of ``metric`` values: accuracy in % to 2 decimals, balanced accuracy to 3."""
    if metric == "accuracy":
        return mean_std(values, scale=100)
    values = np.asarray(list(values), dtype=float)
    return f"{values.mean():.3f} ± {values.std(ddof=1) if values.size > 1 else 0.0:.3f}"


def _load(path: Path) -> list[dict]:
    return json.loads(path.read_text()) if path.exists() else []


def _settings(runs: Sequence[Mapping]) -> dict[tuple[str, int], list[Mapping]]:
    """Runs grouped by (data set, silo count), in the suite's order."""
    grouped: dict[tuple[str, int], list[Mapping]] = defaultdict(list)
    for run in runs:
        grouped[run["dataset"], run["silos"]].append(run)
    return dict(
        sorted(grouped.items(), key=lambda item: (list(SUITE).index(item[0][0]), item[0][1]))
    )


def _score(run: Mapping, model: str, metric: str) -> float:
    return (run["candidates"] if model in run["candidates"] else run["baselines"])[model][metric]


def _margin(runs: Sequence[Mapping], model: str, reference: str, metric: str) -> float:
    """Mean over the runs of ``model`` minus ``reference`` (``metric``)."""
    return float(
        np.mean([_score(run, model, metric) - _score(run, reference, metric) for run in runs])
    )


def candidate_targets(runs: Sequence[Mapping], model: str) -> dict:
    """``model`` against the issue's targets over the runs' settings (means over seeds per setting)."""
    settings = _settings(runs)
    versus_best = {
        metric: [_margin(mine, model, "best_silo", metric) for mine in settings.values()]
        for metric in METRICS
    }
    magic = {
        silos: _margin(mine, model, "centralised_xgboost", "accuracy")
        for (name, silos), mine in settings.items()
        if name == "magic" and all("centralised_xgboost" in run["baselines"] for run in mine)
    }
    return {
        "settings": len(settings),
        "at_least_best": {
            metric: sum(value >= 0 for value in versus_best[metric]) for metric in METRICS
        },
        "both_at_least_best": sum(
            a >= 0 and b >= 0
            for a, b in zip(versus_best["accuracy"], versus_best["balanced_accuracy"])
        ),
        "mean_versus_best": {metric: float(np.mean(versus_best[metric])) for metric in METRICS},
        "mean_versus_centralised": {
            metric: float(
                np.mean([_margin(mine, model, "centralised", metric) for mine in settings.values()])
            )
            for metric in METRICS
        },
        "magic_versus_xgboost": magic,
    }


def _measured(runs: Sequence[Mapping], model: str) -> list[tuple[str, str]]:
    """``(measured, verdict)`` of ``model`` for the first three targets of the issue."""
    judged = candidate_targets(runs, model)
    n, both = judged["settings"], judged["both_at_least_best"]
    best, central = judged["mean_versus_best"], judged["mean_versus_centralised"]
    magic = judged["magic_versus_xgboost"]
    return [
        (
            f"≥ in accuracy in {judged['at_least_best']['accuracy']} of {n} settings, in balanced accuracy in "
            f"{judged['at_least_best']['balanced_accuracy']} of {n}, in both in {both} of {n}; mean "
            f"{best['accuracy'] * 100:+.2f} points of accuracy, {best['balanced_accuracy']:+.3f} balanced",
            "met" if both == n and best["accuracy"] >= 0.02 else "missed",
        ),
        (
            f"{central['accuracy'] * 100:+.2f} points of accuracy, {central['balanced_accuracy']:+.3f} balanced",
            "met" if central["accuracy"] >= -0.03 else "missed",
        ),
        (
            "; ".join(
                f"{silos} silos: {points * 100:+.2f} points" for silos, points in magic.items()
            )
            if magic
            else "MAGIC not run",
            ("met" if min(magic.values()) >= -0.03 else "missed") if magic else "not run",
        ),
    ]


def targets_table(runs: Sequence[Mapping]) -> str:
    """The issue's targets table, judged on :data:`DEFAULT_CANDIDATE`."""
    if not runs:
        return "No test runs yet."
    measured = _measured(runs, DEFAULT_CANDIDATE)
    measures = [
        (
            f"L0 global model (`{DEFAULT_CANDIDATE}`) vs the best single silo (its own model on all its rows), "
            "every data set at every silo count",
            "≥ best silo in accuracy and balanced accuracy in every setting; on average ≥ best silo + 2 points",
        ),
        ("L0 global model vs centralised training, mean over the suite", "within 3 points"),
        ("MAGIC FedKT-L0 vs centralised XGBoost", "within 3 points"),
    ]
    lines = [
        f"| measure | target | measured (test split; {_coverage(runs)}) | verdict |",
        "|---|---|---|---|",
        *(
            f"| {measure} | {target} | {text} | **{verdict}** |"
            for (measure, target), (text, verdict) in zip(measures, measured)
        ),
        "| the demo's global model | ≥ best silo in accuracy and balanced accuracy | not measured by this "
        "harness (`make demo`, Adult with 20 silos, through the market) | — |",
    ]
    return "\n".join(lines)


def _coverage(runs: Sequence[Mapping]) -> str:
    """What the runs cover: data sets, silo counts, and which seeds ran in how many settings."""
    names = sorted({run["dataset"] for run in runs}, key=list(SUITE).index)
    silos = sorted({run["silos"] for run in runs})
    settings = len({(run["dataset"], run["silos"]) for run in runs})
    per_seed = Counter(run["seed"] for run in runs)
    seeds = ", ".join(
        f"seed {seed} in {'all' if count == settings else count} settings"
        for seed, count in sorted(per_seed.items())
    )
    return (
        f"{len(names)} of {len(SUITE)} data sets, {' and '.join(map(str, silos))} silos, {settings} settings; "
        f"{seeds}; per setting the mean over its seeds"
    )


def candidates_table(runs: Sequence[Mapping], default: str = DEFAULT_CANDIDATE) -> str:
    """Every candidate against the targets, on the runs given (validation rows or the test split)."""
    if not runs:
        return "No runs yet."
    lines = [
        "| candidate | job kind and parameters | settings ≥ best silo (accuracy / balanced / both) | "
        "mean vs best silo (points / balanced) | mean vs centralised (points / balanced) |",
        "|---|---|---|---|---|",
    ]
    for name in [name for name in CANDIDATES if all(name in run["candidates"] for run in runs)]:
        judged = candidate_targets(runs, name)
        kind, params = CANDIDATES[name]
        at_least, best, central = (
            judged["at_least_best"],
            judged["mean_versus_best"],
            judged["mean_versus_centralised"],
        )
        lines.append(
            f"| {name}{' (default)' if name == default else ''} | `{kind}` `{json.dumps(params)}` | "
            f"{at_least['accuracy']} / {at_least['balanced_accuracy']} / {judged['both_at_least_best']} of "
            f"{judged['settings']} | {best['accuracy'] * 100:+.2f} / {best['balanced_accuracy']:+.3f} | "
            f"{central['accuracy'] * 100:+.2f} / {central['balanced_accuracy']:+.3f} |"
        )
    return "\n".join(lines)


def settings_table(runs: Sequence[Mapping], metric: str) -> str:
    """Per data set and silo count: every baseline and candidate, mean ± sd over seeds of ``metric``."""
    if not runs:
        return "No runs yet."
    names = [name for name in CANDIDATES if all(name in run["candidates"] for run in runs)]
    columns = [*BASELINES[:3], *names, BASELINES[3]]
    lines = [
        "| data set | silos (uploaded) | seeds | "
        + " | ".join(HEADINGS.get(column, f"`{column}`") for column in columns)
        + f" | `{DEFAULT_CANDIDATE}` − best silo |",
        "|---|---|---|" + "---|" * (len(columns) + 1),
    ]
    for (name, silos), mine in _settings(runs).items():
        uploaded = f"{np.mean([run['silos_uploaded'] for run in mine]):.3g}"
        cells = [
            _mean_sd((_score(run, column, metric) for run in mine), metric) for column in columns
        ]
        margin = _mean_sd(
            (
                _score(run, DEFAULT_CANDIDATE, metric) - _score(run, "best_silo", metric)
                for run in mine
            ),
            metric,
        )
        extra = (
            f" (XGBoost {_mean_sd((run['baselines']['centralised_xgboost'][metric] for run in mine), metric)})"
            if all("centralised_xgboost" in run["baselines"] for run in mine)
            else ""
        )
        cells[-1] += extra
        lines.append(
            f"| {name} | {silos} ({uploaded}) | {len(mine)} | "
            + " | ".join(cells)
            + f" | {margin} |"
        )
    return "\n".join(lines)


def facts(runs: Sequence[Mapping]) -> list[str]:
    """Sentences the notes state from the runs: refused silos, own models, auto's choices, time."""
    if not runs:
        return []
    refused = sum(run["silos"] - run["silos_uploaded"] for run in runs)
    total = sum(run["silos"] for run in runs)
    own = sum(run.get("silos_uploading_own_model", 0) for run in runs)
    chosen = Counter(
        entry["chosen"]
        for run in runs
        for entry in run["candidates"].values()
        if entry.get("chosen")
    )
    sentences = sorted(
        {re.sub(r"^\d+ ", "", reason) for run in runs for reason in run["silo_refusals"]}
    )
    hours = sum(run["wall_seconds"] for run in runs) / 3600
    return [
        f"{refused} of {total} silos ({refused / total:.0%}) could not train with the toolkit's defaults and "
        "uploaded nothing (the toolkit said: "
        + "; ".join(f"“{sentence}”" for sentence in sentences)
        + "); they still count in the average and best silo, with their own models."
        if refused
        else "Every silo trained with the toolkit's defaults.",
        f"{own} of {total} silos uploaded their own model beside their students (the toolkit's, trained on the "
        "four fifths of their rows it does not hold out); the silo baselines refit it on all their rows.",
        "auto's choices: "
        + ", ".join(f"{name} {count}" for name, count in chosen.most_common())
        + "."
        if chosen
        else "No candidate chose on the evaluation split.",
        f"{len(runs)} runs took {hours:.2f} h of wall time in one process on the shared 2-core machine.",
        *_short_of_seeds(runs),
        *_below_best_silo(runs),
    ]


def _below_best_silo(runs: Sequence[Mapping]) -> list[str]:
    """A sentence naming the settings where the default is below the best silo, with both margins."""
    below = [
        f"{name} ({silos} silos): {accuracy * 100:+.2f} points / {balanced:+.3f}"
        for (name, silos), mine in _settings(runs).items()
        for accuracy, balanced in [
            (_margin(mine, DEFAULT_CANDIDATE, "best_silo", metric) for metric in METRICS)
        ]
        if accuracy < 0 or balanced < 0
    ]
    if not below:
        return []
    return [
        f"Where `{DEFAULT_CANDIDATE}` is below the best silo (accuracy points / balanced accuracy, mean over "
        f"seeds): {'; '.join(below)}."
    ]


def _short_of_seeds(runs: Sequence[Mapping]) -> list[str]:
    """A sentence naming the settings that ran fewer seeds than the others, if any."""
    seeds = Counter((run["dataset"], run["silos"]) for run in runs)
    most = max(seeds.values())
    short = [
        f"{name} ({silos} silos): {count}" for (name, silos), count in seeds.items() if count < most
    ]
    if not short:
        return []
    return [
        f"Not every setting ran {most} seeds in the session's time (seeds run outermost, so each seed covers the "
        f"whole suite before the next starts); settings with fewer: {', '.join(short)}."
    ]


def summary(
    validation: Sequence[Mapping], test: Sequence[Mapping], before: Sequence[Mapping] = ()
) -> str:
    """The page's Markdown."""
    scored = test or validation
    sections = [
        "# The tabular benchmark suite: every fusion against what a silo could do alone (issue 31)",
        _protocol(),
        "## Commands\n\n" + COMMANDS,
        "## The issue's targets\n\n" + targets_table(test),
        "## Every candidate against the targets\n\n"
        "On the test split (the report; read once):\n\n"
        + candidates_table(test)
        + "\n\nOn validation rows (a sixth of the silo rows held out; what defaults are chosen on; "
        + (_coverage(validation) if validation else "none yet")
        + "):\n\n"
        + candidates_table(validation)
        + "\n\nOn validation rows before issue 31's fusions, own models and adaptive FedKT were merged (the same "
        "harness; silos uploaded FedKT students with s = 2, t = 5 or nothing; "
        + (_coverage(before) if before else "not run")
        + f"; [`{BEFORE.name}`]({BEFORE.name})):\n\n"
        + candidates_table(before, default="fedkt"),  # the L0 default before the merge
        f"## Per data set and silo count ({'test split' if test else 'validation rows'})\n\n"
        "Accuracy (%), mean ± sd over seeds:\n\n"
        + settings_table(scored, "accuracy")
        + "\n\nBalanced accuracy, mean ± sd over seeds:\n\n"
        + settings_table(scored, "balanced_accuracy"),
        "## Notes\n\n" + "\n".join(f"- {sentence}" for sentence in [*facts(scored), *NOTES]),
    ]
    return "\n\n".join(sections) + "\n"


def _protocol() -> str:
    return (
        "## Protocol\n\n"
        f"Data sets: {', '.join(SUITE)} (`../shared/data/README.md`). Per data set and seed (0, 1, 2): a stratified "
        "split into silo rows (60 %), public rows with their labels dropped (20 %), the federation's evaluation "
        "split (10 %) and the test split (10 %); the feature specification is inferred on the public rows; the "
        "silo rows are dealt to 10 and 20 silos by a Dirichlet(0.5) label partition, at least 10 rows each. Every "
        "silo trains through the toolkit's own training function with its defaults "
        "(`workers.silo.training.silo_train`, what `onefold train` runs: FedKT students with s and t chosen for its rows, and its own model); a silo it refuses uploads "
        "nothing. Every candidate then runs through the market's engine as a job does "
        "(`algorithm_get(kind).validate`, `select`, `member_signal` per member, the sum, `fuse`, with the "
        "evaluation split where the kind reads it, and each member's own signal as the chunks keep it). FedKT "
        "votes with a silo's students; the ensemble, distillation and the stacked fusion read its best model, its "
        "own model (`workers.algorithms.registry.member_probabilities_split`). Candidates: "
        + ", ".join(
            f"`{name}` (`{kind}` `{json.dumps(params)}`)"
            for name, (kind, params) in CANDIDATES.items()
        )
        + "; the targets are judged on the one an L0 job launched with the market's defaults runs, "
        f"`{DEFAULT_CANDIDATE}`. Baselines: the majority class of the pooled silo rows; each "
        "silo's own model refitted on all its rows (a random forest "
        f"`{json.dumps(OWN_MODEL)}`, the toolkit's own-model learner): their average, and the best silo, the one with the best accuracy on the "
        f"evaluation split; centralised training, the same forest on all silo rows pooled (MAGIC also XGBoost "
        f"`{json.dumps(CENTRAL_XGBOOST)}`). With `--test` every model is scored on the test split, which nothing "
        "else reads; without it the test split is never read and a stratified sixth of the silo rows, held out "
        "before the partition, plays its role (the silos share the other five sixths). A candidate that chose on "
        "the evaluation split or fitted on it (`auto`, `stack`) is also reported by its job on the other half only (`job_evaluation` in "
        "the JSON); the test split is never among the rows a choice reads. Raw numbers: "
        f"[`{RESULTS['validation'].name}`]({RESULTS['validation'].name}), "
        f"[`{RESULTS['test'].name}`]({RESULTS['test'].name})."
    )


#: Notes no number can state (the numbers are in the sentences of :func:`facts` and the tables).
NOTES: list[str] = [
    "The targets are judged on what an L0 job launched with the market's defaults runs "
    f"(`{DEFAULT_CANDIDATE}`: {CANDIDATES[DEFAULT_CANDIDATE][0]} with `{json.dumps(CANDIDATES[DEFAULT_CANDIDATE][1])}`); "
    "the tables show every other candidate against the same references, so a better candidate is visible even "
    "where the default misses.",
    "`auto` chooses on accuracy (its selection criterion), not balanced accuracy: the per-setting tables show "
    "where another candidate has the higher balanced accuracy.",
    "The harness runs the market's engine in one process, not through HTTP, Celery and the sandbox: it scores "
    "the fitted global model's own predictions, where a job scores its exported ONNX file (which the job checks "
    "against them) and a buyer downloads that file.",
    "The best silo is the one whose own model scores best on the evaluation split, which the market holds, and "
    "it is then scored on the test split like every other model: the best silo as the market could pick it, "
    "not one picked on the rows it is scored on.",
    "The split reads every row's class, the test split's too, only to stratify: which rows go where. Nothing "
    "is fitted, chosen or scored on a test row without `--test`; a test checks that garbage in the test "
    "split's rows leaves validation results unchanged.",
    "In validation mode the silos share five sixths of the silo rows (the other sixth is scored), so their "
    "numbers are for slightly smaller silos than the test run's.",
    f"`{BEFORE.name}` was written by `python -m workers.reproduce.suite --seeds 3` at commit 37ce665 (before the "
    "merge of issue 31's fusions, own models and adaptive FedKT), where the L0 default was `fedkt` "
    "(consistent_hard) and a silo the toolkit refused (fewer than 50 training rows for s = 2, t = 5) uploaded "
    "nothing.",
    '50 silos ("where the rows allow") were not run: the runs had to fit the session\'s time on a shared '
    "2-core machine.",
]


def summary_write(path: Path = PAGE) -> Path:
    """Write the page from the saved results; returns its path."""
    path.write_text(summary(_load(RESULTS["validation"]), _load(RESULTS["test"]), _load(BEFORE)))
    return path
