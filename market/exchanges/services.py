"""The FD exchange's writes: create an exchange, upload a round's logits, close a round, end it with its global logits.

A round is open until its deadline or until every member has uploaded; it then closes (a conditional UPDATE, so
only one closer wins) and a worker computes the global logits (``onefold.exchange_round_aggregate`` through the
outbox; workers.exchange_aggregation), which :func:`exchange_round_end` records. A round with fewer uploads than the exchange's quorum ends ``missed_quorum``: no global logits, nothing
charged (FD's logits cost no privacy budget here: they are not a DP release, and the exchange page says so). The
next round opens when one ends, until the schedule's last.

An exchange is L0: it opens only where the federation allows L0. A label's average is published to a silo only
when at least ``federation.fd_min_contributors`` (≥ 2) other silos uploaded it; an average of one silo would be
that silo's upload.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from market.accounts.models import User
from market.audit.services import audit_record
from market.errors import Conflict, InvalidInput, PermissionDenied
from market.exchanges.models import (
    Exchange,
    ExchangeRound,
    ExchangeRoundOutbox,
    ExchangeStatus,
    LogitUpload,
    RoundStatus,
)
from market.federations.models import Federation, Membership, PrivacyLevel
from market.federations.selectors import federation_is_member
from market.outbox import outbox_add
from workers.algorithms.fd import BITS_PER_NUMBER, validate_label_logits


def exchange_create(
    *,
    federation: Federation,
    name: str,
    rounds: int,
    round_seconds: int,
    min_silos: int,
    actor: User,
) -> Exchange:
    """An operator opens an FD exchange in ``federation``; its first round opens at once."""
    if not actor.is_operator:
        raise PermissionDenied("Only operators open federated distillation exchanges.")
    if PrivacyLevel.L0 not in federation.allowed_privacy_levels:
        raise InvalidInput(
            f"'{federation.slug}' does not allow L0 (it allows {', '.join(federation.allowed_privacy_levels)}): an "
            "FD exchange passes silos each other's logits without noise, so it is L0 and opens only in a "
            "federation whose members trust each other."
        )
    if not 1 <= rounds <= settings.ONEFOLD_FD_MAX_ROUNDS:
        raise InvalidInput(
            f"An exchange runs 1 to {settings.ONEFOLD_FD_MAX_ROUNDS} rounds, not {rounds}."
        )
    if not 60 <= round_seconds <= settings.ONEFOLD_FD_MAX_ROUND_SECONDS:
        raise InvalidInput(
            f"A round lasts 60 to {settings.ONEFOLD_FD_MAX_ROUND_SECONDS} seconds, not {round_seconds}."
        )
    members = Membership.objects.filter(federation=federation).count()
    fewest = federation.fd_min_contributors + 1  # a silo's average is made of the others' uploads
    if not fewest <= min_silos <= max(members, fewest):
        raise InvalidInput(
            f"A round's quorum is {fewest} to {max(members, fewest)} silos (the federation has {members} "
            f"members; each silo's per-label average is made of at least {federation.fd_min_contributors} "
            f"other silos' logits), not {min_silos}."
        )
    with transaction.atomic():
        exchange = Exchange.objects.create(
            federation=federation,
            name=name,
            rounds=rounds,
            round_seconds=round_seconds,
            min_silos=min_silos,
            created_by=actor,
        )
        _round_open(exchange, number=1)
        audit_record(
            action="exchange.created",
            actor=actor,
            target=exchange,
            details={"federation": federation.slug, "rounds": rounds, "min_silos": min_silos},
        )
    return exchange


def _round_open(exchange: Exchange, *, number: int) -> ExchangeRound:
    now = timezone.now()
    return ExchangeRound.objects.create(
        exchange=exchange,
        number=number,
        opens_at=now,
        deadline=now + timedelta(seconds=exchange.round_seconds),
    )


def logits_upload(*, exchange_round: ExchangeRound, user: User, labels, logits) -> LogitUpload:
    """Store one silo's per-label mean logits for an open round; the round closes once every member has uploaded."""
    exchange = exchange_round.exchange
    federation = exchange.federation
    if user.organisation_id is None or not federation_is_member(federation=federation, user=user):
        raise PermissionDenied(
            f"Your organisation is not a member of '{federation.slug}'; join it first."
        )
    if exchange_round.status != RoundStatus.OPEN or exchange_round.deadline <= timezone.now():
        raise Conflict(
            f"Round {exchange_round.number} of exchange #{exchange.id} is closed (its deadline was "
            f"{exchange_round.deadline:%Y-%m-%d %H:%M:%S} UTC); upload to the open round."
        )
    try:
        _, present = validate_label_logits(
            logits,
            labels,
            n_classes=federation.n_classes,
            max_magnitude=settings.ONEFOLD_FD_MAX_LOGIT,
        )
    except ValueError as error:
        raise InvalidInput(f"The logits are not valid: {error}") from error
    with transaction.atomic():
        round_locked = ExchangeRound.objects.select_for_update().get(id=exchange_round.id)
        if round_locked.status != RoundStatus.OPEN:
            raise Conflict(
                f"Round {round_locked.number} of exchange #{exchange.id} closed while you uploaded."
            )
        if round_locked.uploads.filter(organisation_id=user.organisation_id).exists():
            raise Conflict(
                f"Your organisation already uploaded logits for round {round_locked.number}."
            )
        upload = LogitUpload.objects.create(
            exchange_round=round_locked,
            organisation_id=user.organisation_id,
            uploaded_by=user,
            labels=sorted(labels),
            logits=[[float(value) for value in row] for row in logits],
            payload_bits=federation.n_classes**2 * BITS_PER_NUMBER,
        )
        audit_record(
            action="exchange.logits_uploaded",
            actor=user,
            target=exchange,
            details={"round": round_locked.number, "labels": int(present.sum())},
        )
        members = Membership.objects.filter(federation=federation).count()
        if round_locked.uploads.count() >= members:
            _round_close(round_locked)
    return upload


