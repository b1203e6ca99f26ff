"""Reading uploaded tables: hostile files are refused with a sentence, limits are checked before parsing, and
nothing is silently changed."""

import datetime
import decimal
import io
import itertools
import tracemalloc
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as parquet
import pytest

from tests.workers.helpers import zeros_npz
from workers.tables import TableError, TableLimits, csv_stream_read, read_table

UNREAD_TYPE = (
    "Column 'a' has the Parquet type {}, which Onefold does not read; store numbers as integers or floats, "
    "categories and dates as text, and no nested columns."
)


def parquet_bytes(columns: dict) -> bytes:
    buffer = io.BytesIO()
    parquet.write_table(pa.table(columns), buffer)
    return buffer.getvalue()


def npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "cell, shown",
    [
        ("inf", "inf"),
        ("-inf", "-inf"),
        ("1e308", "1e+308"),
        ("-1e308", "-1e+308"),
        ("1e39", "1e+39"),
    ],
)
def test_read_table_refuses_a_number_beyond_float32_range(cell, shown):
    with pytest.raises(TableError) as refusal:
        read_table(f"a,b\n1,x\n{cell},y\n".encode())
    assert str(refusal.value) == (
        f"Column 'a', row 2: {shown} is beyond the ±3.4e38 that the models' 32-bit "
        "features hold; rescale the column or leave the cell empty."
    )


def test_read_table_keeps_numbers_within_float32_range():
    assert read_table(b"a\n3.4e38\n-1e30\n")["a"].tolist() == [3.4e38, -1e30]


def test_read_table_refuses_a_nul_inside_a_csv_cell_instead_of_truncating_it():
    with pytest.raises(TableError) as refusal:
        read_table(b"a,b\n1,x\n2,x\x00y\n")
    assert (
        str(refusal.value)
        == "Line 3 of the CSV file holds a NUL character, which no value may contain; remove it."
    )


@pytest.mark.parametrize("header", [b"a,b,a", b"a, b,a ", b'"a",b,"a"'])
def test_read_table_refuses_repeated_csv_column_names_instead_of_renaming_them(header):
    with pytest.raises(TableError) as refusal:
        read_table(header + b"\n1,2,3\n")
    assert (
        str(refusal.value) == "The table has two columns named 'a'; give every column its own name."
    )


@pytest.mark.parametrize(
    "values, arrow_type",
    [
        ([b"ab", b"\xff"], "binary"),
        ([decimal.Decimal("1.5"), decimal.Decimal("2.5")], "decimal128(2, 1)"),
        ([datetime.datetime(2020, 1, 1), datetime.datetime(2021, 1, 1)], "timestamp[us]"),
        ([[1, 2], [3]], "list<element: int64>"),
        ([{"x": 1}, {"x": 2}], "struct<x: int64>"),
    ],
)
def test_read_table_refuses_parquet_types_it_does_not_read(values, arrow_type):
    with pytest.raises(TableError) as refusal:
        read_table(parquet_bytes({"a": values, "b": [1, 2]}))
    assert str(refusal.value) == UNREAD_TYPE.format(arrow_type)


def test_read_table_reads_parquet_numbers_booleans_text_and_categories():
    frame = read_table(
        parquet_bytes(
            {
                "i": [1, None],
                "f": [0.5, 1.5],
                "b": [True, False],
                "s": ["x", None],
                "c": pa.array(["u", "v"]).dictionary_encode(),
            }
        )
    )
    assert frame.columns.tolist() == ["i", "f", "b", "s", "c"]
    assert frame["s"].tolist() == ["x", None]


def test_read_table_refuses_nul_in_parquet_text_and_non_finite_parquet_numbers():
    with pytest.raises(
        TableError,
        match="^Column 'a' holds a NUL character, which no value may contain; remove it.$",
    ):
        read_table(parquet_bytes({"a": ["x\x00y", "z"]}))
    with pytest.raises(TableError, match="^Column 'a', row 1: inf is beyond"):
        read_table(parquet_bytes({"a": [float("inf"), 1.0]}))


def test_read_table_checks_parquet_rows_from_its_metadata():
    with pytest.raises(TableError) as refusal:
        read_table(parquet_bytes({"a": [1, 2, 3]}), limits=TableLimits(max_rows=2))
    assert str(refusal.value) == (
        "The table has 3 rows and 1 columns; the limits are 2 rows, 2000 columns and "
        "50000000 cells in all."
    )


def test_read_table_refuses_an_npz_whose_zip_headers_lie_about_sizes():
    data = bytearray(npz_bytes(X=np.zeros((50, 3))))
    directory = data.find(b"PK\x01\x02")
    data[directory + 24 : directory + 28] = (5).to_bytes(
        4, "little"
    )  # the central directory's uncompressed size
    local = data.find(b"PK\x03\x04")
    data[local + 22 : local + 26] = (5).to_bytes(4, "little")  # and the local header's
    with pytest.raises(TableError) as refusal:
        read_table(bytes(data))
    assert str(refusal.value).startswith(
        (
            "The file starts like a ZIP/NPZ archive but is not a valid one.",
            "The NPZ archive is damaged",
        )
    )


def test_read_table_refuses_an_npz_that_unpacks_past_the_cell_limit_from_its_header():
    data = npz_bytes(X=np.zeros((2_000, 100)), y=np.zeros(2_000))  # a few kB compressed
    with pytest.raises(TableError) as refusal:
        read_table(data, limits=TableLimits(max_cells=100_000))
    assert str(refusal.value) == (
        "The table has 2000 rows and 101 columns; the limits are 2000000 rows, 2000 "
        "columns and 100000 cells in all."
    )


