from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from market.accounts.models import User
from market.errors import Conflict, NotFound
from market.exchanges.models import Exchange, ExchangeRound, LogitUpload, RoundStatus
from market.federations.models import Federation, Membership


def exchange_list(*, user: User, federation: Federation | None = None) -> QuerySet:
    """Operators see every exchange; a silo those of its federations (only ``federation``'s, where given)."""
    exchanges = Exchange.objects.select_related("federation")
    if federation is not None:
        exchanges = exchanges.filter(federation=federation)
    if user.is_operator:
        return exchanges
    federations = Membership.objects.filter(organisation_id=user.organisation_id).values(
        "federation_id"
    )
    return exchanges.filter(federation_id__in=federations)


def exchange_get(*, exchange_id: int, user: User) -> Exchange:
    exchange = exchange_list(user=user).filter(id=exchange_id).first()
    if exchange is None:
        raise NotFound(f"There is no exchange #{exchange_id}.")
    return exchange


def exchange_rounds(*, exchange: Exchange, user: User) -> QuerySet:
    """The rounds with their participation and payload (bits uploaded; the same again downloaded when aggregated),
    and whether the viewer's organisation took part."""
    return exchange.exchange_rounds.annotate(
        participants=Count("uploads"),
        own_uploads=Count("uploads", filter=Q(uploads__organisation_id=user.organisation_id)),
    ).order_by("number")


def exchange_round_get(*, exchange: Exchange, number: int) -> ExchangeRound:
    exchange_round = exchange.exchange_rounds.filter(number=number).first()
    if exchange_round is None:
        raise NotFound(f"Exchange #{exchange.id} has no round {number}.")
    return exchange_round


def logits_download(*, exchange_round: ExchangeRound, user: User) -> LogitUpload:
    """The viewer's own upload of the round, with its global logits; a silo never sees another's."""
    upload = (
        exchange_round.uploads.filter(organisation_id=user.organisation_id).first()
        if user.organisation_id
        else None
    )
    if upload is None:
        raise NotFound(
            f"Your organisation uploaded no logits in round {exchange_round.number}; only participants "
            "download a round's global logits."
        )
    if exchange_round.status in (RoundStatus.OPEN, RoundStatus.CLOSING):
        raise Conflict(
            f"Round {exchange_round.number} has no global logits yet ({exchange_round.get_status_display()}"
            f"; deadline {exchange_round.deadline:%Y-%m-%d %H:%M:%S} UTC); try again later."
        )
    if exchange_round.status == RoundStatus.MISSED_QUORUM:
        raise Conflict(exchange_round.status_reason)
    return upload


@dataclass(frozen=True)
class ClosingRound:
    """A closed round waiting for its global logits, as the worker computes them: every upload's per-label logits
    and which labels it holds (in upload order), the federation's classes and the fewest contributors a published
    average needs, and whether the round met its quorum."""

    exchange_round_id: int
    local_logits: list[list[list[float]]]
    present: list[list[bool]]
    n_classes: int
    min_contributors: int
    quorum_met: bool


def exchange_round_closing(*, exchange_round_id: int) -> ClosingRound | None:
    """The round if it waits for its global logits (closing), else None (another delivery ended it)."""
    exchange_round = (
        ExchangeRound.objects.select_related("exchange__federation")
        .filter(id=exchange_round_id, status=RoundStatus.CLOSING)
        .first()
    )
    if exchange_round is None:
        return None
    exchange = exchange_round.exchange
    n_classes = exchange.federation.n_classes
    uploads = list(exchange_round.uploads.order_by("id"))
    return ClosingRound(
        exchange_round_id=exchange_round.id,
        local_logits=[upload.logits for upload in uploads],
        present=[[label in upload.labels for label in range(n_classes)] for upload in uploads],
        n_classes=n_classes,
        min_contributors=exchange.federation.fd_min_contributors,
        quorum_met=len(uploads) >= exchange.min_silos,
    )
