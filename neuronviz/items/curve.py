"""Counter plots rasterised with NumPy: every series of a plot in one image, one paint call.

Each series is evaluated per device-pixel column (a busy fraction or a counter mean from
:mod:`sim.metrics`, so a pixel shows the exact average over the time it covers) and drawn as a
one-pixel step line: in column ``i`` the pixels between the previous column's value and this
one's are lit. That is what a step curve looks like at pixel resolution, at a cost of O(pixels)
whatever the length of the trace, and one ``drawImage`` per plot instead of a path per series.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter

from neuronviz.items.raster import CACHE, PREMULTIPLIED, argb, visible_columns

MAX_ROWS = 2048

Series = Callable[[np.ndarray], np.ndarray]  # window edges in ns -> one value per window


class CurveRaster(pg.GraphicsObject):
    """Step curves of ``values(edges_ns)`` for y in ``[0, y_max]``; x is time in ns times ``x_scale``."""

    def __init__(self, duration_ns: float, y_max: float) -> None:
        super().__init__()
        self.setCacheMode(CACHE)
        self.duration_ns, self.y_max = duration_ns, y_max
        self.series: list[tuple[Series, int]] = []
        self.x_scale = 1.0

    def add(self, values: Series, color: QColor) -> None:
        self.series.append((values, argb(color) | 0xFF000000))
        self.update()

    def set_x_scale(self, scale: float) -> None:
        self.prepareGeometryChange()
        self.x_scale = scale
        self.update()

    def boundingRect(self) -> QRectF:
        return QRectF(0.0, 0.0, self.duration_ns * self.x_scale, self.y_max)

    def rasterise(self, x0: float, x1: float, columns: int, rows: int) -> np.ndarray:
        """ARGB pixels, row 0 at y = 0, ``columns`` columns between ``x0`` and ``x1``."""
        edges = np.linspace(x0, x1, columns + 1) / self.x_scale
        r = np.arange(rows, dtype=np.int32)[:, None]
        series = np.zeros((rows, columns), np.uint8)  # which series lights each pixel (0: none)
        for k, (values, _) in enumerate(self.series, 1):
            y = np.nan_to_num(np.asarray(values(edges), np.float64))
            row = np.clip((y * (rows / self.y_max)).astype(np.int32), 0, rows - 1)
            prev = np.empty_like(row)
            prev[0], prev[1:] = row[0], row[:-1]
            np.putmask(series, (r >= np.minimum(prev, row)) & (r <= np.maximum(prev, row)), k)
        palette = np.array([0, *(color for _, color in self.series)], np.uint32)
        return palette[series]

    def paint(self, p: QPainter, *args) -> None:
        vis = visible_columns(self, 0.0, self.duration_ns * self.x_scale)
        if vis is None or not self.series:
            return
        x0, x1, cols = vis
        px_h = self.pixelHeight()
        rows = int(min(MAX_ROWS, max(1, np.ceil(self.y_max / px_h)))) if px_h else 1
        img = pg.functions.ndarray_to_qimage(np.ascontiguousarray(self.rasterise(x0, x1, cols, rows)),
                                             PREMULTIPLIED)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        p.drawImage(QRectF(x0, 0.0, x1 - x0, self.y_max), img, QRectF(0, 0, cols, rows))
