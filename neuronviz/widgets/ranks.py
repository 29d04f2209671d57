"""Several ranks as one view: an overview strip of timeline rows on the panes' clock, a row per
rank (its engines' busy share and its waits as shading, its collectives as bars, each collective's
arrivals joined across the ranks and its straggler marked); then a table row per rank (its
engines' busy share, its waits, its collectives, how often the others waited for it) and every
collective matched across ranks with each rank's arrival and the straggler marked. Clicking a
collective in the strip or the table shows it in every pane. The view Neuron Explorer's FAQ says
it lacks for multi-rank device profiles (sim.ranks)."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from pyqtgraph.Qt import internals
from PySide6.QtCore import QObject, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QCursor, QPainter
from PySide6.QtWidgets import QLabel, QSplitter, QTableWidget, QTableWidgetItem, QToolTip, QVBoxLayout

from neuronviz.items import reports_errors
from neuronviz.items.time_axis import TimeAxis
from neuronviz.session import Session
from neuronviz.theme import ENGINE_COLORS
from neuronviz.widgets import compact_rows
from neuronviz.widgets.lazy import LazyView
from neuronviz.widgets.operators import SLOWER
from sim.catalogue import number
from sim.ranks import ENGINES, Collective, RankActivity, activity, collective_events, collectives, rank_summaries
from sim.trace import Trace

HINT = ("Open the device profiles of several ranks together (File > Open profile directory, or several at once with "
        "File > Open, or neuronviz DIR DIR...): their collectives are matched here, rank by rank, on one clock.")
RANK_COLUMNS = ("rank", *(f"{e.capitalize() if e != 'gpsimd' else 'GpSimd'} busy %" for e in ENGINES), "waits µs",
                "collectives µs", "waited for others µs", "last to arrive")
STRAGGLER_ALPHA = 0.45
BUSY_COLOR = ENGINE_COLORS["tensor"]  # a rank's engines busy: the upper half of its row, as opaque as busy
WAIT_COLOR = ENGINE_COLORS["gpsimd"]  # and waiting (semaphores, DMA): the lower half
COLLECTIVE_COLOR, COLLECTIVE_EDGE = ENGINE_COLORS["collective"], "#8a7f00"  # as the panes' collectives, outlined
SKEW_COLOR = "#808080"  # the line joining a collective's arrivals rank to rank
COLLECTIVE_HEIGHT = 0.5  # of a row
STRAGGLER_PX = 11  # the straggler's mark, a triangle on the top edge of its bar
SKEW_MIN_PX = 4  # the lines joining arrivals are drawn when the collectives in view are this far apart on average
HOVER_PX = 4  # how near a bar the pointer tells of it
STRIP_AXIS_PX = 150  # the rank names
STRIP_ROW_PX, STRIP_EXTRA_PX, STRIP_MAX_PX = 26, 40, 240  # the strip's height: rows and time axis
SHADING_PX = 2  # of a column of the rows' shading
MAX_SHADING_COLUMNS = 2048


def _item(text: str, tip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if tip:
        item.setToolTip(tip)
    return item


def _us(ns: float) -> str:
    return "-" if not math.isfinite(ns) else number(ns / 1e3)


class CollectiveBars(pg.GraphicsObject):
    """Each rank's collectives as bars on its row (``COLLECTIVE_HEIGHT`` high, centred on it),
    drawn as the timeline items draw theirs: only the bars in the range shown, one
    ``drawRects`` of a rect array NumPy fills; where a row has more bars in view than pixels
    across, the pixel columns they cover are merged into runs, so that a paint draws at most
    half a rect per pixel column of each row whatever the number of collectives; bars closer than
    :data:`SKEW_MIN_PX` on average are drawn without their outline, which would cover them."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per rank: starts, ends, furthest end so far
        self._bounds = QRectF()
        self._rects = internals.PrimitiveArray(QRectF, 4)
        self._pen = pg.mkPen(COLLECTIVE_EDGE)
        self._brush = QBrush(QColor(COLLECTIVE_COLOR))

    def set_bars(self, starts: list[np.ndarray], ends: list[np.ndarray]) -> None:
        """The bars of each row (rank): their starts and ends on the x axis."""
        self.prepareGeometryChange()
        self.rows = []
        for s, e in zip(starts, ends, strict=True):
            o = np.argsort(s, kind="stable")
            s, e = np.asarray(s, np.float64)[o], np.asarray(e, np.float64)[o]
            self.rows.append((s, e, np.maximum.accumulate(e) if len(e) else e))
        lo = min((float(s[0]) for s, _, _ in self.rows if len(s)), default=0.0)
        hi = max((float(reach[-1]) for _, _, reach in self.rows if len(reach)), default=0.0)
        self._bounds = QRectF(lo, -0.5, hi - lo, len(self.rows))
        self.update()

    def boundingRect(self) -> QRectF:
        return self._bounds

    def visible(self, x0: float, x1: float, px_per_x: float) -> tuple[np.ndarray, np.ndarray]:
        """The rects drawn for the range ``[x0, x1]`` at ``px_per_x`` pixels a unit of x: (x, y,
        width, height) a row; and which are drawn without an outline."""
        out, dense = [], []
        columns = max(int(math.ceil((x1 - x0) * px_per_x)), 1)
        for r, (start, end, reach) in enumerate(self.rows):
            lo, hi = int(np.searchsorted(reach, x0, side="left")), int(np.searchsorted(start, x1, side="right"))
            a, b = start[lo:hi], end[lo:hi]
            dense.append(np.full(hi - lo if hi - lo <= columns else 0, (hi - lo) * SKEW_MIN_PX > columns))
            if hi - lo > columns:  # more bars than pixels: the runs of columns they cover
                first = np.clip(((a - x0) * px_per_x).astype(np.int64), 0, columns - 1)
                last = np.clip(((b - x0) * px_per_x).astype(np.int64), first, columns - 1)
                covered = np.cumsum(np.bincount(first, minlength=columns + 1)
                                    - np.bincount(last + 1, minlength=columns + 1))[:columns] > 0
                change = np.flatnonzero(np.diff(np.concatenate(([False], covered, [False])).astype(np.int8)))
                a, b = x0 + change[0::2] / px_per_x, x0 + change[1::2] / px_per_x
                dense[-1] = np.ones(len(a), bool)
            out.append(np.column_stack([a, np.full(len(a), r - COLLECTIVE_HEIGHT / 2), b - a,
                                        np.full(len(a), COLLECTIVE_HEIGHT)]))
        return (np.concatenate(out), np.concatenate(dense)) if out else (np.zeros((0, 4)), np.zeros(0, bool))

    @reports_errors
    def paint(self, p: QPainter, *args) -> None:
        view = self.getViewBox()
        px_per_x = abs(p.transform().m11())
        if view is None or not self.rows or not px_per_x:
            return
        rect = view.viewRect()
        rects, dense = self.visible(rect.left(), rect.right(), px_per_x)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setBrush(self._brush)
        for pen, these in ((self._pen, rects[~dense]), (Qt.PenStyle.NoPen, rects[dense])):
            if len(these):
                self._rects.resize(len(these))
                self._rects.ndarray()[:] = these
                p.setPen(pen)
                p.drawRects(*self._rects.drawargs())


