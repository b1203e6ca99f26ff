"""The audit log as people read it: who acted (the actor and the actor's own organisation, and apart from it the
organisation the event concerns), each event's object by its name and as a link where the app has a page for
it, its action by a readable name (the code stays beside it, for the filter), and its details as labelled
values: amounts in credits (the log stores cents), numbers rounded as every page rounds them (workers.numbers),
JSON for nested values, never a Python repr."""

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.urls import reverse

from market.accounts.models import ApiToken
from market.augmentations.models import Augmentation
from market.budgets.models import PrivacyBudget
from market.commerce.models import CreditRequest, Listing, Purchase, WalletEntry
from market.federations.models import (
    EvaluationSplit,
    Federation,
    JoinRequest,
    Membership,
    PublicDataset,
)
from market.invitations.models import Invitation
from market.jobs.models import GlobalModel, Job
from market.submissions.models import Submission
from workers.numbers import credits_text, epsilon_text, rounded_floats


@dataclass(frozen=True)
class ObjectKind:
    """How one ``object_type`` of the log is fetched, named and linked (the link may be '')."""

    model: type
    related: tuple[str, ...]
    name: Callable[[object], str]
    url: Callable[[object], str]


OBJECT_KINDS = {
    "Federation": ObjectKind(
        model=Federation,
        related=(),
        name=lambda federation: federation.name,
        url=lambda federation: reverse("federation-detail", args=[federation.slug]),
    ),
    "Job": ObjectKind(
        model=Job,
        related=("federation",),
        name=lambda job: (
            f"Job #{job.id} ({job.get_kind_display()}, {job.privacy_level}) in "
            f"{job.federation.name}"
        ),
        url=lambda job: reverse("job-detail", args=[job.id]),
    ),
    "GlobalModel": ObjectKind(
        model=GlobalModel,
        related=("federation",),
        name=lambda model: (
            f"Global model of job #{model.job_id} ({model.model_family}) in {model.federation.name}"
        ),
        url=lambda model: reverse("job-detail", args=[model.job_id]),
    ),
    "Listing": ObjectKind(
        model=Listing,
        related=(),
        name=lambda listing: f"Listing “{listing.name}”",
        url=lambda listing: reverse("commerce-listing", args=[listing.id]),
    ),
    "Purchase": ObjectKind(
        model=Purchase,
        related=("listing", "buyer_organisation"),
        name=lambda purchase: (
            f"Sale #{purchase.id} of “{purchase.listing.name}” to "
            f"{purchase.buyer_organisation.name}"
        ),
        url=lambda purchase: reverse("commerce-listing", args=[purchase.listing_id]),
    ),
    "PrivacyBudget": ObjectKind(
        model=PrivacyBudget,
        related=("organisation", "federation"),
        name=lambda budget: (
            f"Privacy budget of {budget.organisation.name} in {budget.federation.name}"
        ),
        url=lambda budget: reverse("budget-dashboard", args=[budget.federation.slug]),
    ),
    "WalletEntry": ObjectKind(
        model=WalletEntry,
        related=("wallet__organisation",),
        name=lambda entry: (
            f"{entry.get_kind_display()} of {credits_text(abs(entry.amount_cents))} credits, "
            + (
                f"wallet of {entry.wallet.organisation.name}"
                if entry.wallet.organisation
                else "market wallet"
            )
        ),
        url=lambda entry: (
            reverse("money-ledger", args=[entry.wallet.organisation_id])
            if entry.wallet.organisation_id
            else reverse("money")
        ),
    ),
    "CreditRequest": ObjectKind(
        model=CreditRequest,
        related=("organisation",),
        name=lambda request: f"Credit request #{request.id} of {request.organisation.name}",
        url=lambda request: reverse("money-ledger", args=[request.organisation_id]),
    ),
    "Submission": ObjectKind(
        model=Submission,
        related=("organisation", "federation"),
        name=lambda submission: (
            f"Submission #{submission.id} of {submission.organisation.name} to "
            f"{submission.federation.name}"
        ),
        url=lambda submission: "",
    ),
    "Augmentation": ObjectKind(
        model=Augmentation,
        related=("federation",),
        name=lambda augmentation: (
            f"Augmentation #{augmentation.id} in {augmentation.federation.name}"
        ),
        url=lambda augmentation: reverse("augmentation-detail", args=[augmentation.id]),
    ),
}


def _members_tab(federation) -> str:
    return reverse("federation-detail", args=[federation.slug]) + "?tab=members"


# Membership, people and data: named by whom and what they are about, linked to the page that shows them.
OBJECT_KINDS |= {
    "Invitation": ObjectKind(
        model=Invitation,
        related=("organisation", "federation"),
        name=lambda invitation: (
            f"Invitation of {invitation.organisation_label}"
            + (f" into {invitation.federation.name}" if invitation.federation_id else "")
        ),
        url=lambda invitation: reverse("invitation-list"),
    ),
    "JoinRequest": ObjectKind(
        model=JoinRequest,
        related=("organisation", "federation"),
        name=lambda join_request: (
            f"Join request of {join_request.organisation.name} to {join_request.federation.name}"
        ),
        url=lambda join_request: _members_tab(join_request.federation),
    ),
    "Membership": ObjectKind(
        model=Membership,
        related=("organisation", "federation"),
        name=lambda membership: (
            f"Membership of {membership.organisation.name} in {membership.federation.name}"
        ),
        url=lambda membership: _members_tab(membership.federation),
    ),
    "PublicDataset": ObjectKind(
        model=PublicDataset,
        related=("federation",),
        name=lambda dataset: f"Public data of {dataset.federation.name} ({dataset.n_rows} rows)",
        url=lambda dataset: reverse("federation-data", args=[dataset.federation.slug]),
    ),
    "EvaluationSplit": ObjectKind(
        model=EvaluationSplit,
        related=("federation",),
        name=lambda split: f"Evaluation split of {split.federation.name} ({split.n_rows} rows)",
        url=lambda split: reverse("federation-data", args=[split.federation.slug]),
    ),
    "ApiToken": ObjectKind(
        model=ApiToken,
        related=("user",),
        name=lambda token: f"API token “{token.name}” of {token.user.username}",
        url=lambda token: "",  # the tokens page shows only the reader's own
    ),
}


