import functools
import hashlib
import json

from django.db import connection, transaction
from django.utils import timezone

from market.audit.models import AuditEvent, AuditOutcome
from market.client_address import client_address_of, current_client_address

GENESIS_HASH = "0" * 64
# Any constant: PostgreSQL's transaction-level advisory lock that serialises appends to the chain.
_CHAIN_LOCK = 7_412_006


def audit_entry_hash(*, previous_hash: str, fields: dict) -> str:
    """SHA-256 over the previous entry's hash and this entry's fields as canonical JSON."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{previous_hash}\n{canonical}".encode()).hexdigest()


def audit_event_fields(event: AuditEvent) -> dict:
    """The fields the hash covers, as they read back from the database."""
    return {
        "created_at": event.created_at.isoformat(),
        "actor_id": event.actor_id,
        "organisation_id": event.organisation_id,
        "action": event.action,
        "object_type": event.object_type,
        "object_id": event.object_id,
        "outcome": event.outcome,
        "client_address": event.client_address,
        "details": event.details,
    }


def audit_record(
    *,
    action: str,
    outcome: str = AuditOutcome.SUCCESS,
    actor=None,
    organisation=None,
    target=None,
    request=None,
    details: dict | None = None,
) -> AuditEvent:
    """Append one event to the audit chain, inside the caller's transaction when there is one.

    ``actor`` is a user (or None for the system); ``organisation`` defaults to the actor's; ``target`` is the
    model instance acted on; ``details`` is JSON-ready and never holds secrets or model contents. The client
    address is the request's, or without one the current request's (ClientAddressMiddleware).
    """
    if actor is not None and not actor.is_authenticated:
        actor = None
    if organisation is None and actor is not None:
        organisation = actor.organisation
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])
        last = AuditEvent.objects.order_by("-id").only("entry_hash").first()
        event = AuditEvent(
            created_at=timezone.now(),
            actor=actor,
            organisation=organisation,
            action=action,
            object_type=type(target).__name__ if target is not None else "",
            object_id=str(target.pk) if target is not None else "",
            outcome=outcome,
            client_address=client_address_of(request)
            if request is not None
            else current_client_address(),
            details=details or {},
            previous_hash=last.entry_hash if last else GENESIS_HASH,
        )
        event.entry_hash = audit_entry_hash(
            previous_hash=event.previous_hash, fields=audit_event_fields(event)
        )
        event.save(force_insert=True)
    return event


def audit_refusals(
    action: str, *, actor_argument: str = "user", target_argument: str | None = None
):
    """Decorate a service so that a domain error it raises is recorded as a refused ``action``, then re-raised.

    The record is written after the service returned (its own transaction already rolled back); the
    reason is the error's sentence, which never holds secrets or model contents.
    """
    from market.errors import domain_error_from

    def decorate(service):
        @functools.wraps(service)
        def audited(*args, **kwargs):
            try:
                return service(*args, **kwargs)
            except Exception as error:
                domain_error = domain_error_from(error)
                if domain_error is not None:
                    target = kwargs.get(target_argument) if target_argument else None
                    audit_record(
                        action=action,
                        outcome=AuditOutcome.REFUSED,
                        actor=kwargs.get(actor_argument),
                        target=target,
                        details={"reason": str(domain_error)},
                    )
                raise

        return audited

    return decorate