class RankStrip(pg.PlotWidget):
    """The ranks as timeline rows on the panes' clock: each rank's row shaded by how busy its
    engines were (upper half) and how much it waited (lower half), pixel by pixel of the range
    shown; its collectives as bars; each matched collective's arrivals joined across the ranks
    and its straggler marked above its bar. Hovering tells the rank, the collective, its arrival
    and wait; clicking a collective emits its index."""

    sig_collective_clicked = Signal(int)

    def __init__(self) -> None:
        super().__init__(axisItems={"bottom": TimeAxis()})
        self.setMenuEnabled(False)
        self.hideButtons()
        self.setMouseEnabled(x=True, y=False)
        self.invertY(True)
        self.getAxis("left").setWidth(STRIP_AXIS_PX)
        self.enableAutoRange(x=False, y=False)  # the panes' range, or the ranks' span: set, not fitted
        self.shading = pg.ImageItem()
        self.addItem(self.shading, ignoreBounds=True)
        self.bars = CollectiveBars()
        self.addItem(self.bars)
        self.skew = pg.PlotCurveItem(pen=pg.mkPen(SKEW_COLOR, width=1, style=Qt.PenStyle.DashLine), connect="pairs")
        self.addItem(self.skew)
        self.marks = pg.ScatterPlotItem(symbol="t", size=STRAGGLER_PX, brush=QColor(SLOWER), pen=pg.mkPen("#101010"))
        self.addItem(self.marks)
        self.titles: list[str] = []
        self.activity: list[RankActivity] = []
        self.units = np.ones(0)  # x per ns of each rank's row: 1, or 1 / its duration when normalised
        self.matched: list[Collective] = []
        self.starts = self.ends = np.zeros((0, 0))  # per matched collective and rank, on the x axis
        self._reach = self._floor = np.zeros(0)  # the furthest end up to each collective, the earliest start from it
        self._skew = np.zeros((0, 4))  # each line joining two ranks' arrivals: x, y, x, y (in collective order)
        self._skew_of = np.zeros(0, np.int64)  # and its collective
        self._marks = np.zeros((0, 2))  # each collective's straggler mark: x, y
        # shading follows the range a frame later, all changes of a frame at once, and waits while
        # the strip is off screen (the panes' zoom moves it with every frame)
        self._shade_later = QTimer(self, singleShot=True, interval=0, timeout=self._shade)
        self._stale = False
        self.getViewBox().sigXRangeChanged.connect(self._range_moved)
        self.scene().sigMouseMoved.connect(self._hovered)
        self.scene().sigMouseClicked.connect(self._clicked)

    def set_ranks(self, titles: list[str], traces: list[Trace], matched: list[Collective], units: np.ndarray) -> None:
        """Draw ``traces`` (ranks) as rows named ``titles``; ``units``: x per ns of each row."""
        self.titles, self.matched, self.units = titles, matched, np.asarray(units, np.float64)
        self.activity = [activity(t) for t in traces]
        n = len(traces)
        self.getAxis("left").setTicks([[(r, f"{r + 1}: {t}") for r, t in enumerate(titles)]])
        self.setYRange(-0.5, n - 0.5, padding=0)
        x0, x1 = [], []
        for r, trace in enumerate(traces):
            start, end, _ = collective_events(trace)
            x0.append(start * self.units[r])
            x1.append(end * self.units[r])
        self.bars.set_bars(x0, x1)
        self.starts = np.array([c.starts for c in matched], np.float64).reshape(-1, n) * self.units
        self.ends = np.array([c.ends for c in matched], np.float64).reshape(-1, n) * self.units
        # each collective's arrivals joined rank to rank: how far apart the ranks reached it
        a, b = self.starts[:, :-1], self.starts[:, 1:]
        both = np.isfinite(a) & np.isfinite(b)
        rows = np.broadcast_to(np.arange(n - 1, dtype=np.float64), a.shape)
        self._skew = np.column_stack([a[both], rows[both], b[both], rows[both] + 1])
        self._skew_of = np.broadcast_to(np.arange(len(matched))[:, None], a.shape)[both]
        straggler = np.array([c.straggler for c in matched], np.int64)
        self._marks = np.column_stack([self.starts[np.arange(len(matched)), straggler],
                                       straggler - COLLECTIVE_HEIGHT / 2])
        with np.errstate(all="ignore"):
            self._reach = np.fmax.accumulate(np.nanmax(self.ends, axis=1)) if len(matched) else np.zeros(0)
            self._floor = np.fmin.accumulate(np.nanmin(self.starts, axis=1)[::-1])[::-1] if len(matched) \
                else np.zeros(0)
        self._range_moved()

    def _in_view(self) -> None:
        """The arrivals' lines and the straggler marks of the collectives in the range shown (the
        lines only when these are :data:`SKEW_MIN_PX` apart on average: closer, they would be a
        grey wash)."""
        (x0, x1), width = self.viewRange()[0], self.getViewBox().width()
        lo = int(np.searchsorted(self._reach, x0, side="left"))
        hi = max(int(np.searchsorted(self._floor, x1, side="right")), lo)
        self.marks.setData(self._marks[lo:hi, 0], self._marks[lo:hi, 1])
        a, b = np.searchsorted(self._skew_of, [lo, hi]) if (hi - lo) * SKEW_MIN_PX <= width else (0, 0)
        self.skew.setData(self._skew[a:b, 0::2].ravel(), self._skew[a:b, 1::2].ravel())

    def _range_moved(self, *_: object) -> None:
        self._in_view()
        self._stale = True
        if self.isVisible() and not self.visibleRegion().isEmpty():
            self._shade_later.start()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt)
        super().paintEvent(event)
        if self._stale:  # brought on screen since the range moved
            self._shade_later.start()

    def _shade(self) -> None:
        """The rows' shading over the range shown, a column per :data:`SHADING_PX` pixels."""
        self._stale = False
        n = len(self.activity)
        if not n:
            self.shading.clear()
            return
        (x0, x1), width = self.viewRange()[0], self.getViewBox().width()
        columns = int(min(max(width / SHADING_PX, 1), MAX_SHADING_COLUMNS))
        edges = np.linspace(x0, x1, columns + 1)
        image = np.zeros((columns, 2 * n, 4), np.uint8)
        for r, act in enumerate(self.activity):
            t = edges / self.units[r]
            for band, (share, color) in enumerate(((act.busy(t), BUSY_COLOR), (act.waiting(t), WAIT_COLOR))):
                c = QColor(color)
                image[:, 2 * r + band, :3] = (c.red(), c.green(), c.blue())
                image[:, 2 * r + band, 3] = np.rint(np.clip(share, 0.0, 1.0) * 255)
        self.shading.setImage(image, autoLevels=False, levels=(0, 255))
        self.shading.setRect(QRectF(x0, -0.5, x1 - x0, n))

    def collective_at(self, x: float, y: float, tolerance: float = 0.0, mark: float = 0.0) -> int:
        """The matched collective whose bar holds (``x``, ``y``), within ``tolerance`` across and
        ``mark`` above a straggler's bar (its mark, whose lower half covers the bar's top edge),
        the one arriving nearest ``x``; -1 for none (the shading beside a bar is not it)."""
        r = int(round(y))
        if not (0 <= r < self.starts.shape[1] and len(self.starts)):
            return -1
        half = COLLECTIVE_HEIGHT / 2
        if not r - half - mark <= y <= r + half:
            return -1
        start, end = self.starts[:, r], self.ends[:, r]
        on = (start - tolerance <= x) & (x <= end + tolerance)
        if y < r - half:  # above the bar: on the straggler's mark
            on &= np.array([c.straggler == r for c in self.matched], bool)
        hit = np.flatnonzero(on)
        return int(hit[np.argmin(np.abs(start[hit] - x))]) if len(hit) else -1

    def describe(self, x: float, y: float, tolerance: float = 0.0, mark: float = 0.0) -> str:
        """What the row at ``y`` shows at ``x``: the collective there (its arrival, and the wait
        for the straggler or that it is the straggler), else the rank's busy and waiting shares of
        the pixel there."""
        r = int(round(y))
        if not 0 <= r < len(self.titles):
            return ""
        k = self.collective_at(x, y, tolerance, mark)
        if k >= 0:
            c = self.matched[k]
            first = min(s for s in c.starts if math.isfinite(s))
            head = f"{r + 1}: {self.titles[r]} · {c.name} #{c.index + 1}"
            if r == c.straggler:
                return (f"{head}\nthe straggler: arrived last, {_us(c.spread_ns)} µs after the first rank; "
                        "the others waited for it\nclick to show it in the panes")
            return (f"{head}\narrived {_us(c.starts[r] - first)} µs after the first rank; waited "
                    f"{_us(c.waits_ns[r])} µs for the straggler ({c.straggler + 1})\nclick to show it in the panes")
        (x0, x1), width = self.viewRange()[0], max(self.getViewBox().width(), 1.0)
        half = (x1 - x0) / width / 2
        t = np.array([x - half, x + half]) / self.units[r]
        act = self.activity[r]
        return f"{r + 1}: {self.titles[r]}\nengines busy {act.busy(t)[0]:.0%}, waiting {act.waiting(t)[0]:.0%} here"

    def _view_point(self, scene_pos) -> tuple[float, float, float, float] | None:
        """Where ``scene_pos`` is in the view, how far across a bar may be (:data:`HOVER_PX`) and
        how far above a straggler's bar its mark reaches (half of it), in the view's units."""
        vb = self.getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = vb.mapSceneToView(scene_pos)
        (x0, x1), (y0, y1) = self.viewRange()
        return (p.x(), p.y(), HOVER_PX * (x1 - x0) / max(vb.width(), 1.0),
                STRAGGLER_PX / 2 * abs(y1 - y0) / max(vb.height(), 1.0))

    def _hovered(self, scene_pos) -> None:
        at = self._view_point(scene_pos)
        text = self.describe(*at) if at is not None else ""
        if text:
            QToolTip.showText(QCursor.pos(), text, self)
        else:
            QToolTip.hideText()

    def _clicked(self, event) -> None:
        at = self._view_point(event.scenePos())
        if at is not None and event.button() == Qt.MouseButton.LeftButton:
            k = self.collective_at(*at)
            if k >= 0:
                self.sig_collective_clicked.emit(k)


