"""Timeline rows rasterised with NumPy and drawn as one image per paint.

Each visible pixel column of an engine row is coloured by the fraction of that column's time
the engine was busy (exact, from the busy-time integral, over the column's time or, zoomed out
on a long track, a window within ``COLUMN_SNAP`` of a pixel of it), so one paint costs at most
O(pixels x log events) whatever the number of events: a million-event trace repaints as fast
as a small one, and below one pixel the bars merge into a shade instead of disappearing.

The shade is linear in the busy fraction, on one scale for every row and pane: an idle column
is the background itself, a column busy all its time the engine's full colour, a half-busy one
halfway between. Zoomed in until an event spans whole columns, the events stand out as bars.
Columns busy so little that their shade is hard to tell from the background (under
``TICK_BELOW``) get a thin line of full colour at the bottom of the row: "some activity here".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QLinearGradient, QPainter
from PySide6.QtWidgets import QGraphicsItem

from neuronviz.items import reports_errors
from neuronviz.theme import text_on
from sim.integrals import IntegralStack

MAX_COLUMNS = 8192
PIXEL_TOLERANCE = 1e-6  # of a pixel: below it a size in pixels counts as whole
# of a pixel: how far a column's edges may move to where a long track's integral is tabulated
# (sim.metrics), which spares a zoomed-out view a search of a million events per column
COLUMN_SNAP = 1 / 16
# images are built premultiplied (opaque colours or fully transparent pixels are the same either
# way), so Qt draws them without converting the format on every paint
PREMULTIPLIED = QImage.Format.Format_ARGB32_Premultiplied
# static items (axes, legends): Qt keeps them as device pixmaps, so repainting them costs a blit
CACHE = QGraphicsItem.CacheMode.DeviceCoordinateCache
ROW_FILL = 0.8  # fraction of a row's height the bars fill
TICK_BELOW = 0.1  # busy fraction under which a column's shade is too faint to see: it gets a tick
TICK_PX = 2.0  # the tick's height on screen
MIN_LABEL_PX = 24  # layer spans and slices narrower than this on screen get no name
MIN_TEXT_ROW_PX = 10  # slice rows lower than this on screen get no names (they would overlap)
MATCH_COLOR = "#F0C808"  # layers matching the search: a yellow that reads on light and dark backgrounds


def argb(color: QColor) -> int:
    return (color.red() << 16) | (color.green() << 8) | color.blue()


def visible_columns(item: pg.GraphicsObject, p: QPainter, x0: float, x1: float) -> tuple[float, float, int] | None:
    """The visible part of ``[x0, x1]`` in the coordinates of ``item`` (a child of a ViewBox, in
    its view coordinates) and its width in pixels of ``p``'s device."""
    view = item.getViewBox()
    if view is None:
        return None
    rect = view.viewRect()
    a, b = max(rect.left(), x0), min(rect.right(), x1)
    px_per_x = abs(p.transform().m11())
    if b <= a or not px_per_x:
        return None
    # a view a whole number of pixels wide gets that many columns, whatever the rounding
    return a, b, int(min(MAX_COLUMNS, max(1, np.ceil((b - a) * px_per_x - PIXEL_TOLERANCE))))


def _begin_labels(p: QPainter):
    """Save ``p`` and set it up to write names in device pixels, in the names' 8 pt font; its metrics."""
    p.save()
    p.resetTransform()
    font = QFont()
    font.setPointSizeF(8.0)
    p.setFont(font)
    return p.fontMetrics()


