"""Which database constraint refused a write: an IntegrityError names it only through the driver's diagnostics."""

from django.db import IntegrityError


def violated_constraint(error: IntegrityError) -> str | None:
    """The name of the constraint PostgreSQL reported (psycopg's ``diag.constraint_name``), or None."""
    return getattr(getattr(error.__cause__, "diag", None), "constraint_name", None)
