"""What a viewer may see of a global model's results: the one rule behind the global-model API, the job page,
its comparison chart, the model card and the budget ledger's data-dependent ε (the federation's part of it, what it
publishes to whom, is :func:`market.federations.visibility.visibility_for`, which the budgets read too).

The operator (the privacy officer) sees everything. Anyone else (the buyer who launched the job, an organisation
that bought the model, a silo that took part, a model card's reader) sees the global model's own metrics, its
feature specification and the data-independent ε bound, and:

- the data-dependent ε only when the federation publishes it: it is computed from the vote margins, so it is
  itself information about the silos' data;
- which silo contributed what (contribution weights, each submission's metrics and privacy report, the
  lineage's submissions and fusion details) only when the federation publishes contributions; a silo sees its
  own submissions' metrics, and its own contribution weight (its share of the agreeing labels) at L0 and L2 but
  not at L1 (:func:`silo_share_visible`): at L1 the weights are normalised over every silo's un-noised votes, so a
  silo's own share tells it the other silos' total agreement with the noisy labels, a function of the vote
  margins that the noise hides (the same reason the data-dependent ε is not published). The revenue split reads
  the same two rules (market.commerce.revenue: a payout must not tell a silo what it may not see);
- the majority-class baseline, and the best single silo's and the average silo's scores only under the same rule
  as contributions: otherwise only whether the model beats them (jobs over different sets of silos would let a
  reader solve their best and average scores for one silo's, rounded or not: issue 38); which organisation the best single silo is only under the contributions rule (or to that silo
  itself) (market.jobs.baselines.baselines_visible);
- each silo's contribution value (``GlobalModel.contribution_values``, issue 28) never, whatever the federation
  publishes: a silo's value is a function of every other silo's model. At L0 a silo sees its own value, its
  standard error and its rank band (not its rank, nor anyone else's value); at L1 and L2 the values are computed
  from the silos' un-noised predictions, which the noise is meant to hide, so only the operator sees them
  (docs/budgets.md, "Contribution values"). Buyers, the public and other silos see nothing per silo.

A new field of a global model is private until it is added to :class:`GlobalModelView` with its rule here.

A pre-flight estimate of a job (market.jobs.preflight) is the operator's alone (:func:`estimate_visible`): it is
computed from every member's predictions and from simulated noisy answers, which under L1's trust model only the
server sees. No silo and no buyer sees one, not even a buyer that may launch jobs: they are told it exists for
operators, never its numbers.
"""

from dataclasses import dataclass

from market.accounts.models import Organisation, User
from market.federations.models import PrivacyLevel
from market.federations.visibility import Visibility, visibility_for
from market.jobs.baselines import baselines_visible
from market.jobs.models import GlobalModel
from market.submissions.models import Submission
from workers.algorithms.operator_only import SILOS_ADDED_NOTHING, silos_added_nothing

# Lineage fields that say nothing about which silo contributed what (workers.runner writes the lineage).
PUBLIC_LINEAGE_KEYS = frozenset(
    {
        "job",
        "kind",
        "privacy_level",
        "public_dataset",
        "evaluation_split",
        "code_version",
        "seed",
        "seeds",
        "parameters",
        "dp_noise",
        "verification",
        "public_data_sha256",
    }
)


def estimate_visible(*, user: User | None) -> bool:
    """Whether ``user`` may ask for and read pre-flight estimates (module docstring): operators only."""
    return user is not None and user.is_operator


@dataclass(frozen=True)
class GlobalModelView:
    """A global model as one viewer may see it; ``global_model`` is for its non-private fields only."""

    global_model: GlobalModel
    metrics: dict
    submission_metrics: dict  # {"<submission id>": metrics}, the visible submissions only
    privacy_report: dict
    contribution_weights: dict  # {"<organisation id>": weight}, the visible organisations only
    contribution_rule: str
    lineage: dict
    baselines: dict  # market.jobs.baselines.baselines_visible: which silo is best only as contributions are shown
    every_silo: bool  # False: the per-silo fields hold the viewer's own share at most
    fusion_choice: dict | None = (
        None  # FedKT vote: auto's choice and candidates' scores; names no silo: for everyone
    )
    contribution_values: dict | None = (
        None  # visible_contribution_values: all, the viewer's own, or {}
    )


def _own_submission_ids(global_model: GlobalModel, organisation_id: int | None) -> set[str]:
    if organisation_id is None:
        return set()
    keys = [int(key) for key in global_model.submission_metrics if key.isdigit()]
    return {
        str(id)
        for id in Submission.objects.filter(
            id__in=keys, organisation_id=organisation_id
        ).values_list("id", flat=True)
    }


