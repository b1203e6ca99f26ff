"""An FAug generator with a DP discriminator as a spender of privacy (:class:`market.budgets.spending.Spender`).

The discriminator's DP-SGD run is known before training (σ, sampling rate, steps), so its example-level ε is
reserved for every silo that contributed seeds when training starts, charged when the generator is published and
released when training fails or is cancelled (nothing was published)."""

from collections.abc import Mapping
from dataclasses import dataclass

from market.accounts.models import User
from market.augmentations.models import Augmentation
from market.budgets.spending import SpenderKind, budget_charge, budget_release, budget_reserve
from market.federations.models import Federation
from workers.privacy.costs import PrivacyCost
from workers.privacy.declarations import party_side_rdp
from workers.privacy.reports import EXAMPLE_LEVEL, PrivacyReport

AUGMENTATION_SPENDER = SpenderKind(
    spender_kind="augmentation", label="Augmentation", page="augmentation-detail"
)


@dataclass
class AugmentationSpender:
    """Its cost is the DP-SGD run stored on the row at start (``privacy_report``), the same for every silo."""

    augmentation: Augmentation
    spender_kind = AUGMENTATION_SPENDER.spender_kind
    privacy_unit = EXAMPLE_LEVEL

    @property
    def id(self) -> int:
        return self.augmentation.id

    @property
    def federation(self) -> Federation:
        return self.augmentation.federation

    def privacy_costs(self) -> Mapping[int, PrivacyCost]:
        report = PrivacyReport(**self.augmentation.privacy_report)
        cost = PrivacyCost(
            report=report, rdp=tuple(float(value) for value in party_side_rdp(report))
        )
        silos = self.augmentation.seeds.values_list("organisation_id", flat=True)
        return {organisation_id: cost for organisation_id in silos}


def _line_parameters(augmentation: Augmentation) -> dict:
    return {"privacy": augmentation.privacy_parameters}


def augmentation_budget_reserve(*, augmentation: Augmentation, actor: User | None) -> None:
    """Reserve the discriminator's ε (``augmentation.privacy_report``) for each silo with seeds, or raise
    BudgetExceeded without writing; idempotent. Call inside the transaction that queues the training."""
    budget_reserve(
        spender=AugmentationSpender(augmentation),
        actor=actor,
        parameters=_line_parameters(augmentation),
        described_as=f"the DP generator of augmentation #{augmentation.id}",
    )


def augmentation_budget_charge(*, augmentation: Augmentation) -> None:
    """Charge what was reserved (the generator is published); idempotent. Without a DP discriminator nothing was
    reserved and nothing is charged."""
    if not augmentation.private:
        return
    budget_charge(
        spender=AugmentationSpender(augmentation), parameters=_line_parameters(augmentation)
    )


def augmentation_budget_release(*, augmentation: Augmentation) -> None:
    """Release the open reservations (training failed or was cancelled, nothing published); idempotent."""
    budget_release(spender=AugmentationSpender(augmentation))
