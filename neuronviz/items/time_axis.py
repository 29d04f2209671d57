"""A time axis that reads in ns, µs, ms or s (or % of the run in normalised mode)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QPicture

from neuronviz.items import reports_errors
from sim.catalogue import DURATION_UNITS

TICK_PX = 90  # minimum distance between labelled ticks
MIN_TICKS = 2


class TimeAxis(pg.AxisItem):
    """Linked panes show the same range at the same size: the first axis to paint a frame records
    its picture and the others replay it, instead of each laying out the same ticks again."""

    _shared: dict[tuple, QPicture] = {}
    SHARED_PICTURES = 8

    def __init__(self, orientation: str = "bottom") -> None:
        super().__init__(orientation)
        self.normalised = False
        self.enableAutoSIPrefix(False)

    def set_normalised(self, on: bool) -> None:
        self.normalised = on
        self.picture = None
        self.update()

    def _picture_key(self) -> tuple:
        return (tuple(self.range), self.size().toTuple(), self.normalised, self.pen().color().rgba(),
                self.textPen().color().rgba(), self.style["tickFont"].key() if self.style["tickFont"] else "")

    @reports_errors
    def paint(self, p, opt, widget) -> None:
        if self.picture is None:
            key = self._picture_key()
            shared = TimeAxis._shared.get(key)
            if shared is None:
                super().paint(p, opt, widget)
                if len(TimeAxis._shared) >= self.SHARED_PICTURES:
                    TimeAxis._shared.pop(next(iter(TimeAxis._shared)))
                TimeAxis._shared[key] = self.picture
                return
            self.picture = shared
        self.picture.play(p)

    def tickSpacing(self, minVal, maxVal, size):
        """Major ticks at 1, 2 or 5 times a power of ten, at least ``TICK_PX`` apart so that labels
        such as "400 µs" never run into each other, however narrow the pane."""
        span = abs(maxVal - minVal)
        if span == 0 or size <= 0:
            return []
        raw = span / max(MIN_TICKS, size / TICK_PX)
        power = 10.0 ** np.floor(np.log10(raw))
        major = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
        return [(major, 0), (major / 5, 0)]

    def tickStrings(self, values, scale, spacing):
        if self.normalised:
            return [f"{100 * v:.4g}%" for v in values]
        span = max((abs(v) for v in values), default=0.0)
        factor, unit = next(((f, u) for f, u in DURATION_UNITS if span >= f), DURATION_UNITS[-1])
        return [f"{v / factor:.4g} {unit}" for v in values]
