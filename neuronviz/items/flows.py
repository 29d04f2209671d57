"""Flow arrows between slices, as Perfetto draws them: from the end of the slice a flow leaves to
the start of the slice it enters, each end in the middle of its slice's row."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRectF
from PySide6.QtGui import QColor, QPainter, QPen

from neuronviz.items import reports_errors

MAX_ARROWS = 2000  # drawn at most, the first in time of those in view (more are a tangle anyway)
HEAD_PX = 5.0  # the arrowhead's sides on screen


class FlowArrows(pg.GraphicsObject):
    """Arrows from ``(x0_ns, y0)`` to ``(x1_ns, y1)``, x in ns times ``x_scale``, in one pen."""

    def __init__(self, x0_ns: np.ndarray, y0: np.ndarray, x1_ns: np.ndarray, y1: np.ndarray, color: QColor) -> None:
        super().__init__()
        order = np.argsort(np.minimum(x0_ns, x1_ns), kind="stable")
        self.x0, self.y0, self.x1, self.y1 = (np.asarray(a, np.float64)[order] for a in (x0_ns, y0, x1_ns, y1))
        self.left = np.minimum(self.x0, self.x1)
        self.right = np.maximum.accumulate(np.maximum(self.x0, self.x1)) if len(self.x0) else self.x0
        self.color = color
        self.x_scale = 1.0

    def set_x_scale(self, scale: float) -> None:
        self.prepareGeometryChange()
        self.x_scale = scale
        self.update()

    def boundingRect(self) -> QRectF:
        if not len(self.x0):
            return QRectF()
        top, bottom = float(min(self.y0.min(), self.y1.min())), float(max(self.y0.max(), self.y1.max()))
        return QRectF(float(self.left[0]) * self.x_scale, top,
                      float(self.right[-1] - self.left[0]) * self.x_scale, bottom - top)

    def in_view(self, a_ns: float, b_ns: float) -> np.ndarray:
        """The arrows crossing ``[a_ns, b_ns]``, at most :data:`MAX_ARROWS`, the earliest first."""
        lo = int(np.searchsorted(self.right, a_ns, side="left"))
        hi = int(np.searchsorted(self.left, b_ns, side="right"))
        picked = lo + np.flatnonzero(np.maximum(self.x0[lo:hi], self.x1[lo:hi]) >= a_ns)
        return picked[:MAX_ARROWS]

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        view = self.getViewBox()
        if view is None or not len(self.x0):
            return
        rect = view.viewRect()
        picked = self.in_view(rect.left() / self.x_scale, rect.right() / self.x_scale)
        if not len(picked):
            return
        tr = p.transform()
        p.save()
        p.resetTransform()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        pen = QPen(self.color)
        pen.setWidthF(1.0)
        p.setPen(pen)
        lines = []
        for i in picked.tolist():
            a = tr.map(QPointF(self.x0[i] * self.x_scale, self.y0[i]))
            b = tr.map(QPointF(self.x1[i] * self.x_scale, self.y1[i]))
            lines.append(QLineF(a, b))
            length = lines[-1].length()
            if length > 2 * HEAD_PX:  # a head pointing along the line at its end
                ux, uy = (b.x() - a.x()) / length, (b.y() - a.y()) / length
                for side in (1.0, -1.0):
                    lines.append(QLineF(b, QPointF(b.x() - HEAD_PX * (ux - side * 0.5 * uy),
                                                   b.y() - HEAD_PX * (uy + side * 0.5 * ux))))
        p.drawLines(lines)
        p.restore()
