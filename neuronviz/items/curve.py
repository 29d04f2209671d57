"""A curve evaluated per pixel column at paint time: exact at any zoom, cost O(pixels)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter, QPen

from neuronviz.items.raster import CACHE, visible_columns


class DensityCurve(pg.GraphicsObject):
    """Plots ``values(edges_ns)``: one value per window between consecutive time edges.

    ``values`` is a busy fraction or a counter mean (see :mod:`sim.metrics`), so what is drawn
    for a pixel is the exact average over the time that pixel covers.
    """

    def __init__(self, values: Callable[[np.ndarray], np.ndarray], duration_ns: float, y_max: float,
                 pen: QPen) -> None:
        super().__init__()
        self.setCacheMode(CACHE)
        self.values, self.duration_ns, self.y_max, self.pen = values, duration_ns, y_max, pen
        self.x_scale = 1.0

    def set_x_scale(self, scale: float) -> None:
        self.prepareGeometryChange()
        self.x_scale = scale
        self.update()

    def boundingRect(self) -> QRectF:
        return QRectF(0.0, 0.0, self.duration_ns * self.x_scale, self.y_max)

    def paint(self, p: QPainter, *args) -> None:
        vis = visible_columns(self, 0.0, self.duration_ns * self.x_scale)
        if vis is None:
            return
        x0, x1, cols = vis
        edges = np.linspace(x0, x1, cols + 1)
        y = self.values(edges / self.x_scale)
        x = np.repeat(edges, 2)[1:-1]
        p.setPen(self.pen)
        p.drawPath(pg.arrayToQPath(x, np.repeat(y, 2)))
