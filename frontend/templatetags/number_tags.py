"""Numbers written for people: ε to three significant figures everywhere, one filter for every page."""

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
    if abs(rounded) >= 10 ** SIGNIFICANT_FIGURES:
        return f"{rounded:,.0f}".replace("-", "−")
    text = f"{Decimal(repr(rounded)):f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text.replace("-", "−")
