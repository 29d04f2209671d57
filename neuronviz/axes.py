"""Axis ticks pyqtgraph does not draw legibly by itself."""

from __future__ import annotations

import math

# a log axis spanning more decades than these gets ticks at the powers of ten only, then at every other
DENSE_DECADES, SPARSE_DECADES = 3, 6


def log_ticks(low: float, high: float, prefix: str = "") -> list[tuple[float, str]]:
    """Ticks at 1, 2 and 5 times the powers of ten spanning ``low`` to ``high`` on a log axis
    (pyqtgraph's own minor labels overlap), as (log10 value, label) with plain decimals; over more
    than :data:`DENSE_DECADES` decades at the powers of ten alone, over more than
    :data:`SPARSE_DECADES` at every other one, so that labels never touch."""
    ticks = []
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    decades = math.log10(high / low)
    mantissas = (1, 2, 5) if decades <= DENSE_DECADES else (1,)
    step = 1 if decades <= SPARSE_DECADES else 2
    for exponent in range(first, last + 1, step):
        for mantissa in mantissas:
            value = mantissa * 10.0**exponent
            if low / 2 <= value <= high * 2:
                ticks.append((math.log10(value), f"{prefix}{value:,.{max(0, -exponent)}f}"))
    return ticks
