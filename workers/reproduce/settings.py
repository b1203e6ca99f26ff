"""The FedKT paper's experiment settings, per dataset (issue 3; FedKT section 5).

All: Dirichlet(β = 0.5) label partition, s = 2 partitions, t = 5 teachers, δ = 1e-5.
Teachers, students, final model, SOLO, PATE and the centralised model use the same family.

Deviations forced by compute (2 shared CPU cores, no GPU) and chosen without looking at the test
split: torch models train for a fixed, small number of epochs (MLP 50 epochs for the small
teacher / party sets, 30 for the public and pooled sets; CNN 10 epochs everywhere) with Adam at
lr 1e-3. The tree settings are the paper's (100 trees of depth 6 for the random forest; XGBoost
depth 6 with 100 rounds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.learners import Learner

MLP_SMALL = {"family": "mlp", "hidden_sizes": [100, 100], "epochs": 50, "batch_size": 32}
MLP_LARGE = {"family": "mlp", "hidden_sizes": [100, 100], "epochs": 30, "batch_size": 32}
CNN = {"family": "cnn", "epochs": 10, "batch_size": 64}


@dataclass(frozen=True)
class Setting:
    """Learners by role, federation shape and the issue's targets for one dataset."""

    dataset: str
    model: str                       # how the tables name the model family
    teacher: Learner                 # also SOLO's and PATE's teachers (data of party / teacher size)
    student: Learner                 # also the final model, PATE's student and the centralised model
    n_parties: int
    partitions: int = 2
    teachers: int = 5
    beta: float = 0.5
    min_party_size: int = 10
    cap_at_mean: bool = False        # NIID-Bench's party-size cap (sensitivity runs only)
    targets: dict = field(default_factory=dict)


SETTINGS = {
    "adult": Setting("adult", "random forest (100 trees, depth 6)",
                     {"family": "random_forest", "n_estimators": 100, "max_depth": 6},
                     {"family": "random_forest", "n_estimators": 100, "max_depth": 6}, n_parties=50,
                     targets={"fedkt_min": 82.2, "solo_about": 68.0}),
    "magic": Setting("magic", "XGBoost (depth 6, 100 rounds)", {"family": "xgboost", "max_depth": 6},
                     {"family": "xgboost", "max_depth": 6}, n_parties=50,
                     targets={"fedkt_within_centralised": 3.0}),
    "mnist": Setting("mnist", "MLP 784-100-100-10", MLP_SMALL, MLP_LARGE, n_parties=10,
                     targets={"fedkt_within_pate": 3.0}),
    "fashion": Setting("fashion", "CNN (conv 6, 16 @ 5x5, fc 120, 84)", CNN, CNN, n_parties=10,
                       targets={"fedkt_within_pate": 4.0}),
}

TABLE3_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)
TABLE2_GAMMAS = (0.04, 0.06, 0.1)
TABLE2_QUERY_FRACTIONS = (0.005, 0.01, 0.02)
DELTA = 1e-5
