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
