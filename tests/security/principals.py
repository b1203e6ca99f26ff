"""The authorisation matrix's vocabulary: the principals, the outcome classes and the rules that say which
principal reaches an operation on an object owned by another (read by the API and the pages matrices)."""

from dataclasses import dataclass

from tests.fixtures.security import SILOS

PRINCIPALS = ("silo_a", "silo_b", "buyer_a", "buyer_b", "operator", "anonymous")
ALLOW, FORBIDDEN, HIDDEN, SIGN_IN = "allow", 403, 404, 401
REFUSED = "refused"  # 400, 403, 404 or 415: never reached the operation's effect (validation ran before the check)


def outcome_class(status: int) -> str | int:
    if status in (401, 403, 404):
        return status
    if 200 <= status < 300 or status in (400, 409, 415):
        return ALLOW
    return status  # a 5xx, a 405... is never expected


def matches(expected, status: int) -> bool:
    if expected == REFUSED:
        return status in (400, 403, 404, 415)
    return outcome_class(status) == expected


@dataclass(frozen=True)
class Rule:
    """Expected outcome per (principal, owner of the target); ``targets`` names the world's objects to try."""

    targets: str
    decide: object  # (principal, owner) -> expected

    def expected(self, principal: str, owner: str | None):
        if principal == "anonymous" and not self.targets.startswith(
            "public"
        ):  # a download link needs its signed-in buyer too
            return SIGN_IN
        return self.decide(principal, owner)


def signed_in(principal, owner):
    return ALLOW


def operator_only(principal, owner):
    return ALLOW if principal == "operator" else FORBIDDEN


def operator_only_after_validation(principal, owner):
    return ALLOW if principal == "operator" else REFUSED


def owner_or_operator_else_hidden(principal, owner):
    return ALLOW if principal in (owner, "operator") else HIDDEN


def members_of_the_federation(principal, owner):
    return ALLOW if principal in SILOS | {"operator"} else FORBIDDEN


def job_participants(principal, owner):
    """The job used both silos' submissions; buyers did not launch it."""
    return ALLOW if principal in SILOS | {"operator"} else HIDDEN


def job_participants_and_buyers(principal, owner):
    """The global model: its job's participants (job_participants) and buyer_a, who bought it; buyer_b, who did
    not, sees no such model."""
    return ALLOW if principal in SILOS | {"operator", "buyer_a"} else HIDDEN


def operators_else_hidden(principal, owner):
    """A pre-flight estimate is the operator's alone (market.jobs.visibility.estimate_visible): to anyone else,
    silos and buyers alike, there is no such estimate."""
    return ALLOW if principal == "operator" else HIDDEN


def exchange_members(principal, owner):
    """The exchange's federation has both silos; buyers are not members and see no such exchange."""
    return ALLOW if principal in SILOS | {"operator"} else HIDDEN


def operators_act_members_are_refused(principal, owner):
    """Starting a generator's training: operators only; a member silo is told no, a buyer sees no such thing."""
    return {"operator": ALLOW, "silo_a": FORBIDDEN, "silo_b": FORBIDDEN}.get(principal, HIDDEN)


def own_logits(principal, owner):
    """Only the silo that uploaded a round's logits downloads its global logits; to anyone else there are none."""
    return ALLOW if principal == owner else HIDDEN


def entitled_to_the_model(principal, owner):
    """buyer_a bought the listed model; operators may use every model; anyone else sees no such model."""
    return ALLOW if principal in ("buyer_a", "operator") else HIDDEN


def listing_manager(principal, owner):
    if principal == "operator":
        return ALLOW
    return HIDDEN if owner == "draft" else FORBIDDEN  # a draft's existence is private


def listing_reader(principal, owner):
    return ALLOW if owner == "published" or principal == "operator" else HIDDEN


def purchaser(principal, owner):
    if owner == "draft" and principal != "operator":
        return HIDDEN
    return (
        FORBIDDEN if principal == "operator" else ALLOW
    )  # operators buy nothing; the rest get 409 (funds, owned)


def own_organisation_or_operator(principal, owner):
    return ALLOW if principal in (owner, "operator") else HIDDEN


def joiner(principal, owner):
    return ALLOW if principal in SILOS else FORBIDDEN


def budget_operator_change(principal, owner):
    return ALLOW if principal == "operator" else REFUSED


def job_canceller(principal, owner):
    return {"operator": ALLOW, "silo_a": FORBIDDEN, "silo_b": FORBIDDEN}.get(principal, HIDDEN)


def own_wallet(principal, owner):
    return HIDDEN if principal == "operator" else ALLOW  # operators belong to no organisation


def own_earnings(principal, owner):
    return FORBIDDEN if principal == "operator" else ALLOW


def own_token(principal, owner):
    return (
        ALLOW if principal == owner else HIDDEN
    )  # operators do not manage other people's tokens either


def anyone(principal, owner):
    return ALLOW


def forged_link(principal, owner):
    return FORBIDDEN


def invitation_link_holder(principal, owner):
    """Whoever holds an invitation's link, signed in or not, may open it; a link the market never made is not
    found."""
    return ALLOW if owner == "open" else HIDDEN


def own_organisation_only(principal, owner):
    """Webhook endpoints and deliveries: their organisation's members only; operators, who belong to none, and
    other organisations see no such thing."""
    return ALLOW if principal == owner else HIDDEN


def members_or_refused(principal, owner):
    return ALLOW if principal in SILOS | {"operator"} else REFUSED
