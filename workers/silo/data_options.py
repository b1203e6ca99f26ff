"""The options of the commands that read the silo's own table (``train``, ``statistics``, ``fd``, ``seeds``,
``augment``), as rows of :mod:`workers.silo.option_table`; the options they share are written once, here."""

from __future__ import annotations

from pathlib import Path

from workers.modelio.families import LEARNER_FAMILY_NAMES
from workers.silo.defaults import (
    DEFAULT_OWN_MODEL,
    DEFAULT_PARTITIONS,
    DEFAULT_STUDENT,
    DEFAULT_TEACHER,
    DEFAULT_TEACHERS,
    MIN_ROWS_PER_TEACHER,
    MIN_TRAINING_ROWS,
    learner_described,
)
from workers.silo.options import OneOf, option

FEDERATION_SLUG = option("federation", help="federation slug (as in `federations`)")
DATA = option("--data", required=True, type=Path, help="your labelled table: CSV, Parquet or NPZ")
PULLED = option(
    "--pulled", type=Path, help="folder written by `pull` (default: ./onefold-<federation>)"
)
LABEL_COLUMN = option("--label-column", help="column with your labels (default: the federation's)")
TARGET_LABEL = option(
    "--target-label",
    action="append",
    default=[],
    metavar="LABEL",
    help="a label you lack, repeatable (as the federation names its classes)",
)

TRAINING_OPTIONS = (
    FEDERATION_SLUG,
    DATA,
    PULLED,
    option(
        "--output",
        type=Path,
        help="folder for the students and metadata.json (default: ./onefold-<federation>/students)",
    ),
    LABEL_COLUMN,
    option(
        "-s",
        "--partitions",
        type=int,
        default=None,
        help=f"FedKT's s: partitions, one student each (default {DEFAULT_PARTITIONS}; 1 when your rows "
        "allow only one teacher)",
    ),
    option(
        "-t",
        "--teachers",
        type=int,
        default=None,
        help=f"FedKT's t: teachers per partition (default: as many as your training rows give "
        f"{MIN_ROWS_PER_TEACHER} rows each, at most {DEFAULT_TEACHERS}, at least 1)",
    ),
    option(
        "--teacher",
        help=f"teacher family ({', '.join(LEARNER_FAMILY_NAMES)}; default: {learner_described(DEFAULT_TEACHER)})",
    ),
    option(
        "--teacher-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="teacher hyperparameter, repeatable (e.g. n_estimators=50); a family other than the default "
        "starts from that family's own settings (random_forest and xgboost: 100 trees)",
    ),
    option(
        "--student",
        help=f"student (or --local model) family (default: {learner_described(DEFAULT_STUDENT)})",
    ),
    option(
        "--student-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="student hyperparameter, repeatable (e.g. max_depth=8)",
    ),
    option(
        "--privacy-level",
        choices=["L0", "L1", "L2"],
        default=None,
        help="L0/L1: no party noise; L2: noise on your teachers' votes (needs --gamma or --sigma), "
        "or with --local a network trained with DP-SGD (--noise-multiplier or --target-epsilon); "
        "default: the federation's default level, which the upload page preselects too",
    ),
    option("--gamma", type=float, help="L2 Laplace noise parameter γ (larger: less noise, more ε)"),
    option("--sigma", type=float, help="L2 Gaussian noise scale σ"),
    option("--delta", type=float, default=1e-5, help="δ of the declared (ε, δ) (default 1e-5)"),
    option(
        "--noise-multiplier",
        type=float,
        help="L2 with --local: DP-SGD noise multiplier σ (Opacus; "
        "--student mlp or cnn, batch_size and epochs as "
        "--student-param)",
    ),
    option(
        "--target-epsilon",
        type=float,
        help="L2 with --local: solve the DP-SGD noise multiplier for "
        "this ε instead (the market's RDP accountant)",
    ),
    option(
        "--max-grad-norm",
        type=float,
        default=1.0,
        help="DP-SGD per-example clipping norm (default 1)",
    ),
    option(
        "--queries",
        default="1.0",
        help="public rows labelled per partition: a count, or a fraction "
        "with a decimal point (default 1.0: all)",
    ),
    option(
        "--validation-fraction",
        type=float,
        default=0.2,
        help="share of your rows held out to score the students (default 0.2)",
    ),
    option(
        "--min-rows-per-teacher",
        type=int,
        default=MIN_ROWS_PER_TEACHER,
        help=f"refuse to train teachers on fewer rows (default {MIN_ROWS_PER_TEACHER}; one teacher "
        f"trains on {MIN_TRAINING_ROWS} or more)",
    ),
    option(
        "--own-model",
        help=f"family of your own model on all your training rows, uploaded beside the students where the "
        f"federation accepts own models, at L0 (default: {learner_described(DEFAULT_OWN_MODEL)})",
    ),
    option(
        "--own-model-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="own model hyperparameter, repeatable (e.g. max_depth=12)",
    ),
    option(
        "--no-own-model",
        action="store_true",
        help="train and upload the FedKT students only",
    ),
    option("--seed", type=int, default=0, help="seed of shuffles and models (never of DP noise)"),
    option(
        "--local",
        action="store_true",
        help="train one local model (for ensembles) instead of FedKT students",
    ),
    option(
        "--strict",
        action="store_true",
        help="refuse (exit 3, nothing written) when a model does not beat always answering the majority class "
        "on the held-out rows, in accuracy and balanced accuracy",
    ),
    option(
        "--fd-logits",
        action="store_true",
        help="also write fd-logits.json: per-label average logits for federated distillation",
    ),
)