class RasterItem(pg.GraphicsObject):
    """An item painted from images rasterised for the visible pixel columns; x is time in ns
    times ``x_scale``.

    The last images are kept with the view they were made for. A repaint that does not change
    the view (the playhead moving over the item) draws them again, and a zoom frame rasterises
    once and draws straight to the screen, without a device pixmap to fill and blend in between.
    """

    def __init__(self) -> None:
        super().__init__()
        self.x_scale = 1.0
        self._drawn: tuple[tuple, object] | None = None  # (view, images made for it)

    def set_x_scale(self, scale: float) -> None:
        self.prepareGeometryChange()
        self.x_scale = scale
        self.changed()

    def changed(self) -> None:
        """What the item shows has changed: rasterise again at the next paint."""
        self._drawn = None
        self.update()

    def drawn(self, view: tuple, rasterise: Callable[[], object]) -> object:
        """The images for ``view`` (any key of what they depend on), rasterised when it changed."""
        if self._drawn is None or self._drawn[0] != view:
            self._drawn = (view, rasterise())
        return self._drawn[1]


class TrackRows(RasterItem):
    """Engine rows: the ``i``-th row of ``rows`` spans y in ``[ys[i], ys[i]+1)`` (``ys`` is
    ``0, 1, ...`` unless given)."""

    def __init__(self, rows: IntegralStack, colors: list[QColor], duration_ns: float,
                 ys: list[int] | None = None) -> None:
        super().__init__()
        self.rows = rows  # the busy integral of each row
        self.ys = list(range(len(rows))) if ys is None else ys
        self.channels = np.array([[c.red(), c.green(), c.blue()] for c in colors] or np.zeros((0, 3)), np.float64)
        self.opaque = np.array([argb(c) for c in colors], np.uint32) | np.uint32(0xFF000000)  # the ticks' colours
        self.duration_ns = duration_ns

    def boundingRect(self) -> QRectF:
        return QRectF(0.0, 0.0, self.duration_ns * self.x_scale, float(max(self.ys, default=-1) + 1))

    def rasterise(self, x0: float, x1: float, columns: int) -> tuple[np.ndarray, np.ndarray]:
        """Premultiplied ARGB pixels, one row per track, for ``columns`` columns between ``x0`` and
        ``x1``: the shades (the engine's colour at an opacity equal to its busy fraction there)
        and the ticks (its full colour where it was busy, but less than ``TICK_BELOW``)."""
        edges_ns = np.linspace(x0, x1, columns + 1) / self.x_scale
        frac = np.clip(self.rows.means(edges_ns, COLUMN_SNAP), 0.0, 1.0)
        alpha = np.rint(255.0 * frac)
        scale = alpha / 255.0
        shades = alpha.astype(np.uint32) << 24
        for shift, channel in ((16, 0), (8, 1), (0, 2)):
            shades |= (scale * self.channels[:, channel, None]).astype(np.uint32) << shift
        ticks = np.where((frac > 0) & (frac < TICK_BELOW), self.opaque[:, None], np.uint32(0))
        return shades, ticks

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        vis = visible_columns(self, p, 0.0, self.duration_ns * self.x_scale)
        if vis is None or not len(self.rows):
            return
        x0, x1, cols = vis
        shades, ticks = self.drawn(vis, lambda: self._row_images(x0, x1, cols))
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        pad = (1.0 - ROW_FILL) / 2
        tick = min(ROW_FILL, TICK_PX / (abs(p.transform().m22()) or 1.0))
        source = QRectF(0, 0, cols, 1)
        for row, (y, img) in enumerate(zip(self.ys, shades, strict=True)):
            p.drawImage(QRectF(x0, y + pad, x1 - x0, ROW_FILL), img, source)
            if ticks[row] is not None:
                p.drawImage(QRectF(x0, y + pad + ROW_FILL - tick, x1 - x0, tick), ticks[row], source)

    def _row_images(self, x0: float, x1: float, cols: int) -> tuple[list[QImage], list[QImage | None]]:
        """An image of shades per row (an SVG would draw all rows of one image in each) and one of
        ticks per row that has any; the images share the rasterised arrays' memory, which they
        keep alive."""
        shades, ticks = (np.ascontiguousarray(a) for a in self.rasterise(x0, x1, cols))
        return ([_image(shades[row]) for row in range(len(shades))],
                [_image(ticks[row]) if ticks[row].any() else None for row in range(len(ticks))])