def _visible_report(
    report: dict, *, visibility: Visibility, submission_ids: set[str] | None
) -> dict:
    report = dict(report or {})
    if not visibility.data_dependent_epsilon and report.get("data_dependent") is not None:
        report["data_dependent"] = None
    if report.get("submissions"):  # L2: each silo's own declared guarantee
        # The model's guarantee is the weakest silo's; it names no silo, so everyone may see it.
        report["weakest_silo_guarantee"] = max(
            report["submissions"].values(),
            key=lambda guarantee: (guarantee or {}).get("epsilon") or 0.0,
        )
        if submission_ids is not None:
            report["submissions"] = {
                key: value for key, value in report["submissions"].items() if key in submission_ids
            }
    return report


def global_model_view(*, global_model: GlobalModel, user: User | None) -> GlobalModelView:
    """What ``user`` (``None``: the public) may see of ``global_model``; who may see it at all is the selectors'."""
    visibility = visibility_for(user=user, federation=global_model.federation)
    if visibility.every_silo:
        submission_ids, organisation_ids = None, None
    else:
        submission_ids = _own_submission_ids(global_model, visibility.organisation_id)
        organisation_ids = (
            {str(visibility.organisation_id)}
            if visibility.organisation_id and silo_share_visible(global_model)
            else set()
        )
    lineage = global_model.lineage or {}
    return GlobalModelView(
        global_model=global_model,
        metrics=global_model.metrics,
        submission_metrics={
            key: value
            for key, value in (global_model.submission_metrics or {}).items()
            if submission_ids is None or key in submission_ids
        },
        privacy_report=_visible_report(
            global_model.privacy_report, visibility=visibility, submission_ids=submission_ids
        ),
        contribution_weights={
            key: value
            for key, value in (global_model.contribution_weights or {}).items()
            if organisation_ids is None or key in organisation_ids
        },
        contribution_rule=global_model.contribution_rule,
        lineage=lineage
        if visibility.every_silo
        else {key: value for key, value in lineage.items() if key in PUBLIC_LINEAGE_KEYS},
        baselines=baselines_visible(
            global_model,
            every_silo=visibility.every_silo,
            organisation_id=visibility.organisation_id,
        ),
        every_silo=visibility.every_silo,
        fusion_choice=_fusion_choice(lineage),
        contribution_values=visible_contribution_values(global_model, visibility=visibility),
    )


#: What a silo sees of its own contribution value (at L0 only): not its exact rank, nor the leave-one-out.
OWN_VALUE_KEYS = ("shapley", "standard_error", "rank_band")
#: The game's description, which names no silo.
VALUE_GAME_KEYS = ("rule", "estimator", "permutations", "rows", "measures")


def silo_share_visible(global_model: GlobalModel) -> bool:
    """Whether a silo may learn its own contribution weight, directly or through a payout in proportion to it: at
    L0 and L2, or where the federation publishes contributions (module docstring)."""
    return (
        model_privacy_level(global_model) != PrivacyLevel.L1
        or global_model.federation.publish_contributions
    )


def silo_value_visible(global_model: GlobalModel) -> bool:
    """Whether a silo may learn its own contribution value, directly or through a payout in proportion to it: at L0
    only (module docstring; docs/budgets.md)."""
    return model_privacy_level(global_model) == PrivacyLevel.L0


def visible_contribution_values(global_model: GlobalModel, *, visibility: Visibility) -> dict:
    """The operator: every silo's values; a silo of an L0 model: its own (:data:`OWN_VALUE_KEYS`); else ``{}``."""
    values = global_model.contribution_values or {}
    if not values or visibility.operator:
        return dict(values)
    own = (values.get("silos") or {}).get(str(visibility.organisation_id))
    if own is None or not silo_value_visible(global_model):
        return {}
    return {
        **{key: values[key] for key in VALUE_GAME_KEYS if key in values},
        "silos": {str(visibility.organisation_id): {key: own.get(key) for key in OWN_VALUE_KEYS}},
    }


def model_privacy_level(global_model: GlobalModel) -> str:
    """The privacy level the model was made at (its lineage's, else its job's)."""
    return (global_model.lineage or {}).get("privacy_level") or global_model.job.privacy_level


