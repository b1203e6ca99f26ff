"""The "fedkt" job kind behind :mod:`workers.algorithms.registry` (importing it, as ``import workers.algorithms``
does, registers it). Its ``validate(params) -> dict`` fills in the defaults and types and bounds every key with the
checks of :mod:`workers.algorithms.schema` (a ValueError whose sentence names the key otherwise; what it returns is
what a job stores); ``select``, ``member_signal`` and ``fuse`` call it themselves, and ``estimate`` states the rows a
fit uses and the work it implies before anything runs.

**fedkt** — Li, He, Song, *Practical One-Shot Federated Learning for Cross-Silo Setting*,
Algorithm 1 lines 10-14 (the server side; the silos ran lines 1-9 and uploaded s students each):

- ``partitions`` (int 1..64, default 2): s, the most students per submission: a submission with s_i ≤ s
  students (a small silo's toolkit picks s_i = 1) votes with its s_i; at L1 it is charged for s.
- ``teachers`` (int 1..64, optional): t, recorded in the privacy report only; without it the report records the
  most teachers any submission declared, and ``Fusion.details["silo_designs"]`` each submission's s_i and t_i.
- ``query_fraction`` (0 < f ≤ 1, default 1) or ``query_count`` (int ≥ 1): public rows queried.
- ``final_model`` (learner, default :data:`DEFAULT_FINAL_MODEL`): the global model, a
  ``{"family": ..., **hyperparameters}`` mapping (:func:`workers.learners.make_learner`) whose
  hyperparameters :data:`workers.algorithms.schema.LEARNER_HYPERPARAMETERS` bounds.
- ``privacy`` (mapping, optional): at L1 its ``delta`` (default 1e-5) is the δ of the report. With Confident-GNMax
  noise (``"mechanism": "confident_gnmax"``, :class:`workers.privacy.mechanisms.ConfidentGaussianNoise`) only the
  queries whose noisy consensus check passes are answered and labelled; ``Fusion.details["confident_gnmax"]``
  records T, σ₁, σ₂ and the queries considered and answered.
- ``query_selection`` (:data:`workers.algorithms.transfer.QUERY_SELECTIONS`, default
  :data:`DEFAULT_QUERY_SELECTION`): a seeded random sample of the public rows, or the k-means medoids of the
  public features (no label or vote read: no privacy cost).
- ``semi_supervised`` (:data:`workers.algorithms.transfer.SEMI_SUPERVISED`, default
  :data:`DEFAULT_SEMI_SUPERVISED`): whether the final model also learns from the public rows nobody labelled
  (label spreading or self-training from the released labels: post-processing, no privacy cost). Both
  defaults were chosen on validation rows (``docs/results/private.md``) and are stored with every job.
- ``vote`` (:data:`VOTE_RULES`, default ``consistent_hard``): how a member votes (issue 19, fusion under
  label skew). ``consistent_hard`` is the paper's; ``class_weighted`` multiplies a member's consistent
  votes for class m by its integer weight ``round(W × n_m / max_k n_k)`` from the label distribution
  it declared (:func:`workers.algorithms.voting.class_vote_weights`; undeclared: W on every class),
  with W = ``vote_weight_max`` (int 1..16, default 4, given only with ``class_weighted``); ``soft`` sums
  the students' averaged probabilities instead of votes. At L1 a submission moves s × W votes
  (:meth:`FedKTFusion.votes_per_submission`), which the report, the price and the ledger use;
  ``soft`` has no integer sensitivity the accountant covers and is refused at L1
  (:meth:`FedKTFusion.noise_refusal`). ``auto`` builds the three rules and Guha's ensemble with selection
  from the same uploads, chooses on one half of the federation's evaluation split and reports on the other
  (:mod:`workers.algorithms.auto_fusion`, with the stacked fusion as a candidate; its ``vote_weight_max`` is the
  class-weighted candidate's W); it is
  refused at L1. ``validate`` does not write its default (``consistent_hard``) into the stored parameters:
  ``validate`` does not know the privacy level, and :meth:`FedKTFusion.level_defaults` makes ``auto`` the default of
  L0 jobs whose evaluation split allows it (the market stores it with the job); L1 and L2 keep the paper's vote.
- ``semi_private`` (:data:`workers.algorithms.semi_private.SEMI_PRIVATE_SETTINGS`, default ``off``; an L1 or L2 job
  that names none gets :data:`DEFAULT_SEMI_PRIVATE` from :meth:`FedKTFusion.level_defaults`): ``cross_fitted`` fits
  the global model on the released noisy labels together with the operator's labelled fit half of the evaluation
  split, the mix chosen by cross-fitting inside that half (:mod:`workers.algorithms.semi_private`; the report half
  is never read). Post-processing of what was released plus rows no silo owns: no silo pays any extra ε, the
  price and the charge do not change. ``Fusion.details["semi_private"]`` records the choice.
- ``privacy.unit`` (:data:`workers.privacy.settings.PRIVACY_UNITS`, default ``party``; L1 only): what the noise
  protects. ``party`` is the paper's L1 (consistent votes, party-level). ``record`` (issue 40) is example-level
  GNMax over every student of every silo: each submission adds one vote per student (not its consistent vote), and
  must declare that its students were fitted on disjoint partitions of its rows (``Member.disjoint_partitions``;
  :meth:`FedKTFusion.select` refuses one that does not), so one record moves one vote per submission
  (:meth:`FedKTFusion.votes_per_submission` 1, the √2 sensitivity of :mod:`workers.privacy.accounting`); it takes
  the paper's vote only (``class_weighted`` and ``soft`` are refused with it).
- L1 price (:meth:`FedKTFusion.l1_cost`): :func:`workers.privacy.costs.fedkt_l1_cost` at s, t and the votes
  a silo's submissions move (:meth:`FedKTFusion.votes_per_submission`); the budgets reserve and charge it.
- signal: the member's consistent votes (s_i on the class all its s_i students predict, else 0); a silo's own
  model (:attr:`workers.algorithms.registry.Member.own_model`) never votes;
  ``fuse`` is FedKT's one server step (:func:`workers.algorithms.fedkt.server_step`, which the simulations'
  ``server_fit`` calls too): it adds ``noise`` (L1) to the summed counts of the queried rows, labels by
  arg-max and fits ``final_model`` on the non-abstaining rows. With noise, ``Fusion.privacy`` is the
  :func:`workers.privacy.accounting.server_noise_privacy` analysis of the noiseless counts.

Aliases read on input: ``final`` for ``final_model`` and ``query`` for a query where unambiguous
(:func:`workers.algorithms.schema.query_setting`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from workers.algorithms.fedkt import server_step
from workers.algorithms.registry import Fusion, Member, member_probabilities_split, register
from workers.algorithms.schema import (
    QUERY_HELP,
    WorkEstimate,
    learner,
    learner_work,
    one_of,
    prediction_work,
    query_argument,
    query_rows,
    query_setting,
    unknown_keys_refused,
    whole_number,
)
from workers.algorithms.semi_private import (
    SEMI_PRIVATE_PRIVACY_NOTE,
    SEMI_PRIVATE_SETTINGS,
    semi_private_fit,
    semi_private_refusal,
)
from workers.algorithms.transfer import QUERY_SELECTIONS, SEMI_SUPERVISED
from workers.modelio.families import ModelFamily
from workers.privacy.costs import PrivacyCost, fedkt_l1_cost_from_parameters
from workers.privacy.reports import EXAMPLE_LEVEL, PARTY_LEVEL
from workers.privacy.settings import PRIVACY_UNITS, PrivacySettings, privacy_unit

#: FedKT's vote rules (module docstring); the first is the paper's and the default. ``auto`` chooses among the
#: others and Guha's ensemble with selection on half of the evaluation split (:mod:`workers.algorithms.auto_fusion`).
VOTE_RULES = ("consistent_hard", "class_weighted", "soft", "auto")
DEFAULT_VOTE_WEIGHT_MAX = 4
MAX_VOTE_WEIGHT = 16
#: How a FedKT job chooses the rows it queries and trains its global model when it does not say (chosen on
#: validation rows: docs/results/private.md).
DEFAULT_QUERY_SELECTION, DEFAULT_SEMI_SUPERVISED = "random", "none"
#: What a FedKT job fits its global model with when the job does not say (the API's and the launcher's default).
DEFAULT_FINAL_MODEL = {"family": "random_forest", "n_estimators": 100, "max_depth": 8}
#: What an L1 FedKT job fits its global model with when the job does not say (the market fills it in: ``validate``
#: does not know the privacy level). Fitted on a few dozen noisy labels, a regularised logistic regression on the
#: one-hot view beats the forest by 1-4 points on validation rows (issue 25, docs/results/private.md).
DEFAULT_PRIVATE_FINAL_MODEL = {"family": "logistic_regression", "C": 0.1}
#: What an L1 or L2 FedKT job's global model is fitted on when the job does not say (the market fills it in): the
#: noisy labels and the operator's fit-half rows, mixed as cross-fitting inside that half chooses (issue 40).
DEFAULT_SEMI_PRIVATE = "cross_fitted"
FINAL_MODEL_FAMILIES = (
    ModelFamily.LOGISTIC_REGRESSION,
    ModelFamily.RANDOM_FOREST,
    ModelFamily.XGBOOST,
    ModelFamily.MLP,
)


#: FedKT vote rules (and ``auto`` choices) that average the members' probabilities rather than count votes.
AVERAGING_VOTES = frozenset({"soft", "ensemble_selected", "stacked"})


class FedKTFusion:
    """FedKT's server side over uploaded student sets (module docstring: params)."""

    name = "fedkt"
    label = "FedKT"

    accepts_noise = True
    privacy_units = PRIVACY_UNITS
    keys: tuple[str, ...] = (
        "partitions",
        "teachers",
        "query_fraction",
        "query_count",
        "final_model",
        "privacy",
        "vote",
        "vote_weight_max",
        "query_selection",
        "semi_supervised",
        "semi_private",
    )
    choices = {
        "vote": VOTE_RULES,
        "query_selection": QUERY_SELECTIONS,
        "semi_supervised": SEMI_SUPERVISED,
        "semi_private": SEMI_PRIVATE_SETTINGS,
        "final_model.family": tuple(str(family) for family in FINAL_MODEL_FAMILIES),
    }
    help = {
        "partitions": "s: students per submission (each FedKT submission holds one student per partition), 1 to 64.",
        "teachers": "t: teachers per partition the silos trained, 1 to 64, recorded in the privacy report (by default "
        "the most any submission declared; each silo's own t is recorded with the job).",
        "query_fraction": QUERY_HELP,
        "query_count": QUERY_HELP,
        "final_model": 'The global model\'s learner: {"family": one of '
        + ", ".join(FINAL_MODEL_FAMILIES)
        + ", ...hyperparameters}.",
        "vote": (
            "How silos vote: "
            + " | ".join(VOTE_RULES)
            + " (default auto at L0 where the evaluation split "
            "allows it, else consistent_hard, the paper's; class_weighted weighs a silo's votes per class by its "
            "declared share of that class; soft sums the students' probabilities and is refused at L1; auto "
            "chooses among these, Guha's ensemble with selection and the stacked fusion on half of the "
            "evaluation split, reports on the other half, and runs at L0 only)."
        ),
        "vote_weight_max": (
            f"class_weighted and auto only: W, the largest integer vote weight, 1 to {MAX_VOTE_WEIGHT} "
            f"(default {DEFAULT_VOTE_WEIGHT_MAX}); at L1 each submission moves s × W votes."
        ),
        "query_selection": (
            "Which public rows are queried when not all are: "
            + " | ".join(QUERY_SELECTIONS)
            + " (default "
            f"{DEFAULT_QUERY_SELECTION}; medoids are the rows nearest the centres of a k-means of the public "
            "features, chosen without labels, so they cost no privacy)."
        ),
        "semi_supervised": (
            "How the global model uses the public rows that were not queried: "
            + " | ".join(SEMI_SUPERVISED)
            + f" (default {DEFAULT_SEMI_SUPERVISED}; post-processing of the released labels, no privacy cost)."
        ),
        "semi_private": (
            "Whether the global model also learns from the operator's labelled rows (the fit half of the "
            "evaluation split): "
            + " | ".join(SEMI_PRIVATE_SETTINGS)
            + f" (default {DEFAULT_SEMI_PRIVATE} at L1 and L2, off at L0; cross_fitted chooses among the noisy "
            "labels, the operator's rows and both by cross-fitting inside the fit half; no silo pays any extra ε)."
        ),
    }

    def validate(self, params: Mapping) -> dict:
        params = dict(params or {})
        unknown_keys_refused(
            params, known=self.keys, what="a fedkt job", old_names=("query", "final")
        )
        privacy = params.get("privacy") or {}
        if not isinstance(privacy, Mapping):
            raise ValueError("'privacy' must be a mapping of the L1 noise settings.")
        if privacy_unit(privacy) == "record" and params.get("vote", VOTE_RULES[0]) != VOTE_RULES[0]:
            raise ValueError(
                f"'privacy.unit' \"record\" counts every student's own vote, so it takes the paper's vote only: "
                f'remove "vote" or set it to "{VOTE_RULES[0]}", or protect the party ("unit": "party").'
            )
        if "final" in params and "final_model" in params:
            raise ValueError("Give 'final_model' only ('final' is its old name).")
        settings = {
            "partitions": whole_number(
                params.get("partitions", 2), name="partitions", minimum=1, maximum=64
            ),
            # t is the silos' (each submission declares the t it trained with): stored only when the job names it
            **(
                {
                    "teachers": whole_number(
                        params["teachers"], name="teachers", minimum=1, maximum=64
                    )
                }
                if params.get("teachers") is not None
                else {}
            ),
            **query_setting(params),
            "final_model": learner(
                params.get("final_model", params.get("final", DEFAULT_FINAL_MODEL)),
                name="final_model",
                families=FINAL_MODEL_FAMILIES,
            ),
            **self._vote_settings(params),
            "query_selection": one_of(
                params.get("query_selection", DEFAULT_QUERY_SELECTION),
                name="query_selection",
                choices=QUERY_SELECTIONS,
            ),
            "semi_supervised": one_of(
                params.get("semi_supervised", DEFAULT_SEMI_SUPERVISED),
                name="semi_supervised",
                choices=SEMI_SUPERVISED,
            ),
            **self._semi_private_setting(params),
        }
        return {**settings, "privacy": dict(privacy)} if privacy else settings

    @staticmethod
    def _semi_private_setting(params: Mapping) -> dict:
        """``{"semi_private": "cross_fitted"}`` when the job asks for it, else ``{}`` (``off``, the default, is not
        stored, so that a job stored before the setting existed validates as it did)."""
        semi_private = one_of(
            params.get("semi_private", SEMI_PRIVATE_SETTINGS[0]),
            name="semi_private",
            choices=SEMI_PRIVATE_SETTINGS,
        )
        if semi_private == SEMI_PRIVATE_SETTINGS[0]:
            return {}
        if params.get("vote") == "auto":
            raise ValueError(
                '\'semi_private\' cannot be combined with "vote": "auto", which already chooses on the '
                "evaluation split; remove one of them."
            )
        if params.get("semi_supervised", DEFAULT_SEMI_SUPERVISED) != "none":
            raise ValueError(
                "'semi_private' fits the global model on the labelled queried rows and the operator's rows; it "
                "cannot be combined with 'semi_supervised' (set one of them to its default)."
            )
        return {"semi_private": semi_private}

    @staticmethod
    def level_defaults(
        params: Mapping, *, privacy_level: str, evaluation_class_counts: Sequence[int]
    ) -> dict:
        """An L0 job that names no vote gets ``auto`` where the evaluation split allows it
        (:func:`~workers.algorithms.auto_fusion.evaluation_allows_auto`): the paper's vote is one of its candidates,
        chosen only where it scores best. An L1 job that names no final model gets
        :data:`DEFAULT_PRIVATE_FINAL_MODEL` (a few dozen noisy labels fit a regularised logistic regression better
        than the forest); L2 keeps ``validate``'s final model (the silos' noise is already in their students). An L1
        or L2 job that names neither ``semi_private`` nor another ``semi_supervised`` or ``vote: auto`` gets
        :data:`DEFAULT_SEMI_PRIVATE`."""
        from workers.algorithms.auto_fusion import evaluation_allows_auto

        params = dict(params or {})
        if privacy_level == "L0" and evaluation_allows_auto(evaluation_class_counts):
            return {"vote": "auto", **params}
        defaults: dict = {}
        # "final" is the old name of "final_model": a job naming either chose its model.
        if privacy_level == "L1" and not params.keys() & {"final_model", "final"}:
            defaults["final_model"] = dict(DEFAULT_PRIVATE_FINAL_MODEL)
        if (
            privacy_level in ("L1", "L2")
            and "semi_private" not in params
            and params.get("vote") != "auto"
            and params.get("semi_supervised", DEFAULT_SEMI_SUPERVISED) == "none"
        ):
            defaults["semi_private"] = DEFAULT_SEMI_PRIVATE
        return {**defaults, **params}

    @staticmethod
    def vote_weight_parameters(weight: int) -> dict:
        """``class_weighted`` votes of largest weight W = ``weight``: each submission then moves s × W votes."""
        return {"vote": "class_weighted", "vote_weight_max": weight}

    @staticmethod
    def _vote_settings(params: Mapping) -> dict:
        vote = one_of(params.get("vote", VOTE_RULES[0]), name="vote", choices=VOTE_RULES)
        if vote not in ("class_weighted", "auto"):
            if "vote_weight_max" in params:
                raise ValueError(
                    '\'vote_weight_max\' applies to "vote": "class_weighted" or "auto" only; '
                    "remove it."
                )
            return (
                {} if vote == VOTE_RULES[0] else {"vote": vote}
            )  # the default is not stored (docstring)
        return {
            "vote": vote,
            "vote_weight_max": whole_number(
                params.get("vote_weight_max", DEFAULT_VOTE_WEIGHT_MAX),
                name="vote_weight_max",
                minimum=1,
                maximum=MAX_VOTE_WEIGHT,
            ),
        }

    @staticmethod
    def vote_weight(settings: Mapping) -> int:
        """The largest integer weight a submission's votes carry: W for class_weighted (and auto, which may choose
        it), else 1 (``settings``: a job's stored parameters). The market prices, reserves and charges a silo for
        s × this × its submissions."""
        if settings.get("vote") in ("class_weighted", "auto"):
            return int(settings.get("vote_weight_max", DEFAULT_VOTE_WEIGHT_MAX))
        return 1

    @staticmethod
    def record_level(settings: Mapping) -> bool:
        """Whether a job with these settings protects one record (``privacy.unit`` "record")."""
        return privacy_unit(settings.get("privacy")) == "record"

    def votes_per_submission(self, settings: Mapping) -> int:
        """Votes one submission's data can move per query (the ``votes_per_submission`` of
        :func:`workers.privacy.accounting.party_vote_shifts`): s × its largest vote weight when the party is
        protected; 1 when one record is (it lies in one student's disjoint partition, so it moves one vote)."""
        if self.record_level(settings):
            return 1
        return self.votes_cast_per_submission(settings)

    def votes_cast_per_submission(self, settings: Mapping) -> int:
        """Votes one submission casts per query: s × its largest vote weight (each student's own vote, or s
        consistent votes)."""
        return (settings.get("partitions") or 1) * self.vote_weight(settings)

    def l1_cost(
        self,
        settings: Mapping,
        *,
        privacy: PrivacySettings | Mapping,
        vote_shift: int | None = None,
    ) -> PrivacyCost:
        """The data-independent cost of an L1 FedKT job (:func:`workers.privacy.costs.fedkt_l1_cost`: Theorem 3's
        bound over ``n_queries`` noisy consistent-vote counts) to a silo moving ``vote_shift`` votes per query,
        default one submission's (:meth:`votes_per_submission`), in the job's unit (``settings["privacy"]``, whatever
        ``privacy`` says: a calibration passes noise alone)."""
        unit = "record" if self.record_level(settings) else "party"
        return fedkt_l1_cost_from_parameters(
            PrivacySettings.of(privacy, unit=unit),
            partitions=settings.get("partitions") or 1,
            teachers=settings.get("teachers") or 1,
            vote_shift=vote_shift or self.votes_per_submission(settings),
        )

    @staticmethod
    def noise_refusal(settings: Mapping) -> str | None:
        """Why these settings cannot run with server noise (L1), or None: a vote whose sensitivity the accountant
        does not cover is refused rather than under-charged."""
        if settings.get("vote") == "auto":
            from workers.algorithms.auto_fusion import AUTO_REFUSED_AT_L1

            return AUTO_REFUSED_AT_L1
        if settings.get("vote") == "soft":
            return (
                "Soft voting cannot run at L1: a silo's summed probabilities have no integer sensitivity the "
                'privacy accountant covers, so its ε could not be charged correctly; choose "vote": '
                '"consistent_hard" or "class_weighted", or run at L0.'
            )
        return None

    def estimate(self, settings: Mapping, *, n_public: int, n_member_models: int) -> WorkEstimate:
        from workers.algorithms.auto_fusion import AUTO_FINAL_MODEL_FITS, auto_aggregator_fits
        from workers.algorithms.stacking import FOLDS

        rows = min(query_rows(settings, n_public=n_public), n_public)
        auto = settings.get("vote") == "auto"
        fits = AUTO_FINAL_MODEL_FITS if auto else 1
        # a semi-private model: four candidates fitted per fold and the refit (the operator's rows aside)
        if settings.get("semi_private"):
            fits += 4 * FOLDS + 1
        return WorkEstimate(
            rows,
            prediction_work(n_public=n_public, n_member_models=n_member_models)
            + fits * learner_work(settings["final_model"], n_rows=rows),
            aggregator_fits=auto_aggregator_fits() if auto else 0,
        )

    def select(self, members: Sequence[Member], params: Mapping, *, seed: int) -> list[int]:
        # Every submission takes part (FedKT has no selection); the rule is that none holds more students than
        # the s its L1 price was computed for, since each student can move one vote per query.
        settings = self.validate(params)
        partitions = settings["partitions"]
        undeclared = [f"#{member.key}" for member in members if not member.disjoint_partitions]
        if self.record_level(settings) and undeclared:
            raise ValueError(
                f"A record-level FedKT job needs students fitted on disjoint partitions of each silo's rows, and "
                f"submission(s) {', '.join(undeclared)} do not declare it (a record could then move several votes); "
                'choose submissions trained with disjoint partitions or protect the party ("unit": "party").'
            )
        for member in members:
            if not 1 <= member.n_students <= partitions:
                raise ValueError(
                    f"Submission #{member.key} holds {member.n_students} FedKT student(s), but a FedKT job "
                    f"with s = {partitions} takes 1 to {partitions} students per submission (at L1 each is "
                    f"charged for s = {partitions}); set 'partitions' to at least {max(member.n_students, 1)} "
                    "or choose other submissions."
                )
        return list(range(len(members)))

    def member_signal(
        self, probabilities, *, member: Member, n_classes: int, params: Mapping
    ) -> np.ndarray:
        from workers.algorithms.voting import (
            class_vote_weights,
            consistent_vote_counts,
            soft_vote_scores,
            vote_counts,
            weighted_consistent_vote_counts,
        )

        # The students vote, never the silo's own model (member_probabilities_split); a submission with fewer
        # students than the job's s votes with its own s_i ≤ s, which the L1 price (at s) covers.
        settings = self.validate(params)
        vote = settings.get("vote", VOTE_RULES[0])
        if vote == "auto":  # all of its files: the stacked candidate reads the silo's own model
            from workers.algorithms.auto_fusion import auto_member_signal

            return auto_member_signal(
                probabilities,
                member=member,
                n_classes=n_classes,
                weight_max=settings["vote_weight_max"],
            )
        probabilities = member_probabilities_split(probabilities, member=member).students
        if self.record_level(settings):  # every student's own vote (the record-level unit)
            return vote_counts(probabilities.argmax(axis=2), n_classes)
        if vote == "soft":
            return soft_vote_scores(probabilities[None])
        predictions = probabilities.argmax(axis=2)[None]  # (1 party, s, n_public)
        if vote == "class_weighted":
            weights = class_vote_weights(
                member.label_distribution, n_classes, maximum=settings["vote_weight_max"]
            )
            return weighted_consistent_vote_counts(predictions, n_classes, weights[None])
        return consistent_vote_counts(predictions, n_classes, len(probabilities))

    @staticmethod
    def report_sentence(details: Mapping, *, report_rows: int) -> str | None:
        """What ``auto`` chose, or what a semi-private model was fitted on; None for a vote that read no
        evaluation row."""
        from workers.algorithms.auto_fusion import auto_choice_sentence
        from workers.algorithms.semi_private import semi_private_line

        if "auto" in details:
            return auto_choice_sentence(details["auto"])
        if "semi_private" in details:
            return semi_private_line(details["semi_private"], report_rows=report_rows)
        return None

    @staticmethod
    def privacy_notes(details: Mapping) -> tuple[str, ...]:
        """A semi-private model's note that the operator's rows cost no ε."""
        note = (details.get("semi_private") or {}).get("privacy")
        return (note,) if note else ()

    @staticmethod
    def valuation_rule(settings: Mapping, details: Mapping) -> str | None:
        """``vote`` for the hard votes (one vote per member), ``average`` for the soft vote and for ``auto``'s
        choice of the soft vote, the ensemble or the stack; None where ``auto`` chose the operator's rows alone."""
        from workers.algorithms.operator_only import silos_added_nothing

        if silos_added_nothing(details):
            return None
        vote = (settings or {}).get("vote", "consistent_hard")
        if vote == "auto":
            vote = (details.get("auto") or {}).get("chosen", "consistent_hard")
        return "average" if vote in AVERAGING_VOTES else "vote"

    @staticmethod
    def reads_evaluation(settings: Mapping) -> bool:
        """Whether ``fuse`` needs the federation's evaluation split (``evaluation=``): ``auto`` chooses on it, a
        semi-private model is fitted on its fit half."""
        return settings.get("vote") == "auto" or "semi_private" in settings

    def fuse(
        self,
        signal_sum,
        public_features,
        *,
        members: Sequence[Member],
        n_classes: int,
        params: Mapping,
        noise=None,
        seed: int,
        evaluation=None,
    ) -> Fusion:
        settings = self.validate(params)
        # The market refuses these settings at L1 before a job exists; refusing here too keeps a caller of the core
        # (a simulation, a test) from adding noise the accountant could not charge.
        if noise is not None and self.noise_refusal(settings):
            raise ValueError(self.noise_refusal(settings))
        if settings.get("vote") == "auto":
            from workers.algorithms.auto_fusion import auto_fuse

            return auto_fuse(
                self,
                signal_sum,
                public_features,
                members=members,
                n_classes=n_classes,
                settings=settings,
                evaluation=evaluation,
                seed=seed,
            )
        # Votes are integer counts (the noise mechanisms add integer noise to them and the accountant's sensitivity
        # is a number of votes); only the soft vote, which takes no noise, sums real-valued probabilities.
        soft = settings.get("vote") == "soft"
        counts = np.asarray(signal_sum, dtype=np.float64 if soft else np.int64)
        public_features = np.asarray(public_features)
        server = server_step(
            counts,
            public_features,
            n_classes=n_classes,
            final=settings["final_model"],
            query=query_argument(settings),
            noise=noise,
            seed=seed,
            query_selection=settings["query_selection"],
            semi_supervised=settings["semi_supervised"],
        )
        # The server step sees only the queried rows; the Fusion speaks of every public row, -1 where nobody
        # labelled it (not queried, or the vote abstained), so that contributions and reports index one array.
        queried, trained = server.queried_indices, server.trained
        all_labels, all_trained = (
            np.full(len(public_features), -1, dtype=np.int64),
            np.zeros(len(public_features), bool),
        )
        all_labels[queried[trained]], all_trained[queried[trained]] = server.labels[trained], True
        privacy = None
        if noise is not None:
            from workers.privacy.accounting import party_vote_shifts, server_noise_privacy

            # Each of a silo's submissions moves s × its largest weight votes: the job's report is for the silo
            # that moves the most.
            shifts = party_vote_shifts(
                [member.organisation for member in members],
                votes_per_submission=self.votes_per_submission(settings),
            )
            privacy = server_noise_privacy(
                mechanism=noise,
                vote_counts=server.consistent_counts,
                partitions=settings["partitions"],
                teachers=self.teachers_recorded(settings, members),
                delta=float(settings.get("privacy", {}).get("delta", 1e-5)),
                vote_shift=max(shifts.values(), default=self.votes_per_submission(settings)),
                unit=EXAMPLE_LEVEL if self.record_level(settings) else PARTY_LEVEL,
            )
        details = {
            "n_queried": int(len(queried)),
            "n_abstained": int(len(queried) - trained.sum()),
            "n_trained": int(trained.sum()),
            # classes no released label names: the final model is anchored on them (transfer.with_every_class)
            "unlabelled_classes": sorted(
                set(range(n_classes)) - {int(label) for label in server.labels[trained]}
            ),
            "silo_designs": silo_designs(members),
            "query_selection": settings["query_selection"],
            "semi_supervised": settings["semi_supervised"],
            **confident_details(noise, server.noisy_counts),
        }
        model = server.final_model
        if "semi_private" in settings:
            model, details["semi_private"] = semi_private_model(
                server.final_model,
                public_features[queried[trained]],
                server.labels[trained],
                settings=settings,
                evaluation=evaluation,
                n_classes=n_classes,
                seed=seed,
            )
        return Fusion(model, all_labels, all_trained, privacy, details)

    @staticmethod
    def teachers_recorded(settings: Mapping, members: Sequence[Member]) -> int:
        """The t a job's privacy report records (the bound does not depend on it): the job's ``teachers`` if it names
        one, else the most any of its submissions declared, else 1."""
        declared = [member.teachers for member in members if member.teachers]
        return int(settings.get("teachers") or max(declared, default=1))