class SliceRows(RasterItem):
    """Rows of slices of another tool's trace, drawn as Perfetto draws them: each pixel column of
    a row in the colour of the slice there (by its name, :func:`neuronviz.theme.name_color`) at
    full opacity, the background where there is none. Zoomed out, a column holding several
    slices takes the colour of the first; every slice, an instant too, covers at least the column
    it starts in. Names are written inside slices wide enough to hold a few characters."""

    def __init__(self, ys: list[int], starts: list[np.ndarray], ends: list[np.ndarray], ops: list[np.ndarray],
                 op_names: tuple[str, ...], op_colors: list[QColor], duration_ns: float) -> None:
        super().__init__()
        self.ys, self.starts, self.ops, self.op_names = ys, starts, ops, op_names
        self.ends = ends
        # slices of a row do not overlap, except beyond the depth a thread's rows hold: the
        # furthest any slice so far reaches keeps a row's ends in order for the searches
        self.reach = [np.maximum.accumulate(e) if len(e) else e for e in ends]
        self.by_length = [np.argsort(s - e, kind="stable") for s, e in zip(starts, ends, strict=True)]
        self.colors = np.array([argb(c) for c in op_colors] or [0], np.uint32) | np.uint32(0xFF000000)
        self.text = [text_on(c) for c in op_colors]
        self.duration_ns = duration_ns

    def boundingRect(self) -> QRectF:
        return QRectF(0.0, 0.0, self.duration_ns * self.x_scale, float(max(self.ys, default=-1) + 1))

    def rasterise(self, x0: float, x1: float, columns: int) -> np.ndarray:
        """Opaque ARGB pixels, one row per slice row, for ``columns`` columns from ``x0`` to ``x1``."""
        edges = np.linspace(x0, x1, columns + 1) / self.x_scale
        out = np.zeros((len(self.ys), columns), np.uint32)
        for r, (start, reach, op) in enumerate(zip(self.starts, self.reach, self.ops, strict=True)):
            if not len(start):
                continue
            first = np.searchsorted(reach, edges[:-1], side="left")  # the first slice not ended before the column
            at = np.clip(first, 0, len(start) - 1)
            inside = (first < len(start)) & (start[at] < edges[1:])
            out[r] = np.where(inside, self.colors[op[at]], np.uint32(0))
        return out

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        vis = visible_columns(self, p, 0.0, self.duration_ns * self.x_scale)
        if vis is None or not self.ys:
            return
        x0, x1, cols = vis
        pixels = np.ascontiguousarray(self.drawn(vis, lambda: self.rasterise(x0, x1, cols)))
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        pad = (1.0 - ROW_FILL) / 2
        source = QRectF(0, 0, cols, 1)
        for r, y in enumerate(self.ys):
            p.drawImage(QRectF(x0, y + pad, x1 - x0, ROW_FILL), _image(pixels[r]), source)
        if abs(p.transform().m22()) * ROW_FILL >= MIN_TEXT_ROW_PX:
            self._labels(p, x0, x1)

    def _wide(self, r: int, x0: float, x1: float, px_per_ns: float) -> np.ndarray:
        """The slices of row ``r`` in view at least :data:`MIN_LABEL_PX` wide on screen: looked
        for among the slices in view or among those long enough, whichever are fewer."""
        start, end, reach = self.starts[r], self.ends[r], self.reach[r]
        lo, hi = int(np.searchsorted(reach, x0, side="left")), int(np.searchsorted(start, x1))
        length = (end - start)[self.by_length[r]]  # longest first
        n_long = int(np.searchsorted(-length, -MIN_LABEL_PX / px_per_ns, side="right"))
        cand = self.by_length[r][:n_long] if n_long < hi - lo else np.arange(lo, max(hi, lo))
        a, b = np.maximum(start[cand], x0), np.minimum(end[cand], x1)
        return np.sort(cand[(b - a) * px_per_ns >= MIN_LABEL_PX])

    def _labels(self, p: QPainter, x0_x: float, x1_x: float) -> None:
        tr = p.transform()
        px_per_ns = abs(tr.m11()) * self.x_scale
        x0, x1 = x0_x / self.x_scale, x1_x / self.x_scale
        metrics = _begin_labels(p)
        for r, y in enumerate(self.ys):
            for i in self._wide(r, x0, x1, px_per_ns).tolist():
                a = tr.map(QPointF(max(self.starts[r][i], x0) * self.x_scale, y + 0.1))
                b = tr.map(QPointF(min(self.ends[r][i], x1) * self.x_scale, y + 0.9))
                rect = QRectF(a, b).normalized().adjusted(3, 0, -3, 0)
                op = int(self.ops[r][i])
                name = self.op_names[op]
                if rect.width() > metrics.horizontalAdvance(name[:4]) + 4:
                    p.setPen(self.text[op])
                    p.drawText(rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                               metrics.elidedText(name, Qt.TextElideMode.ElideRight, int(rect.width())))
        p.restore()


