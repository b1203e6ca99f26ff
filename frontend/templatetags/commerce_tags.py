from django import template

register = template.Library()


@register.filter
def kib(size_bytes) -> str:
    return f"{int(size_bytes) / 1024:,.1f} KiB"


@register.filter
def as_json(value) -> str:
    """A JSON rendering of a card field (escaped by the template like any text)."""
    import json

    return json.dumps(value, sort_keys=True, default=str)
