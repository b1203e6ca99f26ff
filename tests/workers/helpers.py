"""Files built for the worker-side tests (an NPZ that unpacks far larger than it is)."""

import io
import math
import zipfile

import numpy as np


def zeros_npz(shape: tuple[int, int]) -> bytes:
    """An NPZ whose array 'X' of float64 zeros is written in chunks, never whole in memory: a few hundred kB that
    unpack to ``8 * rows * columns`` bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("X.npy", "w", force_zip64=True) as member,
    ):
        member.write(header.getvalue())
        remaining, chunk = 8 * math.prod(shape), bytes(1024**2)
        while remaining:
            member.write(chunk[: min(remaining, len(chunk))])
            remaining -= min(remaining, len(chunk))
    return buffer.getvalue()