def _image(row: np.ndarray) -> QImage:
    return pg.functions.ndarray_to_qimage(row[None, :], PREMULTIPLIED)


SHADE_HELP = ("A row's shade is the share of each pixel's time its engine was busy: the background when idle, "
              "its full colour when busy all the time, halfway at 50%, on the same scale in every pane. "
              f"A thin line at the bottom of a row marks pixels busy less than {TICK_BELOW:.0%} of the time, "
              "too faint to see otherwise. Zoom in to see the events themselves.")


class ShadeLegend(pg.GraphicsWidget):
    """The rows' scale, for the corner under their names: ``idle [strip] busy``, the strip a row
    in small going from the background (idle) to full colour (busy all the time), with the tick
    of a pixel busy under ``TICK_BELOW`` under its first part."""

    def __init__(self, background: QColor, full: QColor, text: QColor) -> None:
        super().__init__()
        self.background, self.full, self.text = background, full, text
        self.setToolTip(SHADE_HELP)
        self.setCacheMode(CACHE)
        # as tall as its line of text: the corner's row is the time axis's, and a widget's default
        # height (50 px) would take that much from the rows above it
        self.setMaximumHeight(QFontMetricsF(self._font()).height() + 4)

    @staticmethod
    def _font() -> QFont:
        font = QFont()
        font.setPointSizeF(7.0)
        return font

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        p.setFont(self._font())
        metrics = p.fontMetrics()
        r = self.boundingRect().adjusted(4, 2, -4, 0)
        r.setHeight(metrics.height())
        strip = QRectF(r.left() + metrics.horizontalAdvance("idle") + 3, r.top() + 2, 0.0, r.height() - 4)
        strip.setRight(r.right() - metrics.horizontalAdvance("busy") - 3)
        gradient = QLinearGradient(strip.topLeft(), strip.topRight())
        gradient.setColorAt(0.0, self.background)
        gradient.setColorAt(1.0, self.full)
        p.fillRect(strip, gradient)
        p.fillRect(QRectF(strip.left(), strip.bottom() - TICK_PX, strip.width() * TICK_BELOW, TICK_PX), self.full)
        p.setPen(self.text)
        p.drawText(r, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, "idle")
        p.drawText(r, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, "busy")


