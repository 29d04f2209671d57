"""The animated chip diagram: NeuronCores with their engines lit by activity at the playhead,
SBUF/PSUM fill gauges, and the HBM/DDR link with its read and write bandwidth. A run over
several chips also shows the instance's chips as its topology joins them (a 2D torus, rings, a
switch), the chips it uses filled and the NeuronLinks lit by its collectives' traffic, and the
EFA link to the other instances of a cluster."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from neuronviz.theme import ENGINE_LABELS, engine_color, palette

CORE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
MARGIN_PX = 6  # around the diagram's parts
MIN_CORES_HEIGHT = 60  # below this the cores are left out: their engine cells would be unreadable
TOPOLOGY_HEIGHT = 120  # the instance's chips and links under the cores, for runs over several chips
REQUESTS_HEIGHT = 16  # the line counting a stream's requests, above the gauges
GAUGE_PX, GAUGE_GAP_PX = 18, 4  # a gauge bar holds a line of the diagram's font
GAUGES = 4  # SBUF, PSUM, memory read and write
GAUGES_HEIGHT = GAUGES * GAUGE_PX + (GAUGES - 1) * GAUGE_GAP_PX
# the least height the diagram is drawn in: its gauges; a shorter pane leaves it out
MIN_HEIGHT = GAUGES_HEIGHT + 2 * MARGIN_PX


@dataclass
class ChipState:
    """What the diagram shows at one instant; the pane fills it in, the widget only draws it."""

    title: str = ""
    cores: int = 1  # the chip's NeuronCores
    active: int | None = None  # how many of them run the work (the rest draw idle); None: all
    engines: tuple[str, ...] = CORE_ENGINES
    activity: dict[str, float] = field(default_factory=dict)  # engine kind -> busy fraction 0..1
    sbuf_fill: float = 0.0
    psum_fill: float = 0.0
    memory_kind: str = "HBM"
    # the chip's device-memory traffic at the playhead (every core of it running the work), and its peak
    read_bytes_per_s: float = 0.0
    write_bytes_per_s: float = 0.0
    peak_bytes_per_s: float = 1.0
    # the instance, for runs over several chips: None for one chip
    topology: str | None = None  # "torus", "ring" or "switch"
    topology_dims: tuple[int, ...] = ()
    chips_used: int = 1
    link_bytes_per_s: float = 0.0  # NeuronLink traffic of one chip at the playhead
    link_peak_bytes_per_s: float = 1.0
    nodes: int = 1  # instances joined by EFA
    efa_bytes_per_s: float = 0.0
    efa_peak_bytes_per_s: float = 1.0
    # a stream of requests back to back: how many each copy has finished at the playhead, of all
    requests_done: int = 0
    requests_total: int = 1
    request_items: int = 1  # inferences one request serves (its batch)
    tokens_done: int | None = None  # a serving run: the tokens its copy has generated
    done: bool = False  # the run has ended before the playhead: the diagram holds its last moments


def _pen(color: QColor, width: float = 1.0, style: Qt.PenStyle = Qt.PenStyle.SolidLine) -> QPen:
    pen = QPen(color)
    pen.setWidthF(width)
    pen.setStyle(style)
    return pen


SMALL_POINTS = 7.0  # engine labels of cells too short for the diagram's font


def engine_label(kind: str, level: float, cell: QRectF, metrics: QFontMetrics) -> str:
    """The text of an engine's cell: its name and busy %, on two lines when the cell is tall
    enough, else on one, else the % alone (the cell's colour and place name the engine)."""
    percent = f"{100 * level:.0f}%"
    if cell.height() >= 2 * metrics.height():
        return f"{ENGINE_LABELS[kind]}\n{percent}"
    one_line = f"{ENGINE_LABELS[kind]} {percent}"
    return one_line if metrics.horizontalAdvance(one_line) <= cell.width() - 4 else percent


class _CellStyle:
    """The pens, colours and fonts of a frame's engine cells, each made once for all of them."""

    def __init__(self, p: QPainter, fg: QColor) -> None:
        self.fg, self.white = fg, QColor("white")
        self.absent = _pen(QColor(fg.red(), fg.green(), fg.blue(), 60), 1.0, Qt.PenStyle.DashLine)
        self.colors = {kind: engine_color(kind) for kind in CORE_ENGINES}
        self.pens = {kind: _pen(color, 1.5) for kind, color in self.colors.items()}
        self.font, self.metrics = p.font(), p.fontMetrics()
        self.small = QFont(self.font)
        self.small.setPointSizeF(SMALL_POINTS)
        self.small_metrics = QFontMetrics(self.small, p.device())


class ChipDiagram(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = ChipState()
        self.setMinimumWidth(200)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(230, 300)

    def set_state(self, state: ChipState) -> None:
        self.state = state
        self.update()

    def parts(self) -> dict[str, QRectF]:
        """Where each part of the diagram goes at its height, in steps as it gets shorter: the
        gauges always (``gauge0`` to ``gauge3``); the requests line above them, then the cores (at
        least :data:`MIN_CORES_HEIGHT`), then the topology under them, each only when it fits whole.
        No two parts overlap; below :data:`MIN_HEIGHT` nothing fits (the pane hides the diagram)."""
        w, h = self.width() - 2 * MARGIN_PX, self.height()
        if h < MIN_HEIGHT:
            return {}
        bottom = h - MARGIN_PX - GAUGES_HEIGHT  # the gauges at the bottom, the rest stacked above them
        out = {f"gauge{k}": QRectF(MARGIN_PX, bottom + k * (GAUGE_PX + GAUGE_GAP_PX), w, GAUGE_PX)
               for k in range(GAUGES)}
        if self.state.requests_total > 1 and bottom - MARGIN_PX >= REQUESTS_HEIGHT:
            bottom -= REQUESTS_HEIGHT
            out["requests"] = QRectF(MARGIN_PX, bottom, w, REQUESTS_HEIGHT)
        room = bottom - 2 * MARGIN_PX  # between the top margin and a gap above what is placed
        if room < MIN_CORES_HEIGHT:
            return out
        if self.state.topology and room - TOPOLOGY_HEIGHT - MARGIN_PX >= MIN_CORES_HEIGHT:
            bottom -= TOPOLOGY_HEIGHT + MARGIN_PX
            out["topology"] = QRectF(MARGIN_PX, bottom, w, TOPOLOGY_HEIGHT)
            room -= TOPOLOGY_HEIGHT + MARGIN_PX
        out["cores"] = QRectF(MARGIN_PX, MARGIN_PX, w, room)
        return out

    def paintEvent(self, event) -> None:
        pal = palette()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), QColor(pal.background))
        fg = QColor(pal.foreground)
        font = QFont()
        font.setPointSizeF(8.5)
        p.setFont(font)
        parts = self.parts()
        if "cores" in parts:
            self._cores(p, parts["cores"], fg)
        if "topology" in parts:
            self._topology(p, parts["topology"], fg)
        if "requests" in parts:
            st = self.state
            text = (f"requests done {st.requests_done:,} of {st.requests_total:,}"
                    + (f" ({st.requests_done * st.request_items:,} inferences)" if st.request_items > 1 else "")
                    + (f" · {st.tokens_done:,} tokens" if st.tokens_done is not None else ""))
            p.setPen(fg)
            p.drawText(parts["requests"], Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                       p.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, int(parts["requests"].width())))
        if "gauge0" in parts:
            self._gauges(p, [parts[f"gauge{k}"] for k in range(GAUGES)], fg)
        p.end()

    def _topology(self, p: QPainter, area: QRectF, fg: QColor) -> None:
        """The instance's chips (the run's filled) and their links, lit by the traffic at the playhead."""
        st = self.state
        link = engine_color("neuronlink")
        level = min(1.0, st.link_bytes_per_s / max(st.link_peak_bytes_per_s, 1.0))
        lit = QColor(link)
        lit.setAlpha(int(50 + 205 * level))
        link_pen = _pen(lit, 1.0 + 2.5 * level)
        label_h = 14.0
        efa_w = 46.0 if st.nodes > 1 else 0.0
        shape = "x".join(map(str, st.topology_dims))
        title = f"{st.topology} {shape} · NeuronLink {st.link_bytes_per_s / 1e9:,.0f} GB/s"
        p.setPen(fg)
        p.drawText(QRectF(area.left(), area.top(), area.width(), label_h), Qt.AlignmentFlag.AlignLeft, title)
        body = QRectF(area.left(), area.top() + label_h + 2, area.width() - efa_w, area.height() - label_h - 2)
        points = self._chip_points(body)
        p.setPen(link_pen)
        for a, b in self._links(len(points)):
            p.drawLine(points[a], points[b])
        across = max(st.topology_dims or (1,)) * max(1, len(st.topology_dims) - 1)  # chips side by side
        size = max(3.0, min(10.0, body.width() / (2.5 * across)))
        for i, pt in enumerate(points):
            used = i < st.chips_used
            p.setPen(_pen(fg, 1.0, Qt.PenStyle.SolidLine if used else Qt.PenStyle.DotLine))
            p.setBrush(QColor(fg) if used else Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(pt.x() - size / 2, pt.y() - size / 2, size, size))
        if st.nodes > 1:  # the instance's EFA, to the cluster's other instances
            efa = engine_color("efa")
            e_level = min(1.0, st.efa_bytes_per_s / max(st.efa_peak_bytes_per_s, 1.0))
            box = QRectF(area.right() - efa_w + 6, body.top(), efa_w - 6, body.height())
            fill = QColor(efa)
            fill.setAlpha(int(35 + 220 * e_level))
            p.setPen(_pen(efa, 1.5))
            p.setBrush(fill)
            p.drawRoundedRect(box, 4, 4)
            p.setPen(QColor("white") if e_level > 0.5 else fg)
            p.drawText(box, Qt.AlignmentFlag.AlignCenter,
                       f"EFA\n× {st.nodes}\n{st.efa_bytes_per_s / 1e9:,.0f}\nGB/s")

    def _chip_points(self, r: QRectF) -> list[QPointF]:
        """Where each chip sits: a grid per 2D torus (side by side for an UltraServer's rings of
        them), a circle for a ring or a switch."""
        st = self.state
        dims = st.topology_dims or (1,)
        if st.topology == "torus" and len(dims) >= 2:
            a, b = dims[0], dims[1]
            groups = 1 if len(dims) == 2 else dims[2]
            gw = r.width() / groups
            out = []
            for g in range(groups):
                for i in range(a * b):
                    x = r.left() + g * gw + gw * ((i % b) + 0.5) / b
                    y = r.top() + r.height() * ((i // b) + 0.5) / a
                    out.append(QPointF(x, y))
            return out
        n = dims[0]
        radius = min(r.width(), r.height()) / 2 - 6
        c = r.center()
        return [QPointF(c.x() + radius * math.cos(2 * math.pi * i / n - math.pi / 2),
                        c.y() + radius * math.sin(2 * math.pi * i / n - math.pi / 2)) for i in range(n)]

    def _links(self, n: int) -> list[tuple[int, int]]:
        """Pairs of chips joined by a NeuronLink (a torus's wrap-around links, and an UltraServer's
        rings joining the same places of its instances' tori, are left to the eye)."""
        st = self.state
        dims = st.topology_dims or (1,)
        if st.topology == "torus" and len(dims) >= 2:
            a, b = dims[0], dims[1]
            per = a * b
            pairs = []
            for g in range(n // per):
                for i in range(per):
                    if i % b < b - 1:
                        pairs.append((g * per + i, g * per + i + 1))
                    if i // b < a - 1:
                        pairs.append((g * per + i, g * per + i + b))
            return pairs
        if st.topology == "switch":  # every chip to the switch: drawn as spokes to the centre chip
            return [(i, (i + n // 2) % n) for i in range(n // 2)]
        return [(i, (i + 1) % n) for i in range(n)]

    @staticmethod
    def core_grid(n: int, width: float, height: float, gap: float = 5.0) -> tuple[int, float, float]:
        """Columns, width and height of the core boxes: the grid whose boxes' shorter side is the
        longest (a Trn2's eight cores in a short pane go four abreast rather than two), no box
        taller than 0.9 of its width."""
        best = (0, 0.0, 0.0)
        for cols in range(1, max(1, n) + 1):
            rows = -(-n // cols)
            cw = (width - gap * (cols - 1)) / cols
            ch = min((height - gap * (rows - 1)) / rows, cw * 0.9)
            if min(cw, ch) > min(best[1], best[2]):
                best = (cols, cw, ch)
        return best

    def _cores(self, p: QPainter, area: QRectF, fg: QColor) -> None:
        st = self.state
        n = max(1, st.cores)
        gap = 5.0
        cols, cw, ch = self.core_grid(n, area.width(), area.height(), gap)
        active = n if st.active is None else st.active
        cells = _CellStyle(p, fg)  # what every core's cells share, made once a frame (a Trn2 has 32 of them)
        outline = {idle: _pen(fg, 1.0, Qt.PenStyle.DashLine if idle else Qt.PenStyle.SolidLine)
                   for idle in (False, True)}
        for c in range(n):
            r = QRectF(area.left() + (c % cols) * (cw + gap), area.top() + (c // cols) * (ch + gap), cw, ch)
            idle = c >= active
            p.setPen(outline[idle])
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRoundedRect(r, 4, 4)
            label = f"NC{c} idle" if idle else f"NC{c} done" if st.done else f"NC{c}"
            if cells.metrics.horizontalAdvance(label) > r.width() - 6:
                label = "done" if st.done and not idle else f"NC{c}"  # a narrow box: a dashed outline says idle
            p.drawText(r.adjusted(4, 1, 0, 0), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, label)
            self._engines(p, r.adjusted(4, 14, -4, -4), cells, idle)

    def _engines(self, p: QPainter, r: QRectF, cells: _CellStyle, idle: bool = False) -> None:
        engines = self.state.engines
        half_w, half_h = r.width() / 2, r.height() / 2
        for i, kind in enumerate(CORE_ENGINES):
            cell = QRectF(r.left() + (i % 2) * half_w + 1, r.top() + (i // 2) * half_h + 1, half_w - 2, half_h - 2)
            if kind not in engines:
                p.setPen(cells.absent)
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(cell)
                continue
            level = 0.0 if idle else self.state.activity.get(kind, 0.0)
            fill = QColor(cells.colors[kind])
            fill.setAlpha(int(35 + 220 * level))
            p.setPen(cells.pens[kind])
            p.setBrush(fill)
            p.drawRect(cell)
            metrics = cells.metrics
            if cell.height() < metrics.height():  # many cores: a smaller font, if that fits
                p.setFont(cells.small)
                metrics = cells.small_metrics
            if cell.height() >= metrics.height():
                p.setPen(cells.white if level > 0.5 else cells.fg)
                p.drawText(cell, Qt.AlignmentFlag.AlignCenter, engine_label(kind, level, cell, metrics))
            if metrics is cells.small_metrics:
                p.setFont(cells.font)

    def _bar(self, p: QPainter, r: QRectF, frac: float, color: QColor, label: str, fg: QColor) -> None:
        p.setPen(_pen(fg))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(r)
        p.fillRect(QRectF(r.left(), r.top(), r.width() * min(1.0, max(0.0, frac)), r.height()), color)
        p.drawText(r.adjusted(4, 0, -2, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, label)

    def _gauges(self, p: QPainter, bars: list[QRectF], fg: QColor) -> None:
        st = self.state
        peak = max(st.peak_bytes_per_s, 1.0)
        shown = ((st.sbuf_fill, QColor(120, 120, 200, 160), f"SBUF {100 * st.sbuf_fill:.0f}%"),
                 (st.psum_fill, QColor(200, 120, 120, 160), f"PSUM {100 * st.psum_fill:.0f}%"),
                 (st.read_bytes_per_s / peak, engine_color("dma_read"),
                  f"{st.memory_kind} read {st.read_bytes_per_s / 1e9:,.0f} GB/s · chip"),
                 (st.write_bytes_per_s / peak, engine_color("dma_write"),
                  f"{st.memory_kind} write {st.write_bytes_per_s / 1e9:,.0f} GB/s · chip"))
        for r, (frac, color, label) in zip(bars, shown, strict=True):
            self._bar(p, r, frac, color, p.fontMetrics().elidedText(label, Qt.TextElideMode.ElideRight,
                                                                     int(r.width()) - 6), fg)
