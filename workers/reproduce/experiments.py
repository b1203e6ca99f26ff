"""Run the FedKT paper's experiments on one dataset and seed, reusing what can be reused.

Teachers depend only on a party's data, so each party's teachers are trained once per seed and
their predictions on the whole public set are kept: Table 3 (public fractions) and Table 2
(query fractions, noise) slice those predictions instead of retraining. Every step is the
engine's own function (``train_teachers``, ``party_students``, ``server_fit`` ...) with the seeds
``party_fit`` / ``fedkt_fit`` would derive, so the 100 % column is exactly ``fedkt_fit`` at L0.

Parties run in a pool of ``n_jobs`` processes; the public features are sent to each worker
once (pool initializer).
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from workers.algorithms.fedkt import (
    child_seeds,
    party_fit,
    party_students,
    predict_classes,
    select_queries,
    server_fit,
    train_teachers,
)
from workers.algorithms.stages import StageClock, merge_stages
from workers.algorithms.voting import vote_counts
from workers.datasets import Dataset, load_dataset
from workers.learners import fit_aligned
from workers.partition import dirichlet_label_partition
from workers.reproduce.settings import (
    DELTA,
    TABLE2_GAMMAS,
    TABLE2_QUERY_FRACTIONS,
    TABLE3_FRACTIONS,
    Setting,
)

_PUBLIC: dict = {}


def _init_worker(public_x: np.ndarray) -> None:
    import torch

    torch.set_num_threads(1)
    _PUBLIC["x"] = public_x


def _accuracy(model, features, labels) -> float:
    return float(np.mean(model.predict(features) == labels))


def _teacher_task(
    features, labels, test_x, test_y, setting: Setting, n_classes: int, party_seed: int
):
    """One party: teachers (predictions on all public data) and its SOLO accuracy."""
    teacher_seed, _, _ = child_seeds(party_seed, 3)
    clock = StageClock()
    with clock.stage("teachers"):
        teachers = train_teachers(
            features,
            labels,
            n_classes=n_classes,
            learner=setting.teacher,
            partitions=setting.partitions,
            teachers=setting.teachers,
            seed=teacher_seed,
        )
    with clock.stage("party_votes"):
        predictions = np.stack([predict_classes(models, _PUBLIC["x"]) for models in teachers])
    solo = fit_aligned(setting.teacher, features, labels, n_classes=n_classes, seed=party_seed)
    return predictions, _accuracy(solo, test_x, test_y), clock.stages


def _student_task(
    teacher_predictions,
    queried,
    predict_rows,
    setting: Setting,
    n_classes: int,
    noise,
    student_seed: int,
):
    """One party's students on the queried public rows; their predictions on ``predict_rows``."""
    public_x = _PUBLIC["x"]
    students, counts, stages = party_students(
        teacher_predictions[:, :, queried],
        public_x[queried],
        n_classes=n_classes,
        student=setting.student,
        noise=noise,
        seed=student_seed,
    )
    clock = StageClock()
    with clock.stage(
        "server_votes"
    ):  # the server's step: the uploaded students predict the public data
        predictions = predict_classes(students, public_x[predict_rows])
    return predictions, counts, merge_stages([stages, clock.stages])


def _pate_task(data: Dataset, setting: Setting, seed: int) -> float:
    """PATE on pooled data: one 'party' holding all training data, n_parties·t teachers, s = 1."""
    result = party_fit(
        data.train_x,
        data.train_y,
        _PUBLIC["x"],
        n_classes=data.n_classes,
        teacher=setting.teacher,
        student=setting.student,
        partitions=1,
        teachers=setting.n_parties * setting.teachers,
        seed=seed,
    )
    return _accuracy(result.students[0], data.test_x, data.test_y)


def _central_task(data: Dataset, setting: Setting, seed: int) -> float:
    model = fit_aligned(
        setting.central_learner, data.train_x, data.train_y, n_classes=data.n_classes, seed=seed
    )
    return _accuracy(model, data.test_x, data.test_y)


