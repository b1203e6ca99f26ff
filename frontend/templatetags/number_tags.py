"""Numbers written for people: ε to three significant figures everywhere, one filter for every page."""

import re
from decimal import Decimal, InvalidOperation

from django import template

register = template.Library()

SIGNIFICANT_FIGURES = 3


@register.filter
def epsilon(value) -> str:
    """ε (or any privacy figure) to three significant figures: 5.3256670288303765 → "5.33", 10.000000 → "10",
    0.000123456 → "0.000123", 1234.5 → "1,230"; no value → "—". Text that is not a number is shown as it is."""
    if value is None or value == "":
        return "—"
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    if not number.is_finite():
        return "∞" if number > 0 else str(value)
    if number == 0:
        return "0"
    rounded = float(f"{float(number):.{SIGNIFICANT_FIGURES}g}")
    if abs(rounded) >= 10**SIGNIFICANT_FIGURES:
        return f"{rounded:,.0f}".replace("-", "−")
    text = f"{Decimal(repr(rounded)):f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text.replace("-", "−")


NUMPY_SCALAR_REPR = re.compile(r"\bnp\.(?:u?int\d*|float\d*|bool_?|str_)\(([^()]*)\)")


@register.filter
def without_python_reprs(text) -> str:
    """A worker's sentence as people read it: numpy 2 writes scalars as ``np.int64(3)`` inside lists and tuples
    (``[np.int64(0), np.int64(1)]``); the page shows ``3`` and ``[0, 1]``."""
    return NUMPY_SCALAR_REPR.sub(r"\1", str(text or ""))