def _fusion_choice(lineage: dict) -> dict | None:
    """What ``vote: auto`` chose (workers.algorithms.auto_fusion): the rule, the criterion, the rows of each half,
    every candidate's selection-half scores and the ensemble's size; the member weights stay in the lineage. With
    ``silos_added_nothing``: the sentence a job that chose the operator's rows alone says instead of selling its
    model as federated, else None."""
    chosen = (lineage.get("fusion") or {}).get("auto")
    if not isinstance(chosen, dict):
        return None
    return {
        **chosen,
        "silos_added_nothing": SILOS_ADDED_NOTHING
        if silos_added_nothing({"auto": chosen})
        else None,
    }


def named_contributions(view: GlobalModelView) -> list[dict]:
    """The visible contribution weights with their organisations' names, largest first."""
    names = Organisation.objects.in_bulk(
        [int(key) for key in view.contribution_weights if key.isdigit()]
    )
    return [
        {
            "organisation_id": key,
            "organisation": names[int(key)].name
            if key.isdigit() and int(key) in names
            else f"Organisation {key}",
            "weight": weight,
        }
        for key, weight in sorted(view.contribution_weights.items(), key=lambda item: -item[1])
    ]


def named_submission_metrics(view: GlobalModelView) -> list[dict]:
    """The visible submissions' metrics, each with its id and its organisation's name, by submission id."""
    ids = [int(key) for key in view.submission_metrics if key.isdigit()]
    names = dict(Submission.objects.filter(id__in=ids).values_list("id", "organisation__name"))
    return [
        {"id": int(key), "organisation": names.get(int(key), "?"), **metrics}
        for key, metrics in sorted(view.submission_metrics.items(), key=lambda item: int(item[0]))
        if key.isdigit()
    ]


def _error_text(silo: dict) -> str:
    error = (silo.get("standard_error") or {}).get("balanced_accuracy")
    return "exact" if error is None else f"± {100 * error:.1f} (standard error)"


def named_contribution_values(view: GlobalModelView) -> list[dict]:
    """The visible contribution values with their organisations' names, highest balanced-accuracy value first:
    the value, its error bar as text, the leave-one-out (operator only) and the rank band."""
    silos = (view.contribution_values or {}).get("silos") or {}
    names = Organisation.objects.in_bulk([int(key) for key in silos if key.isdigit()])
    rows = [
        {
            "organisation_id": key,
            "organisation": names[int(key)].name
            if key.isdigit() and int(key) in names
            else f"Organisation {key}",
            "balanced_accuracy": (silo.get("shapley") or {}).get("balanced_accuracy"),
            "accuracy": (silo.get("shapley") or {}).get("accuracy"),
            "error": _error_text(silo),
            "standard_error": (silo.get("standard_error") or {}).get("balanced_accuracy"),
            "leave_one_out": (silo.get("leave_one_out") or {}).get("balanced_accuracy"),
            "rank_band": silo.get("rank_band"),
        }
        for key, silo in silos.items()
    ]
    return sorted(rows, key=lambda row: -(row["balanced_accuracy"] or 0.0))


def named_value_copies(view: GlobalModelView) -> list[list[str]]:
    """The silos valued as one player because their predictions were (nearly) identical (workers.valuation's
    ``duplicates``: a silo that uploaded a copy of another's model), by name; only the operator's view has them."""
    groups = (view.contribution_values or {}).get("duplicates") or []
    names = Organisation.objects.in_bulk(
        [int(key) for group in groups for key in group if key.isdigit()]
    )
    return [
        [
            names[int(key)].name if key.isdigit() and int(key) in names else f"Organisation {key}"
            for key in group
        ]
        for group in groups
    ]


def own_contribution_values(*, organisation_id: int) -> list[dict]:
    """A silo's own value in every global model it contributed to at L0 (its earnings page and API), newest
    first: never another silo's, never an L1 or L2 model's (the module docstring)."""
    rows = []
    models = (
        GlobalModel.objects.filter(contribution_values__silos__has_key=str(organisation_id))
        .select_related("job", "federation")
        .order_by("-id")
    )
    for global_model in models:
        visible = visible_contribution_values(
            global_model,
            visibility=Visibility(
                data_dependent_epsilon=False, every_silo=False, organisation_id=organisation_id
            ),
        )
        own = (visible.get("silos") or {}).get(str(organisation_id))
        if own is None:
            continue
        rows.append(
            {
                "global_model": global_model.id,
                "federation": global_model.federation.slug,
                "rule": visible.get("rule"),
                "estimator": visible.get("estimator"),
                "shapley": own["shapley"],
                "standard_error": own["standard_error"],
                "error": _error_text(own),
                "rank_band": own["rank_band"],
            }
        )
    return rows
