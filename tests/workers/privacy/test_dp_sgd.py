"""DP-SGD accounting: the market's recomputation agrees with Opacus' RDP accountant where its sums are exact, on the
market's order grid (tests/workers/privacy/test_dp_sgd_accountant.py checks the whole declarable range)."""

import math

import numpy as np
import pytest
import torch
from opacus.accountants import RDPAccountant
from opacus.data_loader import DPDataLoader

from workers.privacy.declarations import party_side_bound, party_side_rdp
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound, noise_multiplier_for
from workers.privacy.rdp import RENYI_ORDERS, epsilon_from_rdp

DECLARATION = {
    "mechanism": "dp_sgd",
    "accountant": "rdp",
    "noise_multiplier": 1.1,
    "max_grad_norm": 1.0,
    "batch_size": 64,
    "epochs": 3,
    "delta": 1e-5,
}


def test_the_bound_is_opacus_rdp_accountant_on_the_same_steps_at_integer_orders():
    parameters = DpSgdParameters.from_declaration(DECLARATION, n_examples=1000)
    report, curve = dp_sgd_privacy_bound(parameters)
    accountant = RDPAccountant()
    for _ in range(parameters.steps):
        accountant.step(noise_multiplier=1.1, sample_rate=1 / 16)
    assert accountant.history == [(1.1, 1 / 16, 48)]  # ⌈1000/64⌉ = 16 steps a epoch, 3 epochs
    integers = np.isin(RENYI_ORDERS, np.arange(2, 65))
    # Opacus' integer-order sums are exact (positive terms); the market's curve is the same, raised by 1e-9
    assert math.isclose(
        epsilon_from_rdp(RENYI_ORDERS[integers], curve[integers], delta=1e-5)[0],
        accountant.get_epsilon(delta=1e-5, alphas=list(RENYI_ORDERS[integers])),
        rel_tol=1e-8,
    )
    # fractional orders can only lower it (here the best order is 5)
    assert report.epsilon <= accountant.get_epsilon(
        delta=1e-5, alphas=list(RENYI_ORDERS[integers])
    ) * (1 + 1e-8)
    # Opacus' exact fractional orders (4.5 here) find 1.6 % less; the chord between integers is an upper bound
    assert (
        accountant.get_epsilon(delta=1e-5)
        <= report.epsilon
        <= 1.02 * accountant.get_epsilon(delta=1e-5)
    )
    assert np.all(np.isfinite(curve))  # the ledger stores it as JSON
    assert (
        report.mechanism,
        report.sigma,
        report.n_queries,
        report.sample_rate,
        report.accountant,
        report.unit,
        report.delta,
    ) == ("dp_sgd", 1.1, 48, 1 / 16, "rdp", "example-level", 1e-5)
    assert epsilon_from_rdp(RENYI_ORDERS, curve, delta=1e-5)[0] == report.epsilon


def test_sample_rate_and_steps_are_what_opacus_derives_from_a_data_loader():
    dataset = torch.utils.data.TensorDataset(torch.zeros(1000, 2))
    loader = DPDataLoader.from_data_loader(torch.utils.data.DataLoader(dataset, batch_size=64))
    parameters = DpSgdParameters(
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        batch_size=64,
        epochs=2,
        n_examples=1000,
        delta=1e-5,
    )
    assert (parameters.sample_rate, parameters.steps) == (loader.sample_rate, 2 * len(loader))


def test_more_epochs_or_less_noise_spend_more():
    def epsilon(**changes):
        return party_side_bound({**DECLARATION, **changes}, n_local_examples=1000)[0].epsilon

    assert epsilon(epochs=3) < epsilon(epochs=6)
    assert epsilon(noise_multiplier=1.1) < epsilon(noise_multiplier=0.8)


def test_the_stored_report_gives_back_its_curve():
    report, curve = party_side_bound(DECLARATION, n_local_examples=1000)
    np.testing.assert_array_equal(party_side_rdp(report), curve)
    assert set(report.as_dict()) >= {"sample_rate", "accountant", "max_grad_norm"}


def test_vote_noise_reports_keep_their_shape():
    report, _ = party_side_bound(
        {"gamma": 0.04, "delta": 1e-5, "partitions": 2, "teachers": 5, "queries": 30},
        n_local_examples=1000,
    )
    assert "sample_rate" not in report.as_dict() and report.mechanism == "laplace"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"accountant": "prv"}, "Opacus' 'rdp' accountant"),
        ({"epochs": 0}, "'epochs' must be an integer between 1 and 10000"),
        ({"noise_multiplier": -1.0}, "'noise_multiplier' must be a positive number"),
        ({"noise_multiplier": float("nan")}, "'noise_multiplier' must be a positive number"),
        ({"batch_size": 2.5}, "'batch_size' must be an integer"),
        ({"delta": 2}, "δ must be a number strictly between 0 and 1"),
        ({"steps": 3}, "unknown steps"),
    ],
)
def test_a_malformed_declaration_is_refused_with_a_sentence(changes, message):
    with pytest.raises(ValueError, match=message):
        party_side_bound({**DECLARATION, **changes}, n_local_examples=1000)


def test_a_declaration_missing_a_parameter_names_it():
    with pytest.raises(ValueError, match="missing max_grad_norm"):
        party_side_bound(
            {k: v for k, v in DECLARATION.items() if k != "max_grad_norm"}, n_local_examples=1000
        )


def test_the_noise_for_a_target_epsilon_spends_at_most_that():
    sigma = noise_multiplier_for(
        target_epsilon=2.0, batch_size=64, epochs=3, n_examples=1000, delta=1e-5
    )
    report, _ = party_side_bound({**DECLARATION, "noise_multiplier": sigma}, n_local_examples=1000)
    assert 1.9 < report.epsilon <= 2.0
