"""A minimal job kind: the plain average of the members' probabilities (docs/architecture.md, "Adding a job kind").

Every method the registry and the job pipeline call is here; a real kind is a module in ``workers/algorithms`` that
ends with ``MEAN = register(MeanVote())`` and is imported by ``workers/algorithms/__init__.py``. This example is
registered only by its test, so that it never becomes a kind of the market.
"""

from workers.algorithms.registry import Fusion, NoiselessFusion
from workers.algorithms.schema import WorkEstimate, prediction_work, unknown_keys_refused


class MeanVote(NoiselessFusion):
    # NoiselessFusion: accepts_noise False, the same level_defaults at every level, reads_evaluation False, and
    # noise_refused for fuse. A kind that adds server noise implements those itself, and its L1 price
    # (ServerNoisePrice: votes_per_submission and l1_cost).
    name, label = "mean", "Mean of the members' probabilities"
    keys: tuple[str, ...] = ()
    help: dict[str, str] = {}

    def validate(self, params):
        unknown_keys_refused(dict(params or {}), known=self.keys, what="a mean job")
        return {}

    def noise_refusal(self, settings):
        # Why these settings cannot take server noise (L1): the sentence the API shows (the base's is None).
        return "A mean of probabilities has no accounted sensitivity; run it at L0, or on L2 submissions."

    def estimate(self, settings, *, n_public, n_member_models):
        return WorkEstimate(
            None, prediction_work(n_public=n_public, n_member_models=n_member_models)
        )

    def select(self, members, params, *, seed):
        return list(range(len(members)))

    def member_signal(self, probabilities, *, member, n_classes, params):
        return probabilities.mean(axis=0)

    def valuation_rule(self, settings, details):
        return "average"  # how contribution values re-combine a coalition: "vote", "average" or "cohort"

    def fuse(self, signal_sum, public_features, *, members, n_classes, params, noise=None, seed):
        self.noise_refused(noise)
        labels = signal_sum.argmax(axis=1)
        return Fusion(None, labels, labels < 0, None, {"n_members": len(members)})
