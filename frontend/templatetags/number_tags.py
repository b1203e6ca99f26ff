"""Numbers written for people, one filter per kind for every page; the rules are market.numbers'."""

import re

from django import template

from market.numbers import epsilon_text

register = template.Library()


@register.filter
def epsilon(value) -> str:
    """ε (or any privacy figure) to three significant figures (market.numbers.epsilon_text)."""
    return epsilon_text(value)


NUMPY_SCALAR_REPR = re.compile(r"\bnp\.(?:u?int\d*|float\d*|bool_?|str_)\(([^()]*)\)")


@register.filter
def without_python_reprs(text) -> str:
    """A worker's sentence as people read it: numpy 2 writes scalars as ``np.int64(3)`` inside lists and tuples
    (``[np.int64(0), np.int64(1)]``); the page shows ``3`` and ``[0, 1]``."""
    return NUMPY_SCALAR_REPR.sub(r"\1", str(text or ""))
