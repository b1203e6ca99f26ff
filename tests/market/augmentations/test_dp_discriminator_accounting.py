"""Issue 32: an augmentation with ``noise_multiplier: 1000`` could not start (Opacus' ε was negative and the ledger's
CHECK refused it: 500 on every attempt). Its DP discriminator now reserves the positive ε the accountant gives."""

from market.budgets.ledger import epsilon_decimal
from market.budgets.models import BudgetEntry
from tests.market.augmentations.helpers import open_augmentation, seeds, upload
from workers.privacy.dp_sgd import DpSgdParameters, dp_sgd_privacy_bound


def test_the_largest_noise_multiplier_starts_and_reserves_a_positive_epsilon(
    operator_api, three_silos
):
    augmentation = open_augmentation(operator_api, noise_multiplier=1000.0, batch_size=1)
    for index, user in enumerate(three_silos[:2]):
        assert upload(user, augmentation["id"], seeds(index)).status_code == 201
    started = operator_api.post(f"/api/augmentations/{augmentation['id']}/start/")
    assert started.status_code == 202, started.json()
    expected, _ = dp_sgd_privacy_bound(
        DpSgdParameters(
            noise_multiplier=1000.0,
            max_grad_norm=1.0,
            batch_size=1,
            epochs=2,
            n_examples=5,  # 2 + 3 seeds: q = 1/5, 10 steps
            delta=1e-5,
        )
    )
    assert started.json()["epsilon"] == expected.epsilon > 0
    reserved = BudgetEntry.objects.filter(
        kind="reserve", spender_kind="augmentation", spender_id=augmentation["id"]
    )
    assert {entry.epsilon for entry in reserved} == {epsilon_decimal(expected.epsilon)}
    assert reserved.count() == 2
