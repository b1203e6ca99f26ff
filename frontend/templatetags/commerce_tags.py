from django import template

register = template.Library()


@register.filter
def cents(amount) -> str:
    """Integer cents as credits with two decimals and a sign for negatives: -1234 → "−12.34"."""
    if amount is None:
        return "—"
    amount = int(amount)
    sign = "−" if amount < 0 else ""
    return f"{sign}{abs(amount) // 100:,}.{abs(amount) % 100:02d}"


@register.filter
def cents_plain(amount) -> str:
    """Integer cents as a form value in credits: 1250 → "12.50" (no thousands separator, no sign glyph)."""
    amount = int(amount)
    return f"{'-' if amount < 0 else ''}{abs(amount) // 100}.{abs(amount) % 100:02d}"


@register.filter
def percent(value) -> str:
    return "—" if value is None else f"{100 * float(value):.1f} %"


@register.filter
def kib(size_bytes) -> str:
    return f"{int(size_bytes) / 1024:,.1f} KiB"


@register.filter
def as_json(value) -> str:
    """A JSON rendering of a card field (escaped by the template like any text)."""
    import json

    return json.dumps(value, sort_keys=True, default=str)
