"""Contribution values (issue 28) computed by the job's finalize for every kind with a vote or an average."""

import re

import pytest

from tests.fixtures.jobs import FAST_FEDKT
from tests.market.jobs.helpers import launch, succeeded


def _run(operator, submissions, capture, *, kind, parameters, seed=7):
    body = launch(
        operator,
        submissions[0].federation,
        capture,
        kind=kind,
        privacy_level="L0",
        parameters=parameters,
        seed=seed,
    )
    return succeeded(body).global_model


@pytest.mark.parametrize(
    ("kind", "parameters", "rule"),
    [
        ("fedkt", FAST_FEDKT, "vote"),
        ("ensemble", {}, "average"),
        ("distill", {"query": 300, "final_model": {"family": "logistic_regression"}}, "average"),
    ],
)
def test_a_job_stores_each_silos_exact_shapley_value_of_its_own_combination(
    eager_celery,
    operator,
    fedkt_submissions,
    django_capture_on_commit_callbacks,
    kind,
    parameters,
    rule,
):
    model = _run(
        operator,
        fedkt_submissions,
        django_capture_on_commit_callbacks,
        kind=kind,
        parameters=parameters,
    )
    values = model.contribution_values
    organisations = {str(s.organisation_id) for s in fedkt_submissions}
    assert set(values["silos"]) == organisations
    assert (values["rule"], values["estimator"], values["permutations"]) == (rule, "exact", None)
    assert values["rows"] == sum(map(sum, model.metrics["confusion_matrix"]))
    for measure in ("balanced_accuracy", "accuracy"):
        total = sum(silo["shapley"][measure] for silo in values["silos"].values())
        assert total == pytest.approx(
            values["grand_coalition"][measure] - values["empty_coalition"][measure]
        )
        assert values["empty_coalition"][measure] == pytest.approx(0.5)
    assert sorted(silo["rank"] for silo in values["silos"].values()) == [1, 2, 3]
    assert all(silo["standard_error"] is None for silo in values["silos"].values())
    # the job's log says how long the valuation took, and names no silo's value (every participant reads it)
    logged = model.job.log_entries.get(message__startswith="Contribution values of").message
    assert re.fullmatch(
        rf"Contribution values of 3 silo\(s\) \(exact Shapley, {values['rows']} rows\) computed in "
        r"[0-9]+\.[0-9]{2} s\.",
        logged,
    ), logged


@pytest.mark.parametrize(
    ("kind", "parameters", "details", "rule"),
    [
        ("fedkt", {}, {}, "vote"),  # the default vote: consistent_hard
        ("fedkt", {"vote": "consistent_hard"}, {}, "vote"),
        ("fedkt", {"vote": "class_weighted"}, {}, "vote"),
        ("fedkt", {"vote": "soft"}, {}, "average"),
        ("fedkt", {"vote": "auto"}, {"auto": {"chosen": "class_weighted"}}, "vote"),
        ("fedkt", {"vote": "auto"}, {"auto": {"chosen": "soft"}}, "average"),
        ("fedkt", {"vote": "auto"}, {"auto": {"chosen": "ensemble_selected"}}, "average"),
        ("fedkt", {"vote": "auto"}, {"auto": {"chosen": "stacked"}}, "average"),
        # the operator's rows alone used no silo: nothing to value (issue 39)
        ("fedkt", {"vote": "auto"}, {"auto": {"chosen": "operator_only"}}, None),
        ("ensemble", {}, {}, "average"),
        ("distill", {}, {}, "average"),
        ("stack", {}, {}, "average"),
        ("cpfl", {}, {}, "cohort"),
    ],
)
def test_every_kind_and_vote_is_valued_with_the_combination_its_global_model_uses(
    kind, parameters, details, rule
):
    from market.jobs.models import Job
    from workers.algorithms.registry import ALGORITHMS
    from workers.runner.valuing import valuation_rule

    assert kind in ALGORITHMS
    assert valuation_rule(Job(kind=kind, parameters=parameters), details) == rule


def test_every_registered_kind_has_a_valuation_rule():
    from market.jobs.models import Job
    from workers.algorithms.registry import ALGORITHMS
    from workers.runner.valuing import valuation_rule

    assert {kind: valuation_rule(Job(kind=kind, parameters={}), {}) for kind in ALGORITHMS} == {
        "fedkt": "vote",
        "ensemble": "average",
        "distill": "average",
        "stack": "average",
        "cpfl": "cohort",
    }


def test_a_cohort_distillation_job_values_its_count_weighted_teacher(
    eager_celery, operator, fedkt_submissions, django_capture_on_commit_callbacks
):
    from market.submissions.models import Submission

    for submission, distribution in zip(fedkt_submissions, ([500, 166], [400, 266], [600, 66])):
        Submission.objects.filter(id=submission.id).update(label_distribution=distribution)
    model = _run(
        operator,
        fedkt_submissions,
        django_capture_on_commit_callbacks,
        kind="cpfl",
        parameters={"query": 300, "student": {"family": "mlp", "hidden_sizes": [16], "epochs": 5}},
    )
    values = model.contribution_values
    assert (values["rule"], values["estimator"]) == ("cohort", "exact")
    assert set(values["silos"]) == {str(s.organisation_id) for s in fedkt_submissions}
    total = sum(silo["shapley"]["balanced_accuracy"] for silo in values["silos"].values())
    assert total == pytest.approx(values["grand_coalition"]["balanced_accuracy"] - 0.5)