def _objects(events) -> dict[tuple[str, str], object]:
    """The objects of the events, fetched once per type."""
    ids = defaultdict(set)
    for event in events:
        if event.object_type in OBJECT_KINDS and event.object_id.isdecimal():
            ids[event.object_type].add(int(event.object_id))
    found = {}
    for object_type, object_ids in ids.items():
        kind = OBJECT_KINDS[object_type]
        for pk, instance in (
            kind.model.objects.select_related(*kind.related).in_bulk(list(object_ids)).items()
        ):
            found[(object_type, str(pk))] = instance
    return found


def _object_label(event, instance) -> tuple[str, str]:
    """(name, link) of an event's object; a deleted or unnamed object keeps its type and id."""
    if not event.object_type:
        return "", ""
    if instance is None:
        return f"{event.object_type} #{event.object_id}", ""
    kind = OBJECT_KINDS[event.object_type]
    return kind.name(instance), kind.url(instance)


def who_acted(event) -> dict:
    """The actor, the actor's own organisation (or "market operator"), and the organisation the event concerns
    when it is another (an operator's top-up concerns the buyer's organisation; the operator is not of it)."""
    actor = event.actor
    if actor is None:
        actor_name, actor_of = "system", ""
    else:
        actor_name = actor.username
        actor_of = actor.organisation.name if actor.organisation_id else ""
        if actor.is_operator:
            actor_of = f"market operator{f', {actor_of}' if actor_of else ''}"
    concerns = event.organisation.name if event.organisation_id else ""
    if actor is not None and event.organisation_id == actor.organisation_id:
        concerns = ""
    return {"actor": actor_name, "actor_of": actor_of, "concerns": concerns}


# Actions whose code does not read as words by the rule of :func:`action_name`.
ACTION_NAMES = {
    "account.role_changed": "Role changed",
    "audit.exported": "Audit log exported",
    "auth.sign_in": "Signed in",
    "auth.sign_in_locked": "Sign-in locked after failures",
    "budget.ledger_exported": "Budget ledger exported",
    "budget.refused": "Budget refused a spend",
    "job.launched_despite_estimate": "Job launched despite its estimate",
    "listing.publish_gate_overridden": "Publish gate overridden",
    "model.download_link_created": "Download link made",
    "model.predicted": "Predictions made",
    "operator.first_created": "First operator created",
    "public_dataset.uploaded": "Public data uploaded",
    "purchase.created": "Model bought",
    "token.created": "API token created",
    "token.revoked": "API token revoked",
    "wallet.credit_request_approved": "Credit request approved",
    "wallet.credit_request_declined": "Credit request declined",
    "wallet.credit_requested": "Credits requested",
    "wallet.payout_recorded": "Payout recorded",
    "wallet.topped_up": "Wallet topped up",
}


def action_name(action: str) -> str:
    """An audit action as words: "membership.requested" → "Membership requested", "webhook.secret_rotated" →
    "Webhook secret rotated"; the few that do not read so have their own name (ACTION_NAMES)."""
    if action in ACTION_NAMES:
        return ACTION_NAMES[action]
    words = action.replace(".", " ").replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def readable_value(value) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(rounded_floats(value), ensure_ascii=False, sort_keys=True)
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "—"}[value]
    if isinstance(value, float):
        return epsilon_text(value)  # three significant figures, as every page rounds
    return str(value)


def _moment(text: str) -> str:
    """An ISO 8601 time as the log's own column shows times (UTC, to the minute); other text as it is."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return text
    if moment.tzinfo is None:
        return text
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def readable_detail(key: str, value) -> tuple[str, str]:
    """A detail as a label and a value; ``*_cents`` amounts are shown in credits, ``*_at`` times as UTC."""
    if key.endswith("_cents") and isinstance(value, int) and not isinstance(value, bool):
        return key.removesuffix("_cents").replace("_", " "), f"{credits_text(value)} credits"
    if key.endswith("_at") and isinstance(value, str):
        return key.replace("_", " "), _moment(value)
    return key.replace("_", " "), readable_value(value)


def audit_rows(events) -> list[dict]:
    events = list(events)
    objects = _objects(events)
    rows = []
    for event in events:
        label, url = _object_label(event, objects.get((event.object_type, event.object_id)))
        rows.append(
            {
                "event": event,
                "who": who_acted(event),
                "object_url": url,
                "object_label": label,
                "action_name": action_name(event.action),
                "details": [
                    readable_detail(key, value)
                    for key, value in sorted((event.details or {}).items())
                    if value != ""  # an empty note or reason says nothing
                ],
            }
        )
    return rows
