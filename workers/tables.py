"""Tables from uploaded bytes (CSV, Parquet or NPZ, recognised by their content), limits checked first.

Every limit is checked on what is cheap to read before the table is materialised: a CSV's header line
and its line count, a Parquet file's metadata and schema, the ``.npy`` headers inside an NPZ archive
(NPZ files are read with ``allow_pickle=False``). Values that the market or the models cannot hold are
refused, never changed: NUL characters, numbers beyond float32's range (``inf`` among them), two columns
with one name, and Parquet types other than numbers, booleans and text.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

PARQUET_MAGIC = b"PAR1"
ZIP_MAGIC = b"PK\x03\x04"
MISSING_MARKERS = ["?", "", "NA", "N/A", "NaN", "nan", "null", "None"]
NUL = "\x00"
FLOAT32_MAX = float(np.finfo(np.float32).max)  # features reach the models as float32
NPZ_ARRAY_NAMES = {"X.npy": "X", "y.npy": "y"}
# The errors a damaged or lying archive raises while numpy unpacks it (a CRC or size that does not match...).
ARCHIVE_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError)


class TableError(ValueError):
    """A table that cannot be read or encoded; the message says what to fix."""


@dataclass(frozen=True)
class TableLimits:
    max_rows: int = 2_000_000
    max_columns: int = 2_000
    max_cells: int = 50_000_000  # 400 MB as float64; a 64 MiB CSV holds at most about 32 million
    max_categories: int = 1_000
    max_archive_entries: int = 16
    max_unpacked_bytes: int = 2 * 1024**3
    # What the table's values may take in memory once read, judged before reading them (an NPZ's .npy
    # headers, a Parquet file's rows and columns): a small archive of zeros may unpack to hundreds of MB.
    max_memory_bytes: int = 2 * 1024**3


def table_format(data: bytes) -> str:
    """``"parquet"``, ``"npz"`` or ``"csv"``, judged from the content alone."""
    if data.startswith(PARQUET_MAGIC):
        return "parquet"
    return "npz" if data.startswith(ZIP_MAGIC) else "csv"


def read_table(data: bytes, *, limits: TableLimits = TableLimits()) -> pd.DataFrame:
    """Read a CSV, Parquet or NPZ table from bytes, whatever its file name says.

    NPZ files must hold a 2-D numeric array ``X`` (columns become ``f0 … f{n-1}``) and may
    hold a 1-D array ``y`` (column ``label``).
    """
    readers = {"parquet": _read_parquet, "npz": _read_npz, "csv": _read_csv}
    frame = readers[table_format(data)](data, limits)
    if frame.shape[0] == 0:
        raise TableError(
            "The table has no rows; upload a file with a header and at least one data row."
        )
    check_shape(n_rows=frame.shape[0], n_columns=frame.shape[1], limits=limits)
    frame.columns = [str(column).strip() for column in frame.columns]
    _refuse_repeated_names(frame.columns)
    _refuse_unstorable_values(frame)
    return frame


def check_shape(*, n_rows: int, n_columns: int, limits: TableLimits) -> None:
    """Refuse a table shape beyond the limits (rows, columns or cells)."""
    if (
        n_rows > limits.max_rows
        or n_columns > limits.max_columns
        or n_rows * n_columns > limits.max_cells
    ):
        raise TableError(
            f"The table has {n_rows} rows and {n_columns} columns; the limits are {limits.max_rows} "
            f"rows, {limits.max_columns} columns and {limits.max_cells} cells in all."
        )


def _check_memory(what: str, in_memory: int, limits: TableLimits) -> None:
    """Refuse a table whose values would take more memory than the limit, before they are read."""
    if in_memory > limits.max_memory_bytes:
        raise TableError(
            f"{what} take {in_memory / 1024**2:.1f} MB once unpacked; the market reads at most "
            f"{limits.max_memory_bytes / 1024**2:.1f} MB of values from one table. Send fewer rows or "
            "columns, or a CSV file."
        )


def _refuse_repeated_names(names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TableError(
                f"The table has two columns named '{name}'; give every column its own name."
            )
        seen.add(name)


def _refuse_unstorable_values(frame: pd.DataFrame) -> None:
    for name in frame.columns:
        values = frame[name]
        if NUL in name:
            raise TableError(
                "A column name holds a NUL character, which no name may contain; remove it."
            )
        if pd.api.types.is_bool_dtype(values):
            continue
        if pd.api.types.is_numeric_dtype(values):
            numbers = values.astype("float64").to_numpy()
            beyond = np.flatnonzero(
                np.abs(numbers) > FLOAT32_MAX
            )  # inf among them; NaN (missing) is not
            if beyond.size:
                raise TableError(
                    f"Column '{name}', row {beyond[0] + 1}: {numbers[beyond[0]]} is beyond the ±3.4e38 "
                    "that the models' 32-bit features hold; rescale the column or leave the cell empty."
                )
        elif values.dropna().astype(str).str.contains(NUL, regex=False).any():
            raise TableError(
                f"Column '{name}' holds a NUL character, which no value may contain; remove it."
            )


# --- CSV -------------------------------------------------------------------------------------------------


def _read_csv(data: bytes, limits: TableLimits) -> pd.DataFrame:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise TableError(
            "The file is neither Parquet, NPZ nor UTF-8 CSV text; save it as UTF-8 CSV."
        ) from error
    if NUL in text:  # pandas would cut the value short at the NUL
        line = text.count("\n", 0, text.index(NUL)) + 1
        raise TableError(
            f"Line {line} of the CSV file holds a NUL character, which no value may contain; remove it."
        )
    _check_csv_header(text, limits)
    if csv_rows_exceed(text, limits.max_rows):
        raise TableError(
            f"The CSV file has more than {limits.max_rows} rows; the limit is {limits.max_rows}."
        )
    try:
        frame = pd.read_csv(
            io.StringIO(text),
            skipinitialspace=True,
            na_values=MISSING_MARKERS,
            keep_default_na=True,
            on_bad_lines="error",
        )
    except (pd.errors.ParserError, ValueError) as error:
        raise TableError(
            f"The CSV file is malformed: {error}. Every row needs as many fields as the header."
        ) from error
    if not isinstance(
        frame.index, pd.RangeIndex
    ):  # pandas' reading of a first row longer than the header
        raise TableError(
            "The CSV file is malformed: its first data row has more fields than the header."
        )
    _refuse_short_rows(text, n_columns=frame.shape[1])
    return frame


def _refuse_short_rows(text: str, *, n_columns: int) -> None:
    """Refuse a data row with fewer fields than the header (pandas would fill them in as missing values; it
    refuses longer rows itself)."""
    rows = (
        row
        for row in csv.reader(io.StringIO(text), skipinitialspace=True)
        if row not in ([], [""])  # pandas skips blank lines
    )
    try:
        next(rows, None)  # the header
        for number, row in enumerate(rows, start=1):
            if len(row) < n_columns:
                raise TableError(
                    f"Row {number} of the CSV file has {len(row)} fields but the header names "
                    f"{n_columns}; every row needs as many fields as the header (leave a cell empty "
                    "for a missing value)."
                )
    except csv.Error as error:
        raise TableError(f"The CSV file is malformed ({error}).") from error


def _check_csv_header(text: str, limits: TableLimits) -> None:
    """The header line alone: its column count against the limit, then its names (pandas would rename a
    repeated name ``a.1``)."""
    try:
        header = next(
            (row for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row), []
        )
    except csv.Error as error:
        raise TableError(f"The CSV file's header line is malformed ({error}).") from error
    if not header:
        raise TableError(
            "The CSV file is empty; upload a file with a header and at least one data row."
        )
    if len(header) > limits.max_columns:
        raise TableError(
            f"The CSV file's header names {len(header)} columns; the limit is {limits.max_columns}."
        )
    names = [name.strip() for name in header]
    if not all(names):
        raise TableError("The CSV file needs a header row naming every column.")
    _refuse_repeated_names(names)


def csv_rows_exceed(text: str, max_rows: int) -> bool:
    """Whether CSV text has more than ``max_rows`` data rows after its header, counted without building them.

    Counting newlines bounds the rows from above; only when that bound is over the limit are the rows counted
    exactly (a quoted value may span lines), and the count stops one row past the limit.
    """
    if text.count("\n") <= max_rows:
        return False
    rows = (row for row in csv.reader(io.StringIO(text)) if row)  # pandas skips blank lines too
    try:
        return next(itertools.islice(rows, max_rows + 1, None), None) is not None
    except csv.Error as error:
        raise TableError(f"The CSV file is malformed ({error}).") from error


def csv_stream_read(chunks: Iterable[bytes], *, max_rows: int) -> bytes:
    """The bytes of a CSV body that arrives in chunks, read only until it is clear that it holds more than
    ``max_rows`` data rows (then :class:`TableError`).

    The exact count runs each time the line count doubles past the limit, so that it costs at most about
    twice the reading, whatever the quoting.
    """
    received, lines, next_count_at = [], 0, max_rows + 1
    for chunk in chunks:
        received.append(chunk)
        lines += chunk.count(b"\n")
        if lines > next_count_at:
            next_count_at = 2 * lines
            if csv_rows_exceed(b"".join(received).decode("utf-8", errors="replace"), max_rows):
                raise TableError(
                    f"The CSV file has more than {max_rows} rows; send at most {max_rows} per request."
                )
    return b"".join(received)


# --- Parquet ---------------------------------------------------------------------------------------------


def _read_parquet(data: bytes, limits: TableLimits) -> pd.DataFrame:
    import pyarrow.parquet as parquet  # pandas' own Parquet engine; imported here as only Parquet needs it

    try:
        parquet_file = parquet.ParquetFile(io.BytesIO(data))
        schema, metadata = parquet_file.schema_arrow, parquet_file.metadata
    except Exception as error:  # noqa: BLE001 - pyarrow raises many types for a damaged file
        raise TableError(
            f"The Parquet file could not be read ({error}); check that it is complete."
        ) from error
    check_shape(n_rows=metadata.num_rows, n_columns=len(schema.names), limits=limits)
    unpacked = sum(
        metadata.row_group(index).total_byte_size for index in range(metadata.num_row_groups)
    )
    if unpacked > limits.max_unpacked_bytes:
        raise TableError(
            f"The Parquet file unpacks to {unpacked} bytes; the limit is {limits.max_unpacked_bytes}."
        )
    # pandas holds every value in at least 8 bytes (a number, or a reference to a text); the row groups' sizes
    # are those of the encoded values, which run-length encoding makes tiny for a column of one repeated value
    _check_memory("The Parquet file's values", 8 * metadata.num_rows * len(schema.names), limits)
    for field in schema:
        _check_parquet_type(field.name, field.type)
    try:
        return parquet_file.read().to_pandas()
    except Exception as error:  # noqa: BLE001 - as above
        raise TableError(
            f"The Parquet file could not be read ({error}); check that it is complete."
        ) from error


def _check_parquet_type(name: str, arrow_type) -> None:
    import pyarrow.types as types

    if types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if not (
        types.is_integer(arrow_type)
        or types.is_floating(arrow_type)
        or types.is_boolean(arrow_type)
        or types.is_string(arrow_type)
        or types.is_large_string(arrow_type)
        or types.is_null(arrow_type)
    ):
        raise TableError(
            f"Column '{name}' has the Parquet type {arrow_type}, which Onefold does not read; store "
            "numbers as integers or floats, categories and dates as text, and no nested columns."
        )


# --- NPZ -------------------------------------------------------------------------------------------------


def _read_npz(data: bytes, limits: TableLimits) -> pd.DataFrame:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            _check_archive(archive.infolist(), limits)
            headers = {
                NPZ_ARRAY_NAMES[name]: _npy_header(archive, name)
                for name in archive.namelist()
                if name in NPZ_ARRAY_NAMES
            }
    except ARCHIVE_READ_ERRORS as error:
        raise TableError(
            "The file starts like a ZIP/NPZ archive but is not a valid one."
        ) from error
    _check_npz_headers(headers, limits)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            features = arrays["X"]
            labels = arrays["y"] if "y" in headers else None
    except ARCHIVE_READ_ERRORS + (ValueError,) as error:
        raise TableError(
            f"The NPZ archive is damaged ({error}); save it again with numpy.savez."
        ) from error
    frame = pd.DataFrame(features, columns=[f"f{index}" for index in range(features.shape[1])])
    if labels is not None:
        frame["label"] = labels
    return frame


def _check_archive(entries: list[zipfile.ZipInfo], limits: TableLimits) -> None:
    if len(entries) > limits.max_archive_entries:
        raise TableError(
            f"The NPZ archive has {len(entries)} entries; at most {limits.max_archive_entries} are allowed."
        )
    unpacked = sum(entry.file_size for entry in entries)
    if unpacked > limits.max_unpacked_bytes:
        raise TableError(
            f"The NPZ archive unpacks to {unpacked} bytes; the limit is {limits.max_unpacked_bytes}."
        )


def _npy_header(archive: zipfile.ZipFile, name: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the ``.npy`` header of an archive entry, without reading its data."""
    with archive.open(name) as file:
        try:
            version = np.lib.format.read_magic(file)
            if version == (1, 0):
                shape, _fortran_order, dtype = np.lib.format.read_array_header_1_0(file)
            elif version == (2, 0):
                shape, _fortran_order, dtype = np.lib.format.read_array_header_2_0(file)
            else:
                raise TableError(
                    f"The NPZ array '{name}' uses .npy format {version}; save it with numpy.savez."
                )
        except ValueError as error:
            raise TableError(f"The NPZ array '{name}' has a malformed header ({error}).") from error
    return shape, dtype


def _check_npz_headers(headers: dict, limits: TableLimits) -> None:
    if "X" not in headers:
        raise TableError(
            "The NPZ archive needs a 2-D numeric array named 'X' (and optionally 'y')."
        )
    shape, dtype = headers["X"]
    if dtype.hasobject:
        raise TableError(
            "The NPZ array 'X' is an array of Python objects (object arrays can hold pickles); save "
            "plain numbers with numpy.savez."
        )
    if len(shape) != 2 or not (
        np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)
    ):
        raise TableError("The NPZ array 'X' must be a 2-D array of integers or floats.")
    check_shape(n_rows=shape[0], n_columns=shape[1] + ("y" in headers), limits=limits)
    _check_memory(
        "The NPZ arrays",
        sum(math.prod(shape) * dtype.itemsize for shape, dtype in headers.values()),
        limits,
    )
    if "y" in headers:
        label_shape, label_dtype = headers["y"]
        if label_shape != (shape[0],):
            raise TableError("The NPZ array 'y' must be 1-D with one label per row of 'X'.")
        if label_dtype.hasobject:
            raise TableError(
                "The NPZ array 'y' is an array of Python objects (object arrays can hold pickles); save "
                "plain numbers or text with numpy.savez."
            )
