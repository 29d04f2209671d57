"""How a .nvtrace column is stored (sim/io/columns.py): exact to the bit, narrow, and refusing
frames that are not what their manifest entry says."""

import numpy as np
import pyarrow as pa
import pytest

from sim.io.columns import ZSTD_MAX_RATIO, ColumnError, decode, encode, frame_bounds, inflated_size

EDGES = {
    "float64": np.array([0.0, -0.0, 1.5, -1e308, 1e308, np.inf, -np.inf, np.nan, 5e-324, 1.5]),
    "nan payloads": np.array([0x7FF8000000000001, 0x7FF8000000000002, 0xFFF0000000000001], np.uint64).view(np.float64),
    "int8": np.array([-128, 127, -128], np.int8),
    "int16": np.array([-32768, 32767, 0, -32768, 5], np.int16),
    "int32": np.array([2**31 - 1, -(2**31), 7, 7, 7], np.int32),
    "uint32": np.array([0, 2**32 - 1, 3], np.uint32),
    "uint64": np.array([2**64 - 1, 0, 2**63], np.uint64),
    "float32": np.array([1.25, -0.0, np.float32(3.4e38)], np.float32),
    "one": np.array([42.0]),
    "empty": np.array([], np.float64),
}


@pytest.mark.parametrize("name", EDGES)
def test_a_column_comes_back_to_the_bit(name):
    a = EDGES[name]
    spec, frame = encode(a)
    back = decode(spec, frame)
    assert back.dtype == a.dtype and back.tobytes() == a.tobytes()
    assert spec["length"] == len(a) and spec["dtype"] == a.dtype.str


def test_differences_are_stored_in_the_narrowest_integers():
    track = np.repeat(np.arange(8, dtype=np.int16), 1000)  # in track order: steps of 0 and 1
    assert encode(track)[0]["stored"] == "|i1"
    assert encode(np.arange(0, 300_000, 3, dtype=np.int32))[0]["stored"] == "|i1"
    assert encode(np.array([0, 200, -100], np.int32))[0]["stored"] == "<i2"
    assert encode(np.array([0, 2**31 - 1, -(2**31)], np.int32))[0]["stored"] == "<i4"  # differences wrap
    assert encode(np.array([1.0, 2.0]))[0]["stored"] == "<i8"


def test_times_in_order_take_a_small_part_of_their_eight_bytes():
    start = np.cumsum(np.tile([22.075284378253457, 1000.0, 3.5], 100_000))
    _, frame = encode(start)
    assert len(frame) < start.nbytes / 100


def test_frame_bounds_are_zstds_ratio_and_growth():
    assert frame_bounds(0) == (0, 128)
    assert frame_bounds(ZSTD_MAX_RATIO * 10) == (10, ZSTD_MAX_RATIO * 10 + ZSTD_MAX_RATIO * 10 // 256 + 128)
    for column in (np.zeros(1 << 22), np.random.default_rng(48).random(1 << 16)):  # as (in)compressible as can be
        spec, frame = encode(column)
        fewest, most = frame_bounds(inflated_size(spec))
        assert fewest <= len(frame) <= most


@pytest.mark.parametrize("change, message", [
    ({"dtype": "|O"}, "is not a column of plain numbers"),
    ({"dtype": "<U1"}, "is not a column of plain numbers"),
    ({"stored": ">i8"}, "is not a column of plain numbers"),
    ({"stored": "<f8"}, "is stored in a way no neuronviz writes \\(float64 differences of float64 values\\)"),
    ({"dtype": "<f4"}, "is stored in a way no neuronviz writes \\(int64 differences of float32 values\\)"),
    ({"length": -1}, "has an unreadable length"),
    ({"length": "12"}, "has an unreadable length"),
    ({"length": 3}, "does not inflate to its declared size"),
])
def test_a_frame_unlike_its_entry_is_refused(change, message):
    spec, frame = encode(np.arange(10.0))
    with pytest.raises(ColumnError, match=message):
        decode({**spec, **change}, frame)


def test_a_frame_inflating_beyond_its_declared_size_stops_there():
    spec = {"dtype": "<f8", "length": 8, "stored": "<i8"}
    with pytest.raises(ColumnError, match="does not inflate to its declared size"):
        decode(spec, pa.Codec("zstd").compress(bytes(1 << 28), asbytes=True))  # 256 MiB of zeros in 8 KiB