def _round_close(exchange_round: ExchangeRound) -> bool:
    """open → closing (a conditional UPDATE: one closer wins) and queue the aggregation; call inside a transaction."""
    closed = (
        ExchangeRound.objects.filter(id=exchange_round.id, status=RoundStatus.OPEN).update(
            status=RoundStatus.CLOSING, closed_at=timezone.now()
        )
        == 1
    )
    if closed:
        outbox_add(ExchangeRoundOutbox(exchange_round_id=exchange_round.id))
    return closed


def exchange_reap() -> int:
    """Close every open round past its deadline (run periodically by beat); the number closed."""
    closed = 0
    for exchange_round in ExchangeRound.objects.filter(
        status=RoundStatus.OPEN, deadline__lte=timezone.now()
    ):
        with transaction.atomic():
            closed += _round_close(exchange_round)
    return closed


def exchange_round_end(
    *, exchange_round_id: int, global_logits: list[tuple[list, list]] | None
) -> bool:
    """End a closing round (the worker's step records it here): ``aggregated`` with each upload's global logits and
    availability (``global_logits``, one pair per upload in upload order, as workers.exchange_aggregation computed
    them), or ``missed_quorum`` when fewer silos than the quorum uploaded; then open the next round, or finish the
    exchange. A round another delivery ended is left alone; whether this call ended it."""
    with transaction.atomic():
        exchange_round = (
            ExchangeRound.objects.select_for_update()
            .select_related("exchange")
            .filter(id=exchange_round_id, status=RoundStatus.CLOSING)
            .first()
        )
        if exchange_round is None:
            return False  # already done by another delivery
        exchange = exchange_round.exchange
        uploads = list(exchange_round.uploads.order_by("id"))
        if len(uploads) < exchange.min_silos:
            exchange_round.status = RoundStatus.MISSED_QUORUM
            exchange_round.status_reason = (
                f"Round {exchange_round.number} closed with {len(uploads)} of the {exchange.min_silos} silos its "
                f"quorum needs; no global logits were computed and nothing was charged."
            )
        else:
            _global_logits_store(uploads, global_logits)
            exchange_round.status = RoundStatus.AGGREGATED
        exchange_round.save(update_fields=["status", "status_reason"])
        _next_round_open(exchange, after=exchange_round.number)
        audit_record(
            action="exchange.round_closed",
            target=exchange,
            organisation=None,
            details={
                "round": exchange_round.number,
                "status": exchange_round.status,
                "participants": len(uploads),
            },
        )
    return True


def _next_round_open(exchange: Exchange, *, after: int) -> None:
    if after < exchange.rounds:
        _round_open(exchange, number=after + 1)
    else:
        Exchange.objects.filter(id=exchange.id).update(status=ExchangeStatus.FINISHED)


def _global_logits_store(
    uploads: list[LogitUpload], global_logits: list[tuple[list, list]] | None
) -> None:
    if global_logits is None or len(global_logits) != len(uploads):
        raise ValueError(
            f"A round with {len(uploads)} uploads needs as many global logits, not "
            f"{'none' if global_logits is None else len(global_logits)}."
        )
    for upload, (row_logits, row_available) in zip(uploads, global_logits):
        upload.global_logits = row_logits
        upload.available = row_available
        upload.save(update_fields=["global_logits", "available"])
