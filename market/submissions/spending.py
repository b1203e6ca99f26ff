"""An L2 submission as a spender of privacy (:class:`market.budgets.spending.Spender`): its declared ε is charged to
its silo's budget when the upload is accepted, with no reservation before (the silo chose to spend it)."""

from collections.abc import Mapping
from dataclasses import dataclass

from market.accounts.models import User
from market.budgets.ledger import budget_delta
from market.budgets.spending import SpenderKind, budget_charge
from market.errors import InvalidInput
from market.federations.models import Federation, PrivacyLevel
from market.submissions.models import Submission
from workers.privacy.costs import PrivacyCost, declared_cost, declared_cost_at
from workers.privacy.declarations import party_side_rdp
from workers.privacy.reports import DP_SGD_MECHANISM, PrivacyReport

#: No page of its own, and no notice: the silo that uploaded it chose to spend its ε.
SUBMISSION_SPENDER = SpenderKind(spender_kind="submission", label="Submission", notifies=False)


@dataclass
class SubmissionSpender:
    submission: Submission
    spender_kind = SUBMISSION_SPENDER.spender_kind

    @property
    def id(self) -> int:
        return self.submission.id

    @property
    def federation(self) -> Federation:
        return self.submission.federation

    @property
    def privacy_unit(self) -> str:
        return self.submission.privacy_report["unit"]

    def privacy_costs(self) -> Mapping[int, PrivacyCost]:
        submission = self.submission
        delta = budget_delta(
            federation=submission.federation, organisation_id=submission.organisation_id
        )
        return {
            submission.organisation_id: submission_privacy_cost(
                submission, budget_delta=float(delta)
            )
        }


def submission_privacy_cost(submission: Submission, *, budget_delta: float) -> PrivacyCost:
    """A declared δ above the budget's is refused. DP-SGD: recomputed at the budget's δ from the declared σ,
    sample rate and steps (at least the declared ε), composed through RDP. FedKT vote noise: the declared (ε, δ),
    composed through RDP when it is exactly the bound, else additively."""
    report = PrivacyReport(**submission.privacy_report)
    if report.delta > budget_delta:
        raise InvalidInput(
            f"You declared δ = {report.delta:g}, but your privacy budget in '{submission.federation.slug}' "
            f"holds at δ = {budget_delta:g}; train and declare at δ ≤ {budget_delta:g}."
        )
    curve = party_side_rdp(report)  # FedKT vote noise or DP-SGD (workers.privacy.dp_sgd)
    if report.mechanism == DP_SGD_MECHANISM:
        return declared_cost_at(
            epsilon=float(submission.declared_epsilon),
            delta=budget_delta,
            bound=report,
            bound_rdp=curve,
        )
    return declared_cost(
        epsilon=float(submission.declared_epsilon),
        delta=report.delta,
        bound=report,
        bound_rdp=curve,
    )


def submission_budget_charge(*, submission: Submission, actor: User | None) -> None:
    """Charge an L2 submission's declared ε to its silo's budget, or raise BudgetExceeded without writing.

    Call inside the transaction that stores the submission. Other levels cost nothing here."""
    if submission.privacy_level != PrivacyLevel.L2 or not submission.privacy_report:
        return
    budget_charge(
        spender=SubmissionSpender(submission),
        actor=actor,
        parameters={
            "privacy": submission.privacy_parameters,
            "declared_epsilon": submission.declared_epsilon,
        },
        described_as="this submission's declared ε",
    )