class RanksView(LazyView):
    sig_show_span = Signal(int, float, float)  # run index, start ns, end ns: zoom the panes there

    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.title = QLabel(HINT)
        self.title.setWordWrap(True)
        self.overview = QTableWidget(0, len(RANK_COLUMNS))
        self.overview.setHorizontalHeaderLabels(list(RANK_COLUMNS))
        self.strip = RankStrip()
        self.strip.sig_collective_clicked.connect(self._strip_clicked)
        self.strip.getViewBox().sigXRangeChanged.connect(self._strip_moved)
        self.strip.hide()
        self.timeline: pg.PlotItem | None = None  # the panes' (the first's): the strip shows its range
        self._following = False
        self.collectives = QTableWidget(0, 0)
        self.collectives.cellClicked.connect(self._collective_clicked)
        for table in (self.overview, self.collectives):
            table.verticalHeader().setVisible(False)
            compact_rows(table)
        split = QSplitter(Qt.Orientation.Horizontal)  # side by side: the tab is as short as the others
        split.addWidget(self.overview)
        split.addWidget(self.collectives)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addWidget(self.strip)
        layout.addWidget(split, 1)
        self.matched = []
        session.sig_runs_changed.connect(self.refresh)
        session.sig_time_mode_changed.connect(self.refresh)

    def first_shown(self) -> None:
        self.refresh()

    def refresh(self, *_: object) -> None:
        if not self.shown:
            return
        runs = self.session.runs
        traces = [r.trace for r in runs]
        self.matched = collectives(traces) if len(traces) > 1 else []
        if not self.matched:
            self.title.setText(HINT)
            self.overview.setRowCount(0)
            self.collectives.setRowCount(0)
            self.strip.hide()
            return
        self._draw_strip(runs)
        spread = max(c.spread_ns for c in self.matched)
        self.title.setText(f"{len(runs)} ranks, {len(self.matched):,} collectives matched in order; the widest "
                           f"spread between first and last arrival {_us(spread)} µs. The straggler of each "
                           "collective (the rank the others waited for) is marked; click one to show it.")
        summaries = rank_summaries(traces, self.matched)
        self.overview.setRowCount(len(runs))
        for r, (run, s) in enumerate(zip(runs, summaries, strict=True)):
            cells = [run.title, *("-" if e not in s.busy else number(100 * s.busy[e], "percent") for e in ENGINES),
                     _us(s.wait_ns), _us(s.collective_ns), _us(s.waited_for_others_ns), f"{s.last_arrivals:,}"]
            for c, text in enumerate(cells):
                self.overview.setItem(r, c, _item(text))
        self.overview.resizeColumnsToContents()
        headers = ["#", "collective", "spread µs",
                   *(f"{i + 1}: {r.short_title} arrives µs" for i, r in enumerate(runs))]
        self.collectives.setColumnCount(len(headers))
        self.collectives.setHorizontalHeaderLabels(headers)
        self.collectives.setRowCount(len(self.matched))
        first_col = 3
        for k, c in enumerate(self.matched):
            first = min(s for s in c.starts if math.isfinite(s))
            self.collectives.setItem(k, 0, _item(f"{c.index + 1}"))
            self.collectives.setItem(k, 1, _item(c.name))
            self.collectives.setItem(k, 2, _item(_us(c.spread_ns)))
            for r, start in enumerate(c.starts):
                tip = (f"arrived {_us(start - first)} µs after the first; waited {_us(c.waits_ns[r])} µs for the "
                       f"straggler" if math.isfinite(start) else "this rank ran fewer collectives")
                item = _item(_us(start - first), tip)
                if r == c.straggler:
                    color = QColor(SLOWER)
                    color.setAlphaF(STRAGGLER_ALPHA)
                    item.setBackground(QBrush(color))
                    item.setToolTip(f"the straggler: arrived last, {_us(c.spread_ns)} µs after the first")
                self.collectives.setItem(k, first_col + r, item)
        self.collectives.resizeColumnsToContents()

    def _draw_strip(self, runs: list) -> None:
        units = [1.0 / r.duration_ns if self.session.normalised else 1.0 for r in runs]
        self.strip.setFixedHeight(min(STRIP_ROW_PX * len(runs) + STRIP_EXTRA_PX, STRIP_MAX_PX))
        self.strip.getAxis("bottom").set_normalised(self.session.normalised)
        self.strip.show()
        self.strip.set_ranks([r.short_title for r in runs], [r.trace for r in runs], self.matched, np.array(units))
        if self.timeline is not None:
            self._pane_moved(None, self.timeline.viewRange()[0])
        else:
            self.strip.setXRange(0.0, 1.0 if self.session.normalised else self.session.max_duration_ns, padding=0.01)

    def follow_timeline(self, timeline: pg.PlotItem | None) -> None:
        """Show the range of the panes' ``timeline`` in the strip, and move it when the strip is
        zoomed or panned (None: the panes are gone)."""
        if self.timeline is not None:
            try:
                self.timeline.sigXRangeChanged.disconnect(self._pane_moved)
            except RuntimeError:  # gone with its pane
                pass
        self.timeline = timeline
        if timeline is not None:
            timeline.sigXRangeChanged.connect(self._pane_moved)
            self._pane_moved(None, timeline.viewRange()[0])

    def _pane_moved(self, _view: object, x_range: tuple[float, float]) -> None:
        self._following = True
        try:
            self.strip.setXRange(*x_range, padding=0)
        finally:
            self._following = False

    def _strip_moved(self, _view: object, x_range: tuple[float, float]) -> None:
        if not self._following and self.timeline is not None:
            self.timeline.setXRange(*x_range, padding=0)

    def _strip_clicked(self, k: int) -> None:
        self.collectives.selectRow(k)
        self._collective_clicked(k, 0)

    def _collective_clicked(self, row: int, _column: int) -> None:
        if 0 <= row < len(self.matched):
            c = self.matched[row]
            starts = [s for s in c.starts if math.isfinite(s)]
            ends = [e for e in c.ends if math.isfinite(e)]
            self.sig_show_span.emit(c.straggler, min(starts), max(ends))
