"""Numbers written for people, one filter per kind for every page; the rules are workers.numbers'."""

import re

from django import template

from workers.numbers import (
    credits_magnitude_text,
    credits_text,
    epsilon_text,
    percent_text,
    plain_number,
    points_number,
)
from workers.privacy.protection import protection_words

register = template.Library()


@register.filter
def epsilon(value) -> str:
    """ε (or any privacy figure) to three significant figures (workers.numbers.epsilon_text)."""
    return epsilon_text(value)


@register.filter
def protection(value) -> str:
    """ε in words: "moderate protection" (workers.privacy.protection; the scale is docs/budgets.md's)."""
    return protection_words(float(value))


@register.filter
def cents(amount) -> str:
    """Integer cents as credits with two decimals and a sign for negatives (workers.numbers.credits_text)."""
    return credits_text(amount)


@register.filter
def cents_unsigned(amount) -> str:
    """Integer cents as credits without a sign, where the label says the direction
    (workers.numbers.credits_magnitude_text): a payout in the receiver's earnings is "27.00", not "−27.00"."""
    return credits_magnitude_text(amount)


@register.filter
def cents_plain(amount) -> str:
    """Integer cents as a form value in credits: 1250 → "12.50" (no thousands separator, no sign glyph)."""
    amount = int(amount)
    return f"{'-' if amount < 0 else ''}{abs(amount) // 100}.{abs(amount) % 100:02d}"


@register.filter
def number_plain(value) -> str:
    """A number as a form's prefilled value (workers.numbers.plain_number): 10.000000 → "10"."""
    return plain_number(value)


@register.filter
def percent(value) -> str:
    """A metric in [0, 1] as a percentage (workers.numbers.percent_text)."""
    return percent_text(value)


NUMPY_SCALAR_REPR = re.compile(r"\bnp\.(?:u?int\d*|float\d*|bool_?|str_)\(([^()]*)\)")


@register.filter
def without_python_reprs(text) -> str:
    """A worker's sentence as people read it: numpy 2 writes scalars as ``np.int64(3)`` inside lists and tuples
    (``[np.int64(0), np.int64(1)]``); the page shows ``3`` and ``[0, 1]``."""
    return NUMPY_SCALAR_REPR.sub(r"\1", str(text or ""))


@register.filter
def points(value) -> str:
    """A difference of metrics in percentage points, signed (workers.numbers.points_number): "+6.1"."""
    return points_number(value)
