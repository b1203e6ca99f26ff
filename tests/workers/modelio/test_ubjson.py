"""The UBJSON decoder bounds the work a file can cause before the values are built."""

import pytest

from workers.modelio.base import RefusedModelError
from workers.modelio.ubjson import decode_ubjson

TOO_MANY = (
    "The UBJSON model holds more than 10 values outside typed numeric arrays, far more than an XGBoost model "
    "within the limits has; the file is damaged or not a model."
)


@pytest.mark.parametrize(
    "data",
    [
        b"[" + b"Z" * 11 + b"]",  # nulls, one byte each
        b"N" * 11 + b"Z",  # no-op markers
        b"[$Z#i\x0b"
        + b"N" * 11,  # a typed array of 11 nulls: refused from its header, before one is read
        b"{#i\x0b" + b"i\x01aZ" * 11,  # an object of 11 members
    ],
)
def test_decode_ubjson_refuses_more_values_than_the_cap(data):
    with pytest.raises(RefusedModelError) as refusal:
        decode_ubjson(data, max_values=10)
    assert str(refusal.value) == TOO_MANY


def test_decode_ubjson_does_not_count_typed_numeric_arrays():
    value = decode_ubjson(b"[$U#I\x03\xe8" + bytes(1000), max_values=2)
    assert value.shape == (1000,) and value.sum() == 0
    assert decode_ubjson(b"[ZZ]", max_values=3) == [None, None]
