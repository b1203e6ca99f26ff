"""A minimal job kind: the plain average of the members' probabilities (docs/architecture.md, "Adding a job kind").

Every method the registry and the job pipeline call is here; a real kind is a module in ``workers/algorithms`` that
ends with ``MEAN = register(MeanVote())`` and is imported by ``workers/algorithms/__init__.py``. This example is
registered only by its test, so that it never becomes a kind of the market.
"""

from workers.algorithms.registry import Fusion
from workers.algorithms.schema import WorkEstimate, prediction_work, unknown_keys_refused


class MeanVote:
    name, label = "mean", "Mean of the members' probabilities"
    keys: tuple[str, ...] = ()
    help: dict[str, str] = {}
    accepts_noise = (
        False  # True also needs the L1 price: votes_per_submission and l1_cost (ServerNoisePrice)
    )

    def validate(self, params):
        unknown_keys_refused(dict(params or {}), known=self.keys, what="a mean job")
        return {}

    def noise_refusal(self, settings):
        # Why these settings cannot take server noise (L1): the sentence the API shows; None where they can.
        return "A mean of probabilities has no accounted sensitivity; run it at L0, or on L2 submissions."

    def level_defaults(self, params, *, privacy_level, evaluation_class_counts):
        # What a job at privacy_level ("L0", "L1", "L2") gets where it names nothing: validate does not know the level.
        return dict(params or {})

    def reads_evaluation(self, settings):
        return False  # True: fuse also takes evaluation= (the evaluation split's rows and the members' outputs)

    def estimate(self, settings, *, n_public, n_member_models):
        return WorkEstimate(
            None, prediction_work(n_public=n_public, n_member_models=n_member_models)
        )

    def select(self, members, params, *, seed):
        return list(range(len(members)))

    def member_signal(self, probabilities, *, member, n_classes, params):
        return probabilities.mean(axis=0)

    def fuse(self, signal_sum, public_features, *, members, n_classes, params, noise=None, seed):
        labels = signal_sum.argmax(axis=1)
        return Fusion(None, labels, labels < 0, None, {"n_members": len(members)})
