"""What one viewer may see of what a federation publishes (its ``publish_data_dependent_epsilon`` and
``publish_contributions``): the federation's part of the one visibility rule, which :mod:`market.jobs.visibility`
applies to global models and :mod:`market.budgets.selectors` to the ledger's data-dependent ε. Here, not in the jobs
app, so that the budgets can read it without depending on jobs."""

from dataclasses import dataclass

from market.accounts.models import User
from market.federations.models import Federation


@dataclass(frozen=True)
class Visibility:
    """What one viewer may see of a federation's job results. ``organisation_id``: the viewer's own share."""

    data_dependent_epsilon: bool
    every_silo: bool
    organisation_id: int | None
    operator: bool = False


def visibility_for(*, user: User | None, federation: Federation) -> Visibility:
    """``user=None`` is the public: a model card's reader, whoever that is."""
    if user is not None and user.is_operator:
        return Visibility(
            data_dependent_epsilon=True, every_silo=True, organisation_id=None, operator=True
        )
    return Visibility(
        data_dependent_epsilon=federation.publish_data_dependent_epsilon,
        every_silo=federation.publish_contributions,
        organisation_id=getattr(user, "organisation_id", None),
    )
