"""One rule for numbers people read, used by every page (frontend.templatetags.number_tags), e-mail, notice and
audit entry, by the silo toolkit's command line (workers.silo) and by the demo's output (onefold_simulate): ε and δ
to three significant figures, credits from integer cents with two decimals (never cents), metrics as percentages
with one decimal. A table puts the unit in its header ("accuracy (%)", "price (credits)") and the bare number in
its cells (:func:`percent_number`). It lives in the pure core so that the toolkit, which never imports the market,
writes numbers as the pages do."""

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


def rounded_floats(value, *, figures: int = SIGNIFICANT_FIGURES):
    """A JSON-ready value with every float rounded to ``figures`` significant figures, for people reading raw
    details (the audit log): {"score": 0.5291175259945953} → {"score": 0.529}. Integers and text stay."""
    if isinstance(value, float):
        return float(f"{value:.{figures}g}")
    if isinstance(value, dict):
        return {key: rounded_floats(item, figures=figures) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded_floats(item, figures=figures) for item in value]
    return value


def credits_text(amount_cents) -> str:
    """Integer cents as credits with two decimals and a sign for negatives: -1234 → "−12.34"; None → "—"."""
    if amount_cents is None:
        return "—"
    amount = int(amount_cents)
    sign = "−" if amount < 0 else ""
    return f"{sign}{abs(amount) // 100:,}.{abs(amount) % 100:02d}"


def credits_magnitude_text(amount_cents) -> str:
    """Integer cents as credits without a sign, for a figure whose label says which way the money went
    ("Spent", "Paid to you"): a payout is money the silo received, so its own earnings never show it negative.
    -2700 → "27.00"; None → "—"."""
    return "—" if amount_cents is None else credits_text(abs(int(amount_cents)))


def percent_text(fraction) -> str:
    """A metric in [0, 1] as a percentage with one decimal: 0.7675000000000001 → "76.8 %"; None → "—"."""
    return "—" if fraction is None else f"{100 * float(fraction):.1f} %"


def percent_number(fraction) -> str:
    """A metric in [0, 1] as a table cell under a header that names the unit: 0.7675 → "76.8"; None → "—"."""
    return "—" if fraction is None else f"{100 * float(fraction):.1f}"


def points_number(difference) -> str:
    """A difference of two metrics in [0, 1] in percentage points, signed, with one decimal, as a table cell under a
    header that names the unit: 0.0612 → "+6.1", -0.0137 → "-1.4"; None → "—"."""
    return "—" if difference is None else f"{100 * float(difference):+.1f}"


def size_text(size_bytes) -> str:
    """A file size in KiB or MiB with one decimal: 2048 → "2.0 KiB", 3145728 → "3.0 MiB"; None → "—"."""
    if size_bytes is None:
        return "—"
    kibibytes = int(size_bytes) / 1024
    return f"{kibibytes:,.1f} KiB" if kibibytes < 1024 else f"{kibibytes / 1024:,.1f} MiB"


def plain_number(value) -> str:
    """A number as a form's value: no thousands separator, no trailing zeros, no float noise (12 significant
    digits): Decimal("10.000000") → "10", 0.7675000000000001 → "0.7675"; None → ""."""
    if value is None or value == "":
        return ""
    number = Decimal(repr(float(f"{float(value):.12g}")))
    text = f"{number:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def without_float_noise(value):
    """A JSON-ready value with every float rounded to 12 significant digits, so that a prefilled form reads
    0.7675, not 0.7675000000000001 (the difference is below any parameter's meaning)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {key: without_float_noise(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_float_noise(item) for item in value]
    return value
