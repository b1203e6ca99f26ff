from django import template

from market.numbers import credits_text, percent_text

register = template.Library()


@register.filter
def cents(amount) -> str:
    """Integer cents as credits with two decimals and a sign for negatives (market.numbers.credits_text)."""
    return credits_text(amount)


@register.filter
def cents_plain(amount) -> str:
    """Integer cents as a form value in credits: 1250 → "12.50" (no thousands separator, no sign glyph)."""
    amount = int(amount)
    return f"{'-' if amount < 0 else ''}{abs(amount) // 100}.{abs(amount) % 100:02d}"


@register.filter
def percent(value) -> str:
    """A metric in [0, 1] as a percentage (market.numbers.percent_text)."""
    return percent_text(value)


@register.filter
def kib(size_bytes) -> str:
    return f"{int(size_bytes) / 1024:,.1f} KiB"


@register.filter
def as_json(value) -> str:
    """A JSON rendering of a card field (escaped by the template like any text)."""
    import json

    return json.dumps(value, sort_keys=True, default=str)
