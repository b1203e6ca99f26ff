"""What training a FAug generator costs before it runs, in the unit of a job's work (row-passes), so the market
can refuse or schedule a training it cannot afford without loading torch."""

from __future__ import annotations

import math

#: Row-passes (the unit of a job's work, :func:`workers.algorithms.schema.learner_work`) one training step costs
#: whatever its batch: torch's fixed cost of a step, a few milliseconds of one core (measured on a CPU worker:
#: 2 ms per MLP GAN step, 10–30 ms per CTGAN step at batch sizes 1 and 2).
STEP_WORK = 20_000
#: Plain row-passes that one row of a DP-SGD step costs: Opacus materialises a per-example gradient of every
#: weight (measured: 30 to 70 times a plain pass).
DP_SGD_ROW_FACTOR = 50
#: Columns a CTGAN makes of one continuous feature: a one-hot mode of its Gaussian mixture (at most 10) and a
#: scalar (Xu et al. 2019, Section 4.2).
TABULAR_COLUMNS_PER_FEATURE = 11


def generator_training_work(
    *,
    n_seeds: int,
    n_features: int,
    n_classes: int,
    epochs: int,
    batch_size: int,
    private: bool = False,
    tabular: bool = False,
    n_public: int = 0,
    public_epochs: int = 5,
) -> float:
    """A coarse count of the row-passes a generator's training costs, in the unit of a job's work.

    Every step costs :data:`STEP_WORK` plus, for each of its ``batch_size`` rows, three passes (the
    discriminator reads a real and a generated row, the generator's step one more) through networks whose width
    is (input columns + classes + 256 hidden units) / 10, times :data:`DP_SGD_ROW_FACTOR` under DP-SGD. A CTGAN
    (``tabular``) widens each feature into :data:`TABULAR_COLUMNS_PER_FEATURE` columns. The unconditional phase
    on ``n_public`` public rows (``public_epochs``) is plain training. Measured against a CPU worker it is within
    a factor of about 3; it bounds a training's work, it does not predict its time.

    Parameters
    ----------
    n_seeds : int
        Pooled seed rows; an epoch is ``ceil(n_seeds / batch_size)`` steps.
    n_features, n_classes, epochs, batch_size : int
    private : bool
        Whether the discriminator is trained with DP-SGD.
    tabular : bool
        A CTGAN rather than the MLP GAN.
    n_public, public_epochs : int
        Unlabelled public rows pretrained on first, and the passes over them.

    Returns
    -------
    float
        Row-passes.
    """
    columns = n_features * (TABULAR_COLUMNS_PER_FEATURE if tabular else 1)
    plain_row_work = 3 * (columns + n_classes + 256) / 10

    def phase(rows: int, passes: int, row_work: float) -> float:
        return passes * math.ceil(rows / batch_size) * (STEP_WORK + batch_size * row_work)

    seeds_work = phase(n_seeds, epochs, plain_row_work * (DP_SGD_ROW_FACTOR if private else 1))
    return seeds_work + (phase(n_public, public_epochs, plain_row_work) if n_public else 0.0)