def test_read_table_checks_the_npy_header_before_loading_the_data():
    """The header claims 10⁸ cells that the archive does not hold: loading first would fail differently."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (1_000_000, 100)}
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("X.npy", header.getvalue() + b"\x00" * 80)
    with pytest.raises(
        TableError, match="^The table has 1000000 rows and 100 columns; the limits are"
    ):
        read_table(buffer.getvalue())


def test_read_table_refuses_an_npz_past_the_memory_budget_from_its_headers_and_reads_one_at_it():
    data = npz_bytes(X=np.zeros((1_000, 100)), y=np.zeros(1_000, dtype=np.int8))
    in_memory = 1_000 * 100 * 8 + 1_000  # float64 features, int8 labels
    with pytest.raises(TableError) as refusal:
        read_table(data, limits=TableLimits(max_memory_bytes=in_memory - 1))
    assert str(refusal.value) == (
        "The NPZ arrays take 0.8 MB once unpacked; the market reads at most 0.8 MB of values from one "
        "table. Send fewer rows or columns, or a CSV file."
    )
    assert read_table(data, limits=TableLimits(max_memory_bytes=in_memory)).shape == (1_000, 101)


def test_read_table_refuses_a_small_npz_of_zeros_within_every_other_limit_before_loading_it():
    """392 MB of zeros in about 0.4 MB: 49 million cells, within the cell and unpacked-size limits."""
    data = zeros_npz((490_000, 100))
    assert len(data) < 500_000
    tracemalloc.start()
    try:
        with pytest.raises(TableError) as refusal:
            read_table(data, limits=TableLimits(max_memory_bytes=256 * 1024**2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(refusal.value) == (
        "The NPZ arrays take 373.8 MB once unpacked; the market reads at most 256.0 MB of values from one "
        "table. Send fewer rows or columns, or a CSV file."
    )
    assert (
        peak < 10 * 1024**2
    )  # nothing was unpacked (numpy reports its allocations to tracemalloc)


def test_read_table_refuses_a_parquet_file_past_the_memory_budget_from_its_metadata():
    data = parquet_bytes({"a": np.zeros(10_000)})
    with pytest.raises(TableError, match=r"^The Parquet file's values take 0\.1 MB once unpacked"):
        read_table(data, limits=TableLimits(max_memory_bytes=1_000))
    assert read_table(data).shape == (10_000, 1)


@pytest.mark.parametrize(
    "table, sentence",
    [
        (b"a,b,c\n1,2,3\n4,5\n", "Row 2 of the CSV file has 2 fields but the header names 3"),
        (b"a,b,c\n1\n4,5,6\n", "Row 1 of the CSV file has 1 fields but the header names 3"),
    ],
)
def test_read_table_refuses_a_csv_row_shorter_than_the_header_instead_of_filling_it_in(
    table, sentence
):
    with pytest.raises(TableError) as refusal:
        read_table(table)
    assert str(refusal.value) == (
        f"{sentence}; every row needs as many fields as the header (leave a cell empty for a missing value)."
    )


def test_read_table_reads_blank_lines_and_empty_cells_as_before():
    frame = read_table(b"a,b,c\n1,,\n\n4,5,6\n\n")
    assert frame.shape == (2, 3) and frame["b"].isna().tolist() == [True, False]


def test_read_table_refuses_complex_npz_arrays():
    with pytest.raises(
        TableError, match="^The NPZ array 'X' must be a 2-D array of integers or floats.$"
    ):
        read_table(npz_bytes(X=np.ones((2, 2), dtype=complex)))


def test_read_table_checks_csv_columns_from_the_header_line_before_parsing():
    """The rows below the header are malformed: parsing them first would give another sentence."""
    with pytest.raises(TableError) as refusal:
        read_table(b"a,b,c,d,e,f\n1\n1,2,3,4,5,6,7,8\n", limits=TableLimits(max_columns=5))
    assert str(refusal.value) == "The CSV file's header names 6 columns; the limit is 5."


def test_read_table_counts_csv_rows_before_parsing():
    with pytest.raises(TableError) as refusal:
        read_table(b"a,b\n1,2\n3,4\n5,6\n7,8,9,10\n", limits=TableLimits(max_rows=3))
    assert str(refusal.value) == "The CSV file has more than 3 rows; the limit is 3."


def test_read_table_counts_quoted_multi_line_values_as_one_row():
    frame = read_table(b'a,b\n"x\ny\nz",1\n"u\nv",2\n\n', limits=TableLimits(max_rows=2))
    assert frame["a"].tolist() == ["x\ny\nz", "u\nv"]


def chunks_then_failure(first: list[bytes]):
    yield from first
    raise AssertionError("read past the row limit")


def test_csv_stream_read_stops_reading_once_the_rows_pass_the_limit():
    chunks = chunks_then_failure([b"a,b\n" + b"1,2\n" * 4, b"3,4\n" * 4])
    with pytest.raises(TableError) as refusal:
        csv_stream_read(chunks, max_rows=5)
    assert str(refusal.value) == "The CSV file has more than 5 rows; send at most 5 per request."


def test_csv_stream_read_returns_a_body_within_the_limit_whole():
    chunks = [b'a,b\n"x\ny\nz",1\n', b'"u\nv\nw",2\n']
    assert csv_stream_read(iter(chunks), max_rows=2) == b"".join(chunks)
    assert csv_stream_read(itertools.repeat(b"a\n1\n", 1), max_rows=1) == b"a\n1\n"
