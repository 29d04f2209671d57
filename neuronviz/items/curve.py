"""Counter plots rasterised with NumPy: every series of a plot in one image, one paint call.

Each series is evaluated per device-pixel column (a busy fraction or a counter mean from
:mod:`sim.metrics`, so a pixel shows the exact average over the time it covers, give or take
``COLUMN_SNAP`` of a pixel at its edges) and drawn as a
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

from neuronviz.items import reports_errors
from neuronviz.items.raster import COLUMN_SNAP, PIXEL_TOLERANCE, PREMULTIPLIED, RasterItem, argb, visible_columns

MAX_ROWS = 2048

# (window edges in ns, tolerance as in sim.metrics) -> one value per window
Series = Callable[[np.ndarray, float], np.ndarray]


class CurveRaster(RasterItem):
    """Step curves of ``values(edges_ns)`` between 0 and ``y_max``, in item coordinates that run
    downwards like the image's rows: a value ``v`` is at y = ``y_max - v``. A view that counts
    downwards (see :mod:`neuronviz.items.bands`) then draws the image unflipped, which Qt blits
    several times faster than a flipped one."""

    def __init__(self, duration_ns: float, y_max: float) -> None:
        super().__init__()
        self.duration_ns, self.y_max = duration_ns, y_max
        self.series: list[tuple[Series, int]] = []

    def add(self, values: Series, color: QColor) -> None:
        self.series.append((values, argb(color) | 0xFF000000))
        self.changed()

    def boundingRect(self) -> QRectF:
        return QRectF(0.0, 0.0, self.duration_ns * self.x_scale, self.y_max)

    def rasterise(self, x0: float, x1: float, columns: int, rows: int) -> np.ndarray:
        """ARGB pixels, row 0 at ``y_max`` (the top), ``columns`` columns between ``x0`` and
        ``x1``; a later series draws over an earlier one.

        Only lit pixels are computed: column ``c`` of series ``s`` lights the run of rows from
        ``low[s, c]``, ``n[s, c]`` pixels long. The runs of all series and columns are laid end
        to end; the ``p``-th pixel of that sequence, in the run starting at ``start``, is image
        row ``low + p - start``. A flat curve costs O(columns), a jagged one O(lit pixels), never
        O(rows x columns) per series."""
        edges = np.linspace(x0, x1, columns + 1) / self.x_scale
        y = np.array([values(edges, COLUMN_SNAP) for values, _ in self.series], np.float64)
        # NaN reads as 0 (fmax ignores it); values beyond the plot stay on its edge
        row = rows - 1 - np.minimum(np.fmax(y * (rows / self.y_max), 0.0), rows - 1).astype(np.int64)
        prev = np.concatenate([row[:, :1], row[:, :-1]], axis=1)
        n = np.abs(row - prev) + 1
        end = np.cumsum(n).reshape(n.shape)
        first = (np.minimum(prev, row) - (end - n)) * columns + np.arange(columns)
        flat = np.repeat(first.ravel(), n.ravel()) + np.arange(end[-1, -1]) * columns
        image = np.zeros(rows * columns, np.uint32)
        for (_, color), a, b in zip(self.series, (0, *end[:-1, -1]), end[:, -1], strict=True):
            image[flat[a:b]] = color
        return image.reshape(rows, columns)

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        vis = visible_columns(self, p, 0.0, self.duration_ns * self.x_scale)
        if vis is None or not self.series:
            return
        x0, x1, cols = vis
        rows = int(min(MAX_ROWS, max(1, np.ceil(self.y_max * abs(p.transform().m22()) - PIXEL_TOLERANCE))))
        img = self.drawn((*vis, rows), lambda: pg.functions.ndarray_to_qimage(
            np.ascontiguousarray(self.rasterise(x0, x1, cols, rows)), PREMULTIPLIED))
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        p.drawImage(QRectF(x0, 0.0, x1 - x0, self.y_max), img, QRectF(0, 0, cols, rows))