def semi_private_model(
    noisy_model,
    public_features,
    public_labels,
    *,
    settings: Mapping,
    evaluation,
    n_classes: int,
    seed: int,
) -> tuple[object, dict]:
    """The semi-private global model and its ``Fusion.details["semi_private"]``
    (:func:`workers.algorithms.semi_private.semi_private_fit` on the fit half of ``evaluation``, the
    :class:`~workers.algorithms.auto_fusion.EvaluationRows` of the job; the report half is not passed on). A fit
    half too small to cross-fit keeps ``noisy_model`` and says why; no evaluation split is a ValueError."""
    from workers.algorithms.auto_fusion import evaluation_halves

    if evaluation is None:
        raise ValueError(
            "A semi-private FedKT model is fitted on the federation's evaluation split, which was not given; "
            'set "semi_private": "off" or give the split.'
        )
    labels = np.asarray(evaluation.labels, dtype=np.int64)
    fit_rows = evaluation_halves(labels, seed=seed)[0] if len(labels) >= 2 else labels[:0]
    refusal = semi_private_refusal(labels[fit_rows], n_classes=n_classes)
    if refusal:
        return noisy_model, {
            "chosen": "noisy_labels",
            "operator_rows": int(len(fit_rows)),
            "skipped": refusal,
        }
    fitted = semi_private_fit(
        noisy_model=noisy_model,
        public_features=public_features,
        public_labels=public_labels,
        operator_features=np.asarray(evaluation.features)[fit_rows],
        operator_labels=labels[fit_rows],
        learner=settings["final_model"],
        operator_learner=DEFAULT_FINAL_MODEL,  # the operator-only model's (operator_baseline.OPERATOR_ONLY_LEARNER)
        n_classes=n_classes,
        seed=seed,
    )
    return fitted.model, {**fitted.details(), "privacy": SEMI_PRIVATE_PRIVACY_NOTE}


def confident_details(noise, noisy_counts) -> dict:
    """``{"confident_gnmax": {threshold, sigma_threshold, sigma, n_considered, n_answered}}`` for a Confident-GNMax
    job (the answered count is read from the released noisy check, so it is public), else ``{}``."""
    from workers.privacy.mechanisms import ConfidentGaussianNoise

    if not isinstance(noise, ConfidentGaussianNoise):
        return {}
    answered = ConfidentGaussianNoise.answered(noisy_counts)
    return {
        "confident_gnmax": {
            **{name: value for name, value in noise.parameters.items() if name != "gamma"},
            "n_considered": int(len(answered)),
            "n_answered": int(answered.sum()),
        }
    }


def silo_designs(members: Sequence[Member]) -> dict[str, dict]:
    """``{submission key: {"students": s_i, "teachers": t_i or None}}``: the FedKT design each silo trained with, as
    its submission declared it (t) and as it voted (its students), recorded in the job's details."""
    return {
        member.key: {"students": member.n_students, "teachers": member.teachers}
        for member in members
    }


FEDKT = register(FedKTFusion())
