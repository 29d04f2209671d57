"""Counter plots stacked as horizontal bands in one view, so that a pane links, lays out and
repaints one ViewBox for all of them instead of one per plot.

The view counts downwards (inverted y, as the timeline): band ``k`` spans y in ``[k, k + 1)``.
Inside it a value ``v`` of a plot showing ``[0, y_max]`` sits at :func:`band_y`, the bottom
``BAND_BOTTOM`` and top ``BAND_TOP`` of the band left empty so that the tick labels of
neighbouring bands do not run into each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QTransform
from PySide6.QtWidgets import QGraphicsItem

from neuronviz.items import reports_errors

ABOVE_LEGENDS = 1000.0  # z of items the ViewBox draws over its legends
BAND_TOP = 0.16  # of a band's height, above its y_max
BAND_BOTTOM = 0.06  # below its zero
BAND_FILL = 1.0 - BAND_TOP - BAND_BOTTOM
MIN_TICK_PX = 17  # labelled ticks of a band at least this far apart (a line of 9 pt text and a gap)
TITLE_MARGIN_PX = 3  # between a band's title and the axis' left edge, and its tick labels


def band_y(k: int, value: float, y_max: float) -> float:
    """View y of ``value`` in band ``k`` showing ``[0, y_max]``."""
    return k + 1.0 - BAND_BOTTOM - BAND_FILL * value / y_max


def band_transform(k: int, y_max: float) -> QTransform:
    """Maps an item drawn downwards from y = 0 (``y_max``) to y = ``y_max`` (zero), as a
    :class:`~neuronviz.items.curve.CurveRaster`, into band ``k``."""
    return QTransform(1.0, 0.0, 0.0, BAND_FILL / y_max, 0.0, k + BAND_TOP)


@dataclass(frozen=True)
class Band:
    title: str
    y_max: float


class BandAxis(pg.AxisItem):
    """A left axis with ticks and labels per band and each band's title written along it."""

    def __init__(self) -> None:
        super().__init__("left")
        self.enableAutoSIPrefix(False)
        self.bands: list[Band] = []
        self._labels: dict[float, str] = {}

    def set_bands(self, bands: list[Band]) -> None:
        self.bands = list(bands)
        self.picture = None
        self.update()

    def tickValues(self, minVal, maxVal, size):
        """Labelled ticks at 1, 2 or 5 times a power of ten of each band's values, as many as fit
        its height at ``MIN_TICK_PX`` apart, and unlabelled ones at a fifth of that step."""
        self._labels = {}
        minVal, maxVal = sorted((minVal, maxVal))  # an inverted view gives them the other way round
        if not self.bands or size <= 0 or maxVal <= minVal:
            return []
        band_px = BAND_FILL * size / (maxVal - minVal)
        major, minor = [], []
        for k, band in enumerate(self.bands):
            if k >= maxVal or k + 1 <= minVal:
                continue
            raw = band.y_max / max(1.0, band_px / MIN_TICK_PX)
            power = 10.0 ** np.floor(np.log10(raw))
            step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
            for v in np.arange(0.0, band.y_max * (1 + 1e-9), step):
                y = band_y(k, v, band.y_max)
                major.append(y)
                self._labels[round(y, 9)] = f"{v:.4g}"
            minor += [band_y(k, v, band.y_max) for v in np.arange(0.0, band.y_max * (1 + 1e-9), step / 5)]
        return [(1.0, major), (0.2, minor)]

    def tickStrings(self, values, scale, spacing):
        return [self._labels.get(round(v, 9), "") for v in values]

    @reports_errors
    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs) -> None:
        """The ticks, then each band's title across the axis at its left edge, in the room its
        tick labels leave (on two lines if it needs them), as track names sit in a profiler; as
        text, so an SVG export keeps it searchable."""
        super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
        bounds = self.mapRectFromParent(self.geometry())
        r0, r1 = self.range
        if r1 == r0:
            return
        for k, band in enumerate(self.bands):
            top, bottom = sorted(bounds.bottom() - (y - r0) / (r1 - r0) * bounds.height() for y in (k, k + 1))
            if bottom <= bounds.top() or top >= bounds.bottom():
                continue
            labels = min((rect.left() for rect, _, _ in textSpecs if top <= rect.center().y() <= bottom),
                         default=bounds.right())
            room = QRectF(bounds.left() + TITLE_MARGIN_PX, top, labels - bounds.left() - 2 * TITLE_MARGIN_PX,
                          bottom - top)
            p.drawText(room, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
                                 | Qt.TextFlag.TextWordWrap), band.title)


class BandRules(QGraphicsItem):
    """Faint lines between the bands, across the whole view. A child of the ViewBox itself, not
    of its zoomed and panned contents: an x zoom neither moves nor resizes it."""

    def __init__(self, view: pg.ViewBox, color: QColor) -> None:
        super().__init__(view)
        self.view, self.pen = view, QPen(color, 0)
        self.bands = 0
        view.sigResized.connect(self._resized)

    def set_bands(self, n: int) -> None:
        self.bands = n
        self.update()

    def _resized(self, *_: object) -> None:
        self.prepareGeometryChange()

    def boundingRect(self) -> QRectF:
        return self.view.boundingRect()

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        rect = self.view.boundingRect()
        p.setPen(self.pen)
        p.drawLines([QLineF(rect.left(), y, rect.right(), y) for y in
                     (rect.top() + rect.height() * k / self.bands for k in range(1, self.bands))])


class ViewLine(QGraphicsItem):
    """A vertical line at ``value()`` (an x of the view) drawn by the ViewBox itself, above all
    its children: the counter legends, which sit over the curves, do not veil it (the playhead
    of the counter bands)."""

    def __init__(self, view: pg.ViewBox, pen: QPen) -> None:
        super().__init__(view)
        self.view, self.pen, self.x = view, pen, 0.0
        self.setZValue(ABOVE_LEGENDS)
        view.sigXRangeChanged.connect(self._moved)
        view.sigResized.connect(self._moved)

    def value(self) -> float:
        return self.x

    def setValue(self, x: float) -> None:
        self.x = x
        self._moved()

    def _moved(self, *_: object) -> None:
        self.prepareGeometryChange()  # only the strips the line leaves and enters are repainted

    def _px(self) -> float:
        return self.view.mapFromView(QPointF(self.x, 0.0)).x()

    def boundingRect(self) -> QRectF:
        rect = self.view.boundingRect()
        half = self.pen.widthF() + 1.0
        return QRectF(self._px() - half, rect.top(), 2 * half, rect.height())

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        rect, x = self.view.boundingRect(), self._px()
        if rect.left() <= x <= rect.right():
            p.setPen(self.pen)
            p.drawLine(QLineF(x, rect.top(), x, rect.bottom()))
