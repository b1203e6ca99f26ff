"""Cohort distillation: Dhasade, Kermarrec, Nguyen, Pires, de Vos, *Harnessing Increased Client
Participation with Cohort-Parallel Federated Learning* (CPFL, 2024), section 3.1.

Each of K cohorts trained one model by FedAvg among its own clients. The cohorts' knowledge is
fused in one shot on an unlabelled public set: the teacher's logit for class c on a public
example is the weighted average of the cohorts' logits for c, each cohort weighted by its share
of class c in the union of the cohorts' training data::

    w_{k,c} = n_{k,c} / Σ_k' n_{k',c}           z_c(x) = Σ_k w_{k,c} z_{k,c}(x)

(``n_{k,c}``: examples of class c held by cohort k's clients, aggregated, never per client). A
class that no cohort holds gets equal weights. The global student is then trained on the public
set against ``z`` with the L1 distance between logits (the paper's loss) or a softened KL.

Logits from probabilities: the market runs uploaded models in the sandbox, which returns
probabilities, so cohort logits are taken as log-probabilities ``log max(p, 1e-8)`` (the
log-softmax, i.e. logits up to the per-example constant every softmax discards).
"""

from __future__ import annotations

import numpy as np

from workers.algorithms.logits import PROBABILITY_FLOOR


def label_counts_of(label_distribution, n_examples: int) -> np.ndarray:
    """A declared label distribution (counts or shares per class) as counts summing to ``n_examples``."""
    distribution = np.asarray(label_distribution, dtype=np.float64)
    if distribution.ndim != 1 or np.any(distribution < 0) or distribution.sum() <= 0:
        raise ValueError(
            "A label distribution must be non-negative counts or shares per class, not all zero."
        )
    return distribution / distribution.sum() * n_examples


def cohort_class_weights(label_counts) -> np.ndarray:
    """``w[k, c]``: cohort k's share of class c (CPFL section 3.1); columns sum to 1, or are all 0
    for a class no cohort holds.

    Parameters
    ----------
    label_counts : array (K cohorts, C classes)
        Examples of each class held by each cohort (counts or any common scale).
    """
    counts = np.asarray(label_counts, dtype=np.float64)
    if counts.ndim != 2 or np.any(counts < 0):
        raise ValueError("Label counts must be a non-negative (cohorts × classes) table.")
    totals = counts.sum(axis=0, keepdims=True)
    return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def log_probabilities(probabilities) -> np.ndarray:
    """``log max(p, 1e-8)``: the logits the cohort distillation uses for probability outputs."""
    return np.log(np.clip(np.asarray(probabilities, dtype=np.float64), PROBABILITY_FLOOR, None))


def cohort_teacher_logits(cohort_logits, label_counts) -> np.ndarray:
    """The teacher ``z(x)`` of CPFL section 3.1, shape ``(n, C)``.

    Parameters
    ----------
    cohort_logits : array (K, n, C)
        Each cohort model's logits on the public examples.
    label_counts : array (K, C)
    """
    cohort_logits = np.asarray(cohort_logits, dtype=np.float64)
    weights = cohort_class_weights(label_counts)
    if weights.shape != (cohort_logits.shape[0], cohort_logits.shape[2]):
        raise ValueError(
            f"{cohort_logits.shape[0]} cohort models with {cohort_logits.shape[2]} classes need a "
            f"label-count table of that shape, not {weights.shape}."
        )
    teacher = np.einsum("knc,kc->nc", cohort_logits, weights)
    teacher[:, weights.sum(axis=0) == 0] = np.log(PROBABILITY_FLOOR)
    return teacher


def distil_cohorts(
    student,
    public_features,
    cohort_logits,
    label_counts,
    *,
    loss: str = "l1",
    temperature: float = 1.0,
    seed: int,
):
    """Train ``student`` (a torch learner) on the public features against the cohort teacher.

    ``loss="l1"`` matches logits (the paper); ``loss="kl"`` matches ``softmax(z)`` with the
    temperature. Returns a fitted :class:`~workers.learners.TorchClassifier`.
    """
    from workers.algorithms.neural_distillation import distil_torch

    teacher = cohort_teacher_logits(cohort_logits, label_counts)
    if loss == "kl":
        teacher = np.exp(teacher - teacher.max(axis=1, keepdims=True))
        teacher /= teacher.sum(axis=1, keepdims=True)
    return distil_torch(
        student, public_features, teacher, loss=loss, temperature=temperature, seed=seed
    )
