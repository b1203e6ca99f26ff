"""L2 submissions of networks trained with DP-SGD: the market recomputes ε with Opacus' RDP accountant, refuses
an under-claim with a sentence and charges an accepted declaration exactly once."""

import json
import math

import pytest
from opacus.accountants import RDPAccountant

from market.budgets.ledger import epsilon_decimal
from market.budgets.models import BudgetEntry, PrivacyBudget
from market.budgets.services import budget_charge_for_submission
from market.submissions.models import Submission
from tests.market.submissions.helpers import stored_files, submit
from workers.privacy.rdp import RENYI_ORDERS

N_LOCAL_EXAMPLES = 2000
DP_SGD = {
    "mechanism": "dp_sgd",
    "accountant": "rdp",
    "noise_multiplier": 1.0,
    "max_grad_norm": 1.0,
    "batch_size": 100,
    "epochs": 4,
    "delta": 1e-5,
}


def opacus_epsilon(declaration: dict) -> float:
    """Opacus' own RDP accountant, stepped as its DataLoader would: ⌈2000/100⌉ = 20 steps an epoch at q = 1/20."""
    accountant = RDPAccountant()
    for _ in range(declaration["epochs"] * 20):
        accountant.step(noise_multiplier=declaration["noise_multiplier"], sample_rate=1 / 20)
    return accountant.get_epsilon(delta=declaration["delta"], alphas=list(RENYI_ORDERS))


def submit_dp_sgd(api, model_files, *, epsilon, declaration=DP_SGD, model_family="mlp"):
    return submit(
        api,
        {"network.safetensors": model_files["network.safetensors"]},
        privacy_level="L2",
        model_family=model_family,
        n_local_examples=N_LOCAL_EXAMPLES,
        declared_epsilon=epsilon,
        privacy_parameters=json.dumps(declaration),
    )


def test_a_dp_sgd_declaration_of_its_exact_epsilon_is_accepted_and_charged_once(
    silo_api, silo_user, federation_with_data, model_files
):
    epsilon = opacus_epsilon(DP_SGD)
    response = submit_dp_sgd(silo_api, model_files, epsilon=epsilon)
    assert response.status_code == 202, response.json()
    report = response.json()["privacy_report"]
    assert math.isclose(report["epsilon"], epsilon, rel_tol=1e-12)
    assert (
        report["mechanism"],
        report["accountant"],
        report["sigma"],
        report["n_queries"],
        report["sample_rate"],
        report["unit"],
    ) == ("dp_sgd", "rdp", 1.0, 80, 1 / 20, "example-level")
    budget = PrivacyBudget.objects.get(
        federation=federation_with_data, organisation=silo_user.organisation
    )
    [entry] = budget.entries.all()
    assert (entry.kind, entry.submission_id, entry.epsilon) == (
        "charge",
        response.json()["id"],
        epsilon_decimal(epsilon),
    )
    assert (budget.spent, budget.composition_rule) == (
        epsilon_decimal(epsilon),
        "rdp",
    )  # its curve composes
    budget_charge_for_submission(
        submission=Submission.objects.get(id=response.json()["id"]), actor=silo_user
    )
    assert (
        BudgetEntry.objects.count() == 1
    )  # charged exactly once, however often the charge is asked for


def test_a_dp_sgd_under_claim_is_refused_with_a_sentence_and_nothing_stored(
    silo_api, federation_with_data, model_files, media_root
):
    epsilon = opacus_epsilon(DP_SGD)
    response = submit_dp_sgd(silo_api, model_files, epsilon=round(epsilon * 0.9, 3))
    assert response.status_code == 400
    assert response.json()["detail"] == (
        f"You declared ε = {round(epsilon * 0.9, 3):g}, but these parameters spend ε = {epsilon:.4g} (example-level, "
        "80 DP-SGD steps at sample rate 0.05, Opacus' RDP accountant, δ = 1e-05); declare at least that."
    )
    assert (Submission.objects.count(), BudgetEntry.objects.count(), stored_files(media_root)) == (
        0,
        0,
        [],
    )


@pytest.mark.parametrize(
    "changes, model_family, sentence",
    [
        (
            {},
            "random_forest",
            "DP-SGD trains networks: a DP-SGD declaration goes with model family mlp or cnn, "
            "not random_forest.",
        ),
        (
            {"accountant": "prv"},
            "mlp",
            "The L2 privacy parameters are not valid: The market accounts DP-SGD with "
            "Opacus' 'rdp' accountant; declare \"accountant\": \"rdp\", not 'prv'.",
        ),
        (
            {"epochs": None},
            "mlp",
            "The L2 privacy parameters are not valid: 'epochs' must be an integer between 1 and "
            "10000, not None.",
        ),
    ],
)
def test_a_malformed_dp_sgd_declaration_is_refused(
    silo_api, federation_with_data, model_files, changes, model_family, sentence
):
    response = submit_dp_sgd(
        silo_api,
        model_files,
        epsilon=5.0,
        declaration={**DP_SGD, **changes},
        model_family=model_family,
    )
    assert (response.status_code, response.json()["detail"]) == (400, sentence)
    assert (Submission.objects.count(), BudgetEntry.objects.count()) == (0, 0)
