"""Axis ticks pyqtgraph does not draw legibly by itself."""

from __future__ import annotations

import math


def log_ticks(low: float, high: float, prefix: str = "") -> list[tuple[float, str]]:
    """Ticks at 1, 2 and 5 times the powers of ten spanning ``low`` to ``high`` on a log axis
    (pyqtgraph's own minor labels overlap), as (log10 value, label) with plain decimals."""
    ticks = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**exponent
            if low / 2 <= value <= high * 2:
                ticks.append((math.log10(value), f"{prefix}{value:,.{max(0, -exponent)}f}"))
    return ticks
