"""What the tabular suite's benchmark runs (:mod:`workers.reproduce.suite`) and its page reports
(:mod:`workers.reproduce.suite_report`): data sets, silo counts, candidates, baselines' learners, where results go."""

from __future__ import annotations

from pathlib import Path

from workers.silo.defaults import DEFAULT_OWN_MODEL

RESULTS_DIR = Path(__file__).resolve().parents[2] / "docs" / "results"
RESULTS = {
    "validation": RESULTS_DIR / "suite_validation.json",
    "test": RESULTS_DIR / "suite_test.json",
}
#: The suite's data sets: name → file under the data directory (CSV rows without a header, class last).
SUITE = {
    **{
        name: f"keel/{name}.dat"
        for name in (
            "twonorm",
            "ring",
            "banana",
            "texture",
            "optdigits",
            "segment",
            "marketing",
            "splice",
            "chess",
            "titanic",
            "page-blocks0",
        )
    },
    "adult": "adult.parquet",
    "magic": "keel/magic.dat",
    "letter": "keel/letter.dat",
    "penbased": "keel/penbased.dat",
}
SILO_COUNTS = (10, 20)
#: The fusions compared: name → (job kind, the job's parameters). Any registered kind is one more line.
CANDIDATES: dict[str, tuple[str, dict]] = {
    "fedkt": ("fedkt", {}),
    "fedkt-auto": ("fedkt", {"vote": "auto"}),
    "ensemble": ("ensemble", {}),
    "distill": ("distill", {}),
    "stack": ("stack", {}),
}
#: What an L0 job launched with the market's defaults runs (``FedKTFusion.level_defaults``: FedKT with
#: ``vote: auto`` where the evaluation split allows it, as it does on every data set here): the targets are judged on it.
DEFAULT_CANDIDATE = "fedkt-auto"
#: A silo's own model on all its rows (the silo baselines) and centralised training: the toolkit's own-model learner.
OWN_MODEL = DEFAULT_OWN_MODEL
CENTRAL_XGBOOST = {"family": "xgboost", "max_depth": 6}  # MAGIC's reference in the FedKT paper
LABEL = "label"
SHARES = {"silo": 0.6, "public": 0.2, "evaluation": 0.1, "test": 0.1}