STATISTICS_OPTIONS = (
    FEDERATION_SLUG,
    DATA,
    PULLED,
    option(
        "--output",
        type=Path,
        help="JSON file to write (default: ./onefold-<federation>/statistics.json)",
    ),
    LABEL_COLUMN,
    option(
        "--privacy-level",
        choices=["L0", "L2"],
        help="L0 (exact statistics) or L2 (your own Gaussian noise; default: the federation's level)",
    ),
    option("--epsilon", type=float, help="L2: the example-level ε your noise may cost (e.g. 1)"),
    option("--delta", type=float, default=1e-5, help="L2: δ (default 1e-5)"),
    option(
        "--clip-norm",
        type=float,
        help="clip each encoded row to this norm where the federation sets none (default 2)",
    ),
    option(
        "--naive-bayes",
        action="store_true",
        help="also release per-class squares (naive Bayes reads them; at L2 they take a share of the noise)",
    ),
)

FD_OPTIONS = (
    option("exchange_id", type=int),
    DATA,
    PULLED,
    option("--output", type=Path, help="folder for the network (default: <pulled>/fd-model)"),
    LABEL_COLUMN,
    option(
        "--privacy-level",
        choices=["L0"],
        default="L0",
        help="level to submit the network at: L0 only (it learnt from other silos' noiseless logits)",
    ),
    option(
        "--hidden-sizes", type=int, nargs="+", default=[64], help="MLP hidden widths (default 64)"
    ),
    option("--epochs", type=int, default=1, help="passes over your rows per round (default 1)"),
    option("--batch-size", type=int, default=64),
    option("--learning-rate", type=float, default=0.05),
    option(
        "--beta",
        type=float,
        default=1.0,
        help="weight of FD's distillation regulariser (default 1)",
    ),
    option("--validation-fraction", type=float, default=0.2),
    option("--seed", type=int, default=0, help="seed of the initialisation and batch order"),
    option(
        "--wait-timeout", type=float, default=3600.0, help="seconds to wait for a round to close"
    ),
)

SEEDS_OPTIONS = (
    option("augmentation_id", type=int, help="the augmentation (as on its page)"),
    DATA,
    TARGET_LABEL,
    option("--per-label", type=int, default=5, help="seeds of each target label (default 5)"),
    option(
        "--redundant",
        type=int,
        help="samples of other labels to hide the targets among (default: as many as the seeds)",
    ),
    option(
        "--feature-scale",
        type=float,
        default=1.0,
        help="divide your features by this to bring them to [0, 1] (255 for raw pixels)",
    ),
    PULLED,
    LABEL_COLUMN,
    option("--seed", type=int, default=0, help="seed of the choice of rows"),
    option("--dry-run", action="store_true", help="show the leakage and upload nothing"),
)

AUGMENT_OPTIONS = (
    FEDERATION_SLUG,
    OneOf(
        (
            option(
                "--generator",
                type=Path,
                help="a generator file (safetensors, or a CTGAN augmentation's samples .npz) already downloaded",
            ),
            option(
                "--augmentation",
                type=int,
                metavar="ID",
                help="fetch the published generator of this augmentation from the market",
            ),
        ),
        required=True,
    ),
    DATA,
    TARGET_LABEL,
    option(
        "--per-label",
        type=int,
        help="samples per target label (default: your mean count of the other labels)",
    ),
    option(
        "--feature-scale",
        type=float,
        default=1.0,
        help="multiply generated features by this (255 for raw pixels; default 1)",
    ),
    PULLED,
    LABEL_COLUMN,
    option("--output", type=Path, help="CSV to write (default: <data>-augmented.csv)"),
    option("--seed", type=int, default=0, help="seed of the generated samples"),
)
