"""A time axis that reads in ns, µs, ms or s (or % of the run in normalised mode)."""

from __future__ import annotations

import pyqtgraph as pg

UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


class TimeAxis(pg.AxisItem):
    def __init__(self, orientation: str = "bottom") -> None:
        super().__init__(orientation)
        self.normalised = False
        self.enableAutoSIPrefix(False)

    def set_normalised(self, on: bool) -> None:
        self.normalised = on
        self.picture = None
        self.update()

    def tickStrings(self, values, scale, spacing):
        if self.normalised:
            return [f"{100 * v:.4g}%" for v in values]
        span = max((abs(v) for v in values), default=0.0)
        factor, unit = next(((f, u) for f, u in UNITS if span >= f), UNITS[-1])
        return [f"{v / factor:.4g} {unit}" for v in values]
