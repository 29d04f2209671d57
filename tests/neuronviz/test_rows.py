"""Engine rows rasterised per pixel column: exact busy shades, faint for a nearly idle engine."""

import numpy as np
from PySide6.QtGui import QColor

from neuronviz.items.raster import MIN_ALPHA, TrackRows
from sim.metrics import BusyIntegral


def _every_column(busy_ns: float, columns: int = 10, width_ns: float = 100.0) -> BusyIntegral:
    starts = np.arange(columns) * width_ns
    return BusyIntegral(starts, np.full(columns, busy_ns))


def test_shades_follow_the_busy_fraction_and_keep_idle_columns_empty(qapp):
    rows = TrackRows([_every_column(1.0), _every_column(33.0), _every_column(100.0),
                      BusyIntegral(np.zeros(0), np.zeros(0))], [QColor("#1f77b4")] * 4, 1000.0)
    px = rows.rasterise(0.0, 1000.0, 10)
    alpha = px >> 24
    assert np.all(alpha[0] == alpha[0, 0]) and np.all(alpha[1] == alpha[1, 0])  # one shade per row here
    nearly_idle, third, full, idle = alpha[:, 0]
    assert MIN_ALPHA < nearly_idle < MIN_ALPHA + 30  # 1% busy: visible, but faint
    assert third > 2 * nearly_idle  # a third busy reads clearly darker
    assert full == 255 and idle == 0
    blue = (px[2, 0] >> 0) & 0xFF
    assert blue == 0xB4  # fully busy: the engine's colour itself