class Run:
    """All experiments of one dataset and seed; results accumulate in ``self.results``."""

    def __init__(self, setting: Setting, seed: int, n_jobs: int, log=print):
        self.setting, self.seed, self.log = setting, seed, log
        self.data = load_dataset(setting.dataset, seed=seed, view=setting.view)
        self.parts = dirichlet_label_partition(
            self.data.train_y,
            setting.n_parties,
            beta=setting.beta,
            seed=seed,
            min_size=setting.min_party_size,
            cap_at_mean=setting.cap_at_mean,
        )
        # the seeds fedkt_fit(seed=seed) derives for parties and server
        party_root, self.server_seed = child_seeds(seed, 2)
        self.party_seeds = child_seeds(party_root, setting.n_parties)
        self.n_jobs = n_jobs
        self.results: dict = {
            "dataset": setting.dataset,
            "seed": seed,
            "n_parties": setting.n_parties,
            "party_sizes": [int(len(part)) for part in self.parts],
        }

    def __enter__(self):
        context = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(
            max_workers=self.n_jobs,
            mp_context=context,
            initializer=_init_worker,
            initargs=(self.data.public_x,),
        )
        return self

    def __exit__(self, *exc):
        self.pool.shutdown()

    def table1(self) -> None:
        """Teachers (kept for Tables 2-3), SOLO, PATE and centralised accuracies."""
        data, setting = self.data, self.setting
        started = time.perf_counter()
        pate = self.pool.submit(_pate_task, data, setting, self.seed)
        central = self.pool.submit(_central_task, data, setting, self.seed)
        futures = [
            self.pool.submit(
                _teacher_task,
                data.train_x[part],
                data.train_y[part],
                data.test_x,
                data.test_y,
                setting,
                data.n_classes,
                party_seed,
            )
            for part, party_seed in zip(self.parts, self.party_seeds)
        ]
        outputs = [future.result() for future in futures]
        self.teacher_predictions = [output[0] for output in outputs]
        self.party_stages = merge_stages([output[2] for output in outputs])
        self.results["solo"] = float(np.mean([output[1] for output in outputs]))
        self.results["pate"] = pate.result()
        self.results["centralised"] = central.result()
        self.log(
            f"  [{setting.dataset} seed {self.seed}] teachers, SOLO, PATE, centralised: "
            f"{time.perf_counter() - started:.0f} s elapsed"
        )

    def _students(self, queried, predict_rows, noise=None):
        """Every party's students; ``queried`` is one index array for all parties or one per party."""
        student_seeds = [child_seeds(party_seed, 3)[2] for party_seed in self.party_seeds]
        queried = queried if isinstance(queried, list) else [queried] * len(self.party_seeds)
        futures = [
            self.pool.submit(
                _student_task,
                predictions,
                party_queried,
                predict_rows,
                self.setting,
                self.data.n_classes,
                noise,
                student_seed,
            )
            for predictions, party_queried, student_seed in zip(
                self.teacher_predictions, queried, student_seeds
            )
        ]
        outputs = [future.result() for future in futures]
        return (
            np.stack([output[0] for output in outputs]),
            [list(output[1]) for output in outputs],
            merge_stages([output[2] for output in outputs]),
        )

    def table3(self, fractions=TABLE3_FRACTIONS) -> None:
        """FedKT-L0 with a growing share of the public data (nested subsets); 1.0 is Table 1's FedKT."""
        n_public = len(self.data.public_x)
        order = np.random.default_rng(self.seed).permutation(n_public)
        self.results["table3"] = {}
        for fraction in sorted(fractions):
            started = time.perf_counter()
            subset = np.sort(order[: int(np.ceil(fraction * n_public))])
            predictions, _, student_stages = self._students(subset, subset)
            server = server_fit(
                predictions,
                self.data.public_x[subset],
                n_classes=self.data.n_classes,
                final=self.setting.final_learner,
                seed=self.server_seed,
            )
            accuracy = _accuracy(server.final_model, self.data.test_x, self.data.test_y)
            self.results["table3"][str(fraction)] = accuracy
            if fraction == 1.0:
                self.student_predictions = predictions
                self.results["fedkt_l0"] = accuracy
                self.results["abstention_rate"] = float(server.abstained.mean())
                self.results.update(self._label_diagnostics(server))
                stages = merge_stages([self.party_stages, student_stages, server.stages])
                self.results["stages"] = {name: stats.as_dict() for name, stats in stages.items()}
                self._log_stages(stages)
            self.log(
                f"  [{self.setting.dataset} seed {self.seed}] FedKT-L0 with {fraction:.0%} public: "
                f"{accuracy:.4f} ({time.perf_counter() - started:.0f} s)"
            )

    def _label_diagnostics(self, server) -> dict:
        """How often the vote labels agree with the public data's true labels, which the algorithm
        never sees (diagnostics only): each partition's teacher vote, and the server's consistent vote."""
        public_y = self.data.public_y
        party_votes = [
            np.mean(np.argmax(vote_counts(partition, self.data.n_classes), axis=1) == public_y)
            for predictions in self.teacher_predictions
            for partition in predictions
        ]
        used = server.trained
        return {
            "party_vote_label_accuracy": float(np.mean(party_votes)),
            "consistent_vote_label_accuracy": float(np.mean(server.labels[used] == public_y[used])),
            "majority_class_share_of_parties": [
                float(
                    np.bincount(self.data.train_y[part], minlength=self.data.n_classes).max()
                    / len(part)
                )
                for part in self.parts
            ],
        }

    def _log_stages(self, stages) -> None:
        for name in ("teachers", "party_votes", "students", "server_votes", "final_model"):
            stats = stages[name]
            self.log(
                f"    stage {name:<12} {stats.wall_seconds:8.1f} s (summed over parties)  "
                f"peak RSS {stats.peak_rss_mib:7.0f} MiB"
            )

    def table2(self, mechanisms, levels=("L1", "L2")) -> None:
        """FedKT-L1 and -L2 (``levels``) for each mechanism × query fraction: ε and accuracy. L2 retrains every
        party's students on its noisy queries; L1 only refits the server's final model."""
        from workers.privacy.accounting import party_noise_privacy, server_noise_privacy

        rows = []
        n_public = len(self.data.public_x)
        for mechanism in mechanisms:
            for fraction in TABLE2_QUERY_FRACTIONS:
                started = time.perf_counter()
                server = server_fit(
                    self.student_predictions,
                    self.data.public_x,
                    n_classes=self.data.n_classes,
                    final=self.setting.final_learner,
                    query=fraction,
                    noise=mechanism,
                    seed=self.server_seed,
                )
                analysis = server_noise_privacy(
                    mechanism=mechanism,
                    vote_counts=server.consistent_counts,
                    partitions=self.setting.partitions,
                    teachers=self.setting.teachers,
                    delta=DELTA,
                )
                rows.append(self._row("L1", mechanism, fraction, server, analysis))
                if "L2" not in levels:
                    self.log(
                        f"  [{self.setting.dataset} seed {self.seed}] {mechanism.name} {mechanism.parameters} "
                        f"q={fraction:.1%}: L1 {rows[-1]['accuracy']:.4f} eps {rows[-1]['epsilon']:.2f}/"
                        f"{rows[-1]['epsilon_data_dependent']:.2f} ({time.perf_counter() - started:.0f} s)"
                    )
                    continue
                # each party samples its own queries with the seed party_fit would use
                queried = [
                    select_queries(n_public, fraction, seed=child_seeds(party_seed, 3)[1])
                    for party_seed in self.party_seeds
                ]
                predictions, counts, _ = self._students(
                    queried, np.arange(n_public), noise=mechanism
                )
                server = server_fit(
                    predictions,
                    self.data.public_x,
                    n_classes=self.data.n_classes,
                    final=self.setting.final_learner,
                    seed=self.server_seed,
                )
                analysis = party_noise_privacy(
                    mechanism=mechanism,
                    party_vote_counts=counts,
                    partitions=self.setting.partitions,
                    teachers=self.setting.teachers,
                    delta=DELTA,
                )
                rows.append(self._row("L2", mechanism, fraction, server, analysis))
                self.log(
                    f"  [{self.setting.dataset} seed {self.seed}] {mechanism.name} {mechanism.parameters} "
                    f"q={fraction:.1%}: L1 {rows[-2]['accuracy']:.4f} eps {rows[-2]['epsilon']:.2f}/"
                    f"{rows[-2]['epsilon_data_dependent']:.2f}; L2 {rows[-1]['accuracy']:.4f} eps "
                    f"{rows[-1]['epsilon']:.2f}/{rows[-1]['epsilon_data_dependent']:.2f} "
                    f"({time.perf_counter() - started:.0f} s)"
                )
        self.results["table2"] = rows

    def _row(self, level, mechanism, fraction, server, analysis) -> dict:
        return {
            "level": level,
            "mechanism": mechanism.name,
            **mechanism.parameters,
            "query_fraction": fraction,
            "n_queries": analysis.data_independent.n_queries,
            "epsilon": analysis.data_independent.epsilon,
            "epsilon_data_dependent": analysis.data_dependent.epsilon,
            "unit": analysis.data_independent.unit,
            "accuracy": _accuracy(server.final_model, self.data.test_x, self.data.test_y),
        }


def table2_mechanisms():
    """Laplace at the paper's γ, and Gaussian noise of the same standard deviation (σ = √2/γ)."""
    from workers.privacy.mechanisms import GaussianNoise, LaplaceNoise

    return [LaplaceNoise(gamma=gamma) for gamma in TABLE2_GAMMAS] + [
        GaussianNoise(sigma=round(float(np.sqrt(2) / gamma), 2)) for gamma in TABLE2_GAMMAS
    ]
