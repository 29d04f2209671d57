"""The animated chip diagram: NeuronCores with their engines lit by activity at the playhead,
SBUF/PSUM fill gauges, and the HBM/DDR link with its read and write bandwidth."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from neuronviz.theme import ENGINE_LABELS, engine_color, palette

CORE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
MIN_CORES_HEIGHT = 60  # below this the cores are left out: their engine cells would be unreadable


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
    read_bytes_per_s: float = 0.0
    write_bytes_per_s: float = 0.0
    peak_bytes_per_s: float = 1.0


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

    def paintEvent(self, event) -> None:
        pal = palette()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), QColor(pal.background))
        fg = QColor(pal.foreground)
        font = QFont()
        font.setPointSizeF(8.5)
        p.setFont(font)
        w, h = self.width() - 12, self.height()
        gauges_h = 92
        if h - gauges_h - 12 >= MIN_CORES_HEIGHT:  # a short pane keeps the gauges, not crushed cores
            self._cores(p, QRectF(6, 6, w, h - gauges_h - 12), fg)
        self._gauges(p, QRectF(6, max(6, h - gauges_h), w, min(gauges_h, h - 6) - 6), fg)
        p.end()

    def _cores(self, p: QPainter, area: QRectF, fg: QColor) -> None:
        st = self.state
        n = max(1, st.cores)
        cols = 1 if n == 1 else 2
        rows = -(-n // cols)
        gap = 5.0
        cw = (area.width() - gap * (cols - 1)) / cols
        ch = min((area.height() - gap * (rows - 1)) / rows, cw * 0.9)
        active = n if st.active is None else st.active
        for c in range(n):
            r = QRectF(area.left() + (c % cols) * (cw + gap), area.top() + (c // cols) * (ch + gap), cw, ch)
            idle = c >= active
            p.setPen(_pen(fg, 1.0, Qt.PenStyle.DashLine if idle else Qt.PenStyle.SolidLine))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRoundedRect(r, 4, 4)
            p.drawText(r.adjusted(4, 1, 0, 0), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop,
                       f"NC{c} idle" if idle else f"NC{c}")
            self._engines(p, r.adjusted(4, 14, -4, -4), fg, idle)

    def _engines(self, p: QPainter, r: QRectF, fg: QColor, idle: bool = False) -> None:
        engines = self.state.engines
        half_w, half_h = r.width() / 2, r.height() / 2
        for i, kind in enumerate(CORE_ENGINES):
            cell = QRectF(r.left() + (i % 2) * half_w + 1, r.top() + (i // 2) * half_h + 1, half_w - 2, half_h - 2)
            color = engine_color(kind)
            if kind not in engines:
                p.setPen(_pen(QColor(fg.red(), fg.green(), fg.blue(), 60), 1.0, Qt.PenStyle.DashLine))
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.drawRect(cell)
                continue
            level = 0.0 if idle else self.state.activity.get(kind, 0.0)
            fill = QColor(color)
            fill.setAlpha(int(35 + 220 * level))
            p.setPen(_pen(color, 1.5))
            p.setBrush(fill)
            p.drawRect(cell)
            p.save()
            if cell.height() < p.fontMetrics().height():  # many cores: a smaller font, if that fits
                small = QFont(p.font())
                small.setPointSizeF(SMALL_POINTS)
                p.setFont(small)
            if cell.height() >= p.fontMetrics().height():
                p.setPen(QColor("white") if level > 0.5 else fg)
                p.drawText(cell, Qt.AlignmentFlag.AlignCenter, engine_label(kind, level, cell, p.fontMetrics()))
            p.restore()

    def _bar(self, p: QPainter, r: QRectF, frac: float, color: QColor, label: str, fg: QColor) -> None:
        p.setPen(_pen(fg))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(r)
        p.fillRect(QRectF(r.left(), r.top(), r.width() * min(1.0, max(0.0, frac)), r.height()), color)
        p.drawText(r.adjusted(4, 0, -2, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, label)

    def _gauges(self, p: QPainter, r: QRectF, fg: QColor) -> None:
        st = self.state
        bh = (r.height() - 12) / 4
        sbuf_color, psum_color = QColor(120, 120, 200, 160), QColor(200, 120, 120, 160)
        self._bar(p, QRectF(r.left(), r.top(), r.width(), bh), st.sbuf_fill, sbuf_color,
                  f"SBUF {100 * st.sbuf_fill:.0f}%", fg)
        self._bar(p, QRectF(r.left(), r.top() + bh + 4, r.width(), bh), st.psum_fill, psum_color,
                  f"PSUM {100 * st.psum_fill:.0f}%", fg)
        peak = max(st.peak_bytes_per_s, 1.0)
        y = r.top() + 2 * bh + 8
        self._bar(p, QRectF(r.left(), y, r.width(), bh), st.read_bytes_per_s / peak, engine_color("dma_read"),
                  f"{st.memory_kind} read {st.read_bytes_per_s / 1e9:.0f} GB/s", fg)
        self._bar(p, QRectF(r.left(), y + bh + 4, r.width(), bh), st.write_bytes_per_s / peak,
                  engine_color("dma_write"), f"{st.memory_kind} write {st.write_bytes_per_s / 1e9:.0f} GB/s", fg)
