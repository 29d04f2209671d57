"""How a ``.nvtrace`` file (format 4) stores a column: differences of its values, then zstd.

A column's values are read as integers of their width (a float by its bit pattern), and each is
stored as its difference from the one before, in the narrowest signed integer that holds every
difference; loading sums them back, wrapping as they were taken, so the column comes back to the
bit (-0.0 and NaN payloads too). Events are in time order on each track, and a run repeats its
steps: the differences of times, indices, durations and FLOP counts repeat too, and zstd (the
codec of :mod:`pyarrow`, already a dependency) keeps a few bits of each.

A zstd frame never inflates more than :data:`ZSTD_MAX_RATIO` times nor grows data by more than
its bound (:func:`frame_bounds`), so the reader checks a column's declared size against the bytes
that hold it before inflating any; inflating produces exactly the declared size or fails.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

LEVEL = 3  # zstd's default level: on a 2.8M-event decode, 0.7 bytes an event, saved in under half a second
# a zstd block inflates to at most 128 KiB and takes at least 4 bytes (a 3-byte header, one byte repeated)
ZSTD_MAX_RATIO = 1 << 15
NUMBERS = {f"{order}{kind}{size}" for kind, sizes in (("f", (4, 8)), ("i", (1, 2, 4, 8)), ("u", (1, 2, 4, 8)))
           for size in sizes for order in ("<", "|") if (order == "|") == (size == 1)}
_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


class ColumnError(ValueError):
    """A stored column that is not what its manifest entry says (the reader names the member)."""


@cache
def _codec():
    import pyarrow as pa  # loaded when a trace file is, not at startup

    return pa.Codec("zstd", LEVEL)


def encode(a: np.ndarray) -> tuple[dict[str, Any], bytes]:
    """The manifest entry (without checksum) of the column ``a`` and the zstd frame holding it."""
    ints = np.ascontiguousarray(a).view(_SIGNED[a.itemsize])
    steps = np.diff(ints, prepend=ints.dtype.type(0))  # wraps where a difference overflows, as the sum will
    low, high = (int(steps.min()), int(steps.max())) if len(steps) else (0, 0)
    stored = next(t for t in _SIGNED.values() if np.iinfo(t).min <= low and high <= np.iinfo(t).max)
    spec = {"dtype": a.dtype.str, "length": len(a), "stored": np.dtype(stored).str}
    return spec, _codec().compress(steps.astype(stored, copy=False).tobytes(), asbytes=True)


def _dtypes(spec: dict) -> tuple[np.dtype, np.dtype]:
    """The column's dtype and the dtype of its stored differences, as its entry declares them."""
    dtype, stored, length = spec.get("dtype"), spec.get("stored"), spec.get("length")
    if dtype not in NUMBERS or stored not in NUMBERS:
        raise ColumnError("is not a column of plain numbers")
    dtype, stored = np.dtype(dtype), np.dtype(stored)
    if stored.kind != "i" or stored.itemsize > dtype.itemsize:
        raise ColumnError(f"is stored in a way no neuronviz writes ({stored} differences of {dtype} values)")
    if type(length) is not int or length < 0:
        raise ColumnError("has an unreadable length")
    return dtype, stored


def inflated_size(spec: dict) -> int:
    """The bytes a column's frame inflates to, by its manifest entry."""
    return spec["length"] * _dtypes(spec)[1].itemsize


def frame_bounds(size: int) -> tuple[int, int]:
    """The fewest and the most bytes a zstd frame of ``size`` inflated bytes takes."""
    return -(-size // ZSTD_MAX_RATIO), size + (size >> 8) + 128


def decode(spec: dict, frame: bytes) -> np.ndarray:
    """The column a frame holds (``spec``: its manifest entry; the frame within :func:`frame_bounds`)."""
    dtype, stored = _dtypes(spec)
    try:
        body = _codec().decompress(frame, inflated_size(spec))
    except (OSError, ValueError, MemoryError) as exc:  # pyarrow's codec errors are OSErrors
        raise ColumnError("does not inflate to its declared size") from exc
    steps = np.frombuffer(body, stored)  # writable: the inflated buffer is this column's own
    wide = _SIGNED[dtype.itemsize]
    values = np.cumsum(steps, out=steps) if stored == wide else np.cumsum(steps, dtype=wide)
    return values.view(dtype)
