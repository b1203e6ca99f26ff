"""What every JSON value sent to the market must be: storable in PostgreSQL's jsonb and safe to walk.

jsonb refuses NUL characters and non-finite numbers (Python's json reads ``NaN``, ``Infinity`` and ``1e400``
without complaint), integers beyond 64 bits break every integer column and ``float()``, and a value nested
hundreds of levels deep exhausts Python's stack in any recursive code that touches it. The checks run
wherever JSON text arrives, whatever the request's Content-Type says: on request bodies the API may read as
JSON (``market.accounts.middleware``, before any view, and :class:`CheckedJSONParser`, the API's JSON parser,
which DRF also picks for ``application/*`` and ``*/*``), on JSON text inside form-encoded and multipart fields
(:class:`CheckedJSONField`) and on JSON files that pages read (:func:`json_text_parse`), so that every API and
page refuses the same values with the same sentences.
"""

import json
import math

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils.mediatypes import media_type_matches

MAX_DEPTH = 32
LARGEST_INTEGER = 2**63 - 1
NUL = "\x00"
TOO_DEEP = f"The JSON nests deeper than {MAX_DEPTH} levels; send a flatter value."


def json_problem(value) -> str | None:
    """A sentence naming the first part of a parsed JSON value that the market refuses, or None.

    Walks the value without recursion, so that its own depth cannot exhaust the stack.
    """
    pending = [(value, "", 0)]
    while pending:
        item, path, depth = pending.pop()
        where = f"'{path}'" if path else "The JSON value"
        if depth > MAX_DEPTH:
            return TOO_DEEP
        if isinstance(item, str) and NUL in item:
            return f"{where} holds a NUL character (\\u0000), which no field accepts; remove it."
        if isinstance(item, float) and not math.isfinite(item):
            return (
                f"{where} holds a number that is not finite ({item}); send a finite number (NaN, Infinity and "
                "numbers beyond ±1.8e308, such as 1e400, cannot be stored)."
            )
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > LARGEST_INTEGER:
            return f"{where} holds an integer beyond the 64-bit range (±{LARGEST_INTEGER}); send a smaller number."
        if isinstance(item, dict):
            for key, member in item.items():
                if NUL in key:
                    return "A key of the JSON holds a NUL character (\\u0000), which no field accepts; remove it."
                pending.append((member, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(item, list):
            pending.extend(
                (member, f"{path}[{index}]", depth + 1) for index, member in enumerate(item)
            )
    return None


class NotJSON(ValueError):
    """Text that is not JSON at all (as opposed to JSON holding a value the market refuses)."""


def json_text_parse(text: str | bytes):
    """``text`` parsed as JSON, or ValueError with a sentence when it holds what :func:`json_problem` names
    (:class:`NotJSON` when it is not JSON or not UTF-8 text)."""
    try:
        value = json.loads(text)
    except RecursionError:  # nested about 1,000 levels deep, however deep it goes past that
        raise ValueError(TOO_DEEP) from None
    except json.JSONDecodeError as error:
        raise NotJSON(f"The text is not JSON ({error.msg} at character {error.pos}).") from None
    except UnicodeDecodeError:
        raise NotJSON("The text is not JSON: it is not UTF-8 text.") from None
    problem = json_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class CheckedJSONField(serializers.JSONField):
    """A JSON field (for example JSON text in a multipart form) that refuses what :func:`json_problem` names."""

    def to_internal_value(self, data):
        try:
            value = super().to_internal_value(data)
        except RecursionError:  # json.loads of text nested about 1,000 levels deep
            raise serializers.ValidationError(TOO_DEEP) from None
        problem = json_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


def read_as_json(content_type: str) -> bool:
    """Whether the API may read a body of this Content-Type as JSON: a JSON type, or a wildcard that DRF's
    content negotiation matches to the JSON parser (``application/*``, ``*/*``)."""
    return content_type.endswith("json") or media_type_matches(
        CheckedJSONParser.media_type, content_type
    )


class CheckedJSONParser(JSONParser):
    """The API's JSON parser: DRF's, reading through :func:`json_text_parse`, so that a body refused by the
    rules above is a 400 with its sentence whichever Content-Type made DRF choose this parser."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            return json_text_parse(stream.read().decode(encoding))
        except UnicodeDecodeError:
            raise ParseError(f"The body is not {encoding} text; send JSON as UTF-8.") from None
        except ValueError as error:
            raise ParseError(str(error)) from None
