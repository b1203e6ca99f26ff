"""A small, strict UBJSON decoder for XGBoost's ``.ubj`` models, with depth and length caps.

Reads the subset of UBJSON (https://ubjson.org, draft 12) that XGBoost writes: objects, arrays
(optionally typed and counted), strings, integers, float32/float64, booleans and null. Typed
numeric arrays become numpy arrays. Every length is checked against the bytes that remain before
anything is allocated, so a forged length cannot exhaust memory, and the values outside typed numeric
arrays are counted while parsing: each becomes a Python object (a one-byte null costs 8 bytes or more
and CPU to match), so a file of millions of them is refused as soon as it passes the count.
"""

from __future__ import annotations

import struct

import numpy as np

from workers.modelio.base import refuse

MAX_DEPTH = 32
# Values (and no-op markers) outside typed numeric arrays. XGBoost writes its per-node arrays typed, so a
# tree costs about 22 (measured with XGBoost 3.2) and a model at the 2,000-tree limit about 45,000.
MAX_VALUES = 250_000
INTEGER_FORMATS = {b"i": ">b", b"U": ">B", b"I": ">h", b"l": ">i", b"L": ">q"}
NUMBER_DTYPES = {
    b"i": ">i1",
    b"U": ">u1",
    b"I": ">i2",
    b"l": ">i4",
    b"L": ">i8",
    b"d": ">f4",
    b"D": ">f8",
}


def decode_ubjson(data: bytes, *, max_values: int = MAX_VALUES):
    """The Python value of a UBJSON document (dicts, lists, numpy arrays, str, int, float, bool, None).

    Raises
    ------
    RefusedModelError
        If the bytes are not one well-formed UBJSON value, exceed the depth cap or hold more than
        ``max_values`` values outside typed numeric arrays.
    """
    decoder = _Decoder(memoryview(data), max_values=max_values)
    value = decoder.value(0)
    if decoder.position != len(data):
        raise refuse("The UBJSON model has trailing bytes after its end; the file is damaged.")
    return value


class _Decoder:
    def __init__(self, data: memoryview, *, max_values: int):
        self.data = data
        self.position = 0
        self.max_values = max_values
        self.values_left = max_values

    def expect_values(self, count: int) -> None:
        """Refuse the document if ``count`` more values would pass the cap (checked before they are read)."""
        if count > self.values_left:
            raise refuse(
                f"The UBJSON model holds more than {self.max_values} values outside typed numeric arrays, "
                "far more than an XGBoost model within the limits has; the file is damaged or not a model."
            )

    def count_value(self) -> None:
        self.expect_values(1)
        self.values_left -= 1

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > len(self.data):
            raise refuse(
                "The UBJSON model ends early or declares a length beyond its end; the file is damaged."
            )
        chunk = self.data[self.position : self.position + count].tobytes()
        self.position += count
        return chunk

    def marker(self) -> bytes:
        marker = self.take(1)
        while marker == b"N":  # no-op
            self.count_value()
            marker = self.take(1)
        return marker

    def value(self, depth: int, marker: bytes | None = None):
        if depth > MAX_DEPTH:
            raise refuse(f"The UBJSON model nests deeper than {MAX_DEPTH} levels.")
        self.count_value()
        marker = marker or self.marker()
        if marker in INTEGER_FORMATS:
            return self.integer(marker)
        if marker == b"d":
            return struct.unpack(">f", self.take(4))[0]
        if marker == b"D":
            return struct.unpack(">d", self.take(8))[0]
        if marker == b"S":
            return self.string()
        if marker == b"C":
            return self.take(1).decode("ascii", errors="strict")
        if marker in (b"T", b"F", b"Z"):
            return {b"T": True, b"F": False, b"Z": None}[marker]
        if marker == b"[":
            return self.array(depth)
        if marker == b"{":
            return self.object(depth)
        raise refuse(
            f"The UBJSON model contains an unknown type marker {marker!r}; the file is damaged."
        )

    def integer(self, marker: bytes) -> int:
        fmt = INTEGER_FORMATS.get(marker)
        if fmt is None:
            raise refuse(
                "The UBJSON model has a length that is not an integer; the file is damaged."
            )
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def length(self) -> int:
        count = self.integer(self.marker())
        if count < 0 or count > len(self.data) - self.position:
            raise refuse("The UBJSON model declares a length beyond its end; the file is damaged.")
        return count

    def string(self) -> str:
        try:
            return self.take(self.length()).decode("utf-8")
        except UnicodeDecodeError:
            raise refuse(
                "The UBJSON model contains text that is not UTF-8; the file is damaged."
            ) from None

    def container_header(self) -> tuple[bytes | None, int | None]:
        element_type = count = None
        if self.peek() == b"$":
            self.take(1)
            element_type = self.take(1)
            if self.peek() != b"#":
                raise refuse(
                    "The UBJSON model has a typed container without a count; the file is damaged."
                )
        if self.peek() == b"#":
            self.take(1)
            count = self.length()
            if element_type not in NUMBER_DTYPES:
                self.expect_values(count)
        return element_type, count

    def peek(self) -> bytes:
        return self.data[self.position : self.position + 1].tobytes()

    def array(self, depth: int):
        element_type, count = self.container_header()
        if element_type in NUMBER_DTYPES:
            dtype = np.dtype(NUMBER_DTYPES[element_type])
            raw = self.take(int(count or 0) * dtype.itemsize)  # typed containers carry a count
            return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
        items: list = []
        while count is None or len(items) < count:
            if count is None and self.peek() == b"]":
                self.take(1)
                break
            items.append(self.value(depth + 1, element_type))
        return items

    def object(self, depth: int) -> dict:
        element_type, count = self.container_header()
        result: dict = {}
        while count is None or len(result) < count:
            if count is None and self.peek() == b"}":
                self.take(1)
                break
            key = self.string()
            if key in result:
                raise refuse(f"The UBJSON model repeats the key {key!r}; the file is damaged.")
            result[key] = self.value(depth + 1, element_type)
        return result