class LayerRow(RasterItem):
    """Layer spans in one row at ``y``: alternating shades, the selected layer highlighted,
    names written inside spans wide enough to hold them."""

    def __init__(self, names: tuple[str, ...], start_ns: np.ndarray, end_ns: np.ndarray, y: float,
                 shades: tuple[QColor, QColor], highlight: QColor, text: QColor) -> None:
        super().__init__()
        order = np.argsort(start_ns, kind="stable")
        self.order = order
        self.names = names
        self.start = np.asarray(start_ns, dtype=np.float64)[order]
        self.end = np.asarray(end_ns, dtype=np.float64)[order]
        self.y = y
        self.shades = np.array([argb(shades[0]), argb(shades[1])], dtype=np.uint32) | np.uint32(0xFF000000)
        self.highlight = np.uint32(argb(highlight) | 0xFF000000)
        self.text_color = text
        self.selected = -1  # index into names
        self.matches = np.zeros(len(names), bool)  # spans that match the search, by index into names
        self.match_color = np.uint32(argb(QColor(MATCH_COLOR)) | 0xFF000000)

    def set_matches(self, indices: np.ndarray) -> None:
        self.matches = np.zeros(len(self.names), bool)
        self.matches[indices] = True
        self.changed()

    def set_selected(self, name: str) -> None:
        self.selected = self.names.index(name) if name in self.names else -1
        self.changed()

    def boundingRect(self) -> QRectF:
        end = float(self.end.max()) if len(self.end) else 0.0
        return QRectF(0.0, self.y, end * self.x_scale, 1.0)

    def span_at(self, t_ns: float) -> int:
        """Index (into ``names``) of the layer span covering ``t_ns``, or -1."""
        i = int(np.searchsorted(self.start, t_ns, side="right")) - 1
        if i >= 0 and t_ns < self.end[i]:
            return int(self.order[i])
        return -1

    def _pixels(self, x0: float, x1: float, cols: int) -> np.ndarray:
        centres = (x0 + (np.arange(cols) + 0.5) * (x1 - x0) / cols) / self.x_scale
        i = np.searchsorted(self.start, centres, side="right") - 1
        ic = np.clip(i, 0, None)
        inside = (i >= 0) & (centres < self.end[ic])
        px = np.where(inside, self.shades[ic % 2], np.uint32(0))
        if self.matches.any():
            px = np.where(inside & self.matches[self.order[ic]], self.match_color, px)
        if self.selected >= 0:
            px = np.where(inside & (self.order[ic] == self.selected), self.highlight, px)
        return px.astype(np.uint32)

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        if not len(self.start):
            return
        vis = visible_columns(self, p, 0.0, float(self.end.max()) * self.x_scale)
        if vis is None:
            return
        x0, x1, cols = vis
        img = self.drawn(vis, lambda: pg.functions.ndarray_to_qimage(
            np.ascontiguousarray(self._pixels(x0, x1, cols)[None, :]), PREMULTIPLIED))
        p.drawImage(QRectF(x0, self.y + 0.1, x1 - x0, 0.8), img, QRectF(0, 0, cols, 1))
        self._labels(p, x0, x1)

    def _labels(self, p: QPainter, x0: float, x1: float) -> None:
        """Names inside the spans wide enough to hold a few characters (vectorised pick first, so
        a zoom showing thousands of narrow layers costs no more than one showing a few)."""
        lo = int(np.searchsorted(self.end, x0 / self.x_scale))
        hi = int(np.searchsorted(self.start, x1 / self.x_scale))
        if hi <= lo:
            return
        a = np.maximum(self.start[lo:hi] * self.x_scale, x0)
        b = np.minimum(self.end[lo:hi] * self.x_scale, x1)
        wide = lo + np.flatnonzero((b - a) * abs(p.transform().m11()) >= MIN_LABEL_PX)
        if not len(wide):
            return
        tr = p.transform()
        metrics = _begin_labels(p)
        for i in wide.tolist():
            a = tr.map(QPointF(max(self.start[i] * self.x_scale, x0), self.y + 0.1))
            b = tr.map(QPointF(min(self.end[i] * self.x_scale, x1), self.y + 0.9))
            rect = QRectF(a, b).normalized().adjusted(3, 0, -3, 0)
            name = self.names[self.order[i]].rsplit("/", 1)[-1]
            if rect.width() > metrics.horizontalAdvance(name[:4]) + 4:
                selected = int(self.order[i]) == self.selected
                p.setPen(QColor("white") if selected else self.text_color)
                p.drawText(rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                           metrics.elidedText(name, Qt.TextElideMode.ElideRight, int(rect.width())))
        p.restore()
