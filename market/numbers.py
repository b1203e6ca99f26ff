"""One rule for numbers people read, used by every page (frontend.templatetags.number_tags), e-mail and notice:
ε and δ to three significant figures, credits from integer cents with two decimals (never cents), metrics as
percentages with one decimal."""

from decimal import Decimal, InvalidOperation

SIGNIFICANT_FIGURES = 3


def epsilon_text(value) -> str:
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


def credits_text(amount_cents) -> str:
    """Integer cents as credits with two decimals and a sign for negatives: -1234 → "−12.34"; None → "—"."""
    if amount_cents is None:
        return "—"
    amount = int(amount_cents)
    sign = "−" if amount < 0 else ""
    return f"{sign}{abs(amount) // 100:,}.{abs(amount) % 100:02d}"


def percent_text(fraction) -> str:
    """A metric in [0, 1] as a percentage with one decimal: 0.7675000000000001 → "76.8 %"; None → "—"."""
    return "—" if fraction is None else f"{100 * float(fraction):.1f} %"
