import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db.models import QuerySet

from market.audit.models import AuditEvent
from market.audit.services import GENESIS_HASH, audit_entry_hash, audit_event_fields
from market.errors import PermissionDenied
from market.json_input import json_text_parse

CHUNK_SIZE = 2000


@dataclass(frozen=True)
class ChainVerdict:
    """The outcome of walking the audit chain in id order.

    ``head_hash`` is the last entry's hash: recorded elsewhere (an export, a ticket), it lets a later
    verification detect entries removed from the end of the chain, which the chain alone cannot.
    """

    ok: bool
    checked: int
    head_hash: str
    broken_at_id: int | None = None
    problem: str = ""

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "head_hash": self.head_hash,
            "broken_at_id": self.broken_at_id,
            "problem": self.problem,
        }


HASHED_FIELDS = (
    "created_at",
    "actor_id",
    "organisation_id",
    "action",
    "object_type",
    "object_id",
    "outcome",
    "client_address",
    "details",
)


def _hashed_fields(event) -> dict:
    return event.fields if isinstance(event, ExportedEvent) else audit_event_fields(event)


def _broken(event, expected_previous: str) -> str:
    """Why this entry does not continue the chain, or '' when it does."""
    if event.previous_hash != expected_previous:
        return (
            f"Entry {event.id} does not follow the entry before it (its previous hash is "
            f"{event.previous_hash[:12]}…, expected {expected_previous[:12]}…): an entry was deleted, "
            "inserted or reordered."
        )
    if event.entry_hash != audit_entry_hash(
        previous_hash=event.previous_hash, fields=_hashed_fields(event)
    ):
        return f"Entry {event.id} does not match its hash: it was edited after it was written."
    return ""


def audit_chain_verify(*, expected_head: str | None = None) -> ChainVerdict:
    """Recompute every entry's hash in id order; the first entry that breaks the chain is reported.

    Detects edited entries, deleted or inserted entries (the next entry's ``previous_hash`` no longer
    matches) and reordered ids. With ``expected_head`` (the head hash recorded earlier) it also
    detects entries deleted from the end.
    """
    return _chain_verdict(
        AuditEvent.objects.order_by("id").iterator(chunk_size=CHUNK_SIZE),
        expected_head=expected_head,
    )


def _chain_verdict(events, *, expected_head: str | None) -> ChainVerdict:
    expected_previous, checked = GENESIS_HASH, 0
    found_expected_head = expected_head is None or expected_head == GENESIS_HASH
    for event in events:
        problem = _broken(event, expected_previous)
        if problem:
            return ChainVerdict(
                ok=False,
                checked=checked,
                head_hash=expected_previous,
                broken_at_id=event.id,
                problem=problem,
            )
        expected_previous, checked = event.entry_hash, checked + 1
        found_expected_head = found_expected_head or event.entry_hash == expected_head
    if not found_expected_head:
        return ChainVerdict(
            ok=False,
            checked=checked,
            head_hash=expected_previous,
            problem=f"The recorded head {expected_head[:12]}… is no longer in the chain: "
            "entries were removed from its end.",
        )
    return ChainVerdict(ok=True, checked=checked, head_hash=expected_previous)


@dataclass(frozen=True)
class ExportedEvent:
    """One line of a JSON-lines export, read back: what :func:`_broken` needs to check it."""

    id: object
    previous_hash: str
    entry_hash: str
    fields: dict


def _exported_events(lines: Iterable[str]) -> Iterator[ExportedEvent]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json_text_parse(line)
            yield ExportedEvent(
                id=entry.get("id", f"on line {number}"),
                previous_hash=entry["previous_hash"],
                entry_hash=entry["entry_hash"],
                fields={name: entry[name] for name in HASHED_FIELDS},
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(
                f"Line {number} is not an audit entry of an export (JSON with the fields "
                f"{', '.join(HASHED_FIELDS)}, previous_hash and entry_hash)."
            ) from None


def audit_file_verify(lines: Iterable[str], *, expected_head: str | None = None) -> ChainVerdict:
    """Verify an exported JSON-lines file (``audit_export``) on its own, without the database: every line's hash
    is recomputed from its fields and each line must follow the one before it, from the first entry on.

    Raises ``ValueError`` (a sentence naming the line) when a line is not an export's entry."""
    return _chain_verdict(_exported_events(lines), expected_head=expected_head)


def audit_event_as_dict(event: AuditEvent) -> dict:
    """One entry as a JSON-ready dict (one JSON line of an export): the hashed fields, id and the two hashes, and,
    outside the hash, the actor's name and the organisation's as they are now (``actor`` is "system" for none)."""
    return {
        "id": event.id,
        **audit_event_fields(event),
        "previous_hash": event.previous_hash,
        "entry_hash": event.entry_hash,
        "actor": event.actor.username if event.actor else "system",
        "organisation": event.organisation.name if event.organisation else "",
    }


def audit_events_export() -> Iterator[dict]:
    """Every entry in chain order, streamed in chunks so that a long log never sits in memory at once."""
    events = AuditEvent.objects.select_related("actor", "organisation").order_by("id")
    for event in events.iterator(chunk_size=CHUNK_SIZE):
        yield audit_event_as_dict(event)


def audit_json_lines() -> Iterator[str]:
    """The JSON-lines export: one entry per line as canonical JSON (sorted keys), in chain order."""
    for entry in audit_events_export():
        yield json.dumps(entry, sort_keys=True, default=str) + "\n"


def audit_event_query(*, action_prefix: str = "", outcome: str = "") -> QuerySet[AuditEvent]:
    """The newest entries first, optionally only one action family (``auth.``) or outcome (pages paginate it)."""
    events = AuditEvent.objects.select_related("actor__organisation", "organisation").order_by(
        "-id"
    )
    if action_prefix:
        events = events.filter(action__startswith=action_prefix)
    if outcome:
        events = events.filter(outcome=outcome)
    return events


def audit_event_list(
    *, action_prefix: str = "", outcome: str = "", limit: int = 200
) -> list[AuditEvent]:
    return list(audit_event_query(action_prefix=action_prefix, outcome=outcome)[:limit])


def audit_require_reader(*, user) -> None:
    """Only market operators read or export the audit log."""
    if not getattr(user, "is_operator", False):
        raise PermissionDenied("Only market operators can read the audit log.")
