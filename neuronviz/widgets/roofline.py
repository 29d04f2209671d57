"""The roofline of a comparison: each run's compute roofs (per data type) and device-memory roof,
and each layer a mark at its arithmetic intensity and achieved FLOP/s, sized by its share of the
run's time, one colour per run, lines joining the same layer across runs; so a glance shows a
layer moving from memory-bound on one generation to compute-bound on another. Hover explains a
mark, a click selects its layer everywhere; the selected layer's ops are drawn as small marks."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout

from neuronviz.axes import log_ticks
from neuronviz.session import Session
from neuronviz.theme import GENERATION_COLORS, palette
from neuronviz.widgets.lazy import LazyView
from sim.analysis import Stats

RUN_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")  # beyond one run per chip
MARK_MIN, MARK_MAX = 5.0, 26.0  # px: a mark's size grows with the square root of its share of the run
STEP = re.compile(r" #\d+")  # decode steps: "decode ctx 132 #3/layer0.mlp" is drawn with its siblings


@dataclass
class Mark:
    run: int
    name: str  # the merged layer (or op) name
    layer: str  # a layer name to select
    intensity: float  # FLOP/B, inf when it moves no bytes
    flops_per_s: float
    share: float
    bound: str
    mfu: float | None
    time_ns: float


def merged_layers(layers: list[Stats]) -> list[tuple[str, str, float, float, float, str, float | None]]:
    """Layers with the same name but for their decode step merged: (name, a layer to select,
    FLOPs, bytes, time, bound of the longest, MFU)."""
    groups: dict[str, list[Stats]] = {}
    for s in layers:
        groups.setdefault(STEP.sub("", s.name), []).append(s)
    out = []
    for name, members in groups.items():
        flops = sum(s.flops for s in members)
        nbytes = sum(s.bytes for s in members)
        time = sum(s.time_ns for s in members)
        longest = max(members, key=lambda s: s.time_ns)
        mfu = None
        if all(s.mfu is not None for s in members) and time > 0:
            mfu = sum(s.mfu * s.time_ns for s in members) / time
        out.append((name, members[0].name, flops, nbytes, time, longest.bound, mfu))
    return out


def run_color(session: Session, index: int) -> str:
    """A run's colour: its generation's, unless an earlier run has the same chip."""
    chips = [r.trace.run.deployment.chip for r in session.runs]
    chip = chips[index]
    if chip in GENERATION_COLORS and chips.index(chip) == index:
        return GENERATION_COLORS[chip]
    return RUN_COLORS[index % len(RUN_COLORS)]


class RooflineView(LazyView):
    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.marks: list[Mark] = []
        self.op_marks: list[Mark] = []
        self.plot = pg.PlotWidget(background=palette().background)
        self.plot.setLogMode(x=True, y=True)
        self.plot.setLabel("bottom", "arithmetic intensity (FLOP per byte of device memory)")
        self.plot.setLabel("left", "TFLOP/s")  # what a layer reached: the text above says so, a short axis holds it
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        # the runs' roofs named beside the plot, not over it: a short dock (at 1280x720) leaves the
        # plot no corner the legend would not cover marks in
        plot_item = self.plot.getPlotItem()
        self.legend = pg.LegendItem()
        self.legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)  # its rows, not spread out
        plot_item.layout.addItem(self.legend, 0, 3, 4, 1)  # beside the axes too: the plot's height holds it
        plot_item.layout.setAlignment(self.legend, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        plot_item.legend = self.legend  # the roofs made with a name join it
        self.scatter = pg.ScatterPlotItem(hoverable=True, tip=self._tip, pxMode=True)
        self.scatter.sigClicked.connect(self._clicked)
        self.op_scatter = pg.ScatterPlotItem(hoverable=True, tip=self._op_tip, pxMode=True, symbol="t")
        self.show_links = QCheckBox("Join layers across runs")
        self.show_links.setChecked(True)
        self.show_links.toggled.connect(self.refresh)
        self.status = QLabel()
        self.status.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.show_links)
        top.addWidget(self.status, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.plot, 1)
        session.sig_runs_changed.connect(self.refresh)
        session.sig_selection_changed.connect(self._selection_changed)

    def first_shown(self) -> None:
        self.refresh()

    # --- drawing ------------------------------------------------------------------------------

    def refresh(self, *_: object) -> None:
        if not self.shown:
            return
        self.plot.clear()
        self.legend.clear()
        self.marks = []
        runs = self.session.runs
        analyses = [r.analysis for r in runs]
        for i, a in enumerate(analyses):
            total = a.total_ns or 1.0
            for name, layer, flops, nbytes, time, bound, mfu in merged_layers(a.layers):
                if flops <= 0 or time <= 0:
                    continue  # nothing on the array: no place on a FLOP/s axis
                intensity = flops / nbytes if nbytes > 0 else math.inf
                self.marks.append(Mark(i, name, layer, intensity, flops / (time * 1e-9), time / total, bound, mfu,
                                       time))
        finite = [m.intensity for m in self.marks if math.isfinite(m.intensity)]
        lo = min(finite, default=1.0) / 3
        hi = max(finite, default=100.0) * 3
        edge = hi  # marks that move no bytes sit at the right edge
        roof_top = 0.0
        for i, (run, a) in enumerate(zip(runs, analyses, strict=True)):
            if a.roofs is None:
                continue
            color = run_color(self.session, i)
            dtype = run.trace.run.workload.matmul_dtype or "bf16"
            peak = a.roofs.compute.get(dtype, max(a.roofs.compute.values()))
            roof_top = max(roof_top, peak)
            bw = a.roofs.memory_bytes_per_s
            ridge = peak / bw
            xs = np.array([min(lo, ridge / 10), ridge, max(hi, ridge * 10)])
            curve = self.plot.plot(xs, np.minimum(peak, xs * bw) / 1e12, pen=pg.mkPen(color, width=2),
                                   name=f"{run.title}: {peak / 1e12:,.0f} {dtype.upper()} TFLOP/s, "
                                        f"{bw / 1e9:,.0f} GB/s {a.roofs.memory_kind}")
            curve.setZValue(-5)
            for other, flops in a.roofs.compute.items():
                if other != dtype:
                    self.plot.plot([ridge * flops / peak, xs[-1]], [flops / 1e12] * 2,
                                   pen=pg.mkPen(color, width=1, style=Qt.PenStyle.DotLine)).setZValue(-5)
            lo, hi = min(lo, xs[0]), max(hi, xs[-1])
        if self.show_links.isChecked():
            self._draw_links(edge)
        spots = []
        for k, m in enumerate(self.marks):
            x = m.intensity if math.isfinite(m.intensity) else edge
            size = MARK_MIN + (MARK_MAX - MARK_MIN) * math.sqrt(m.share)
            spots.append({"pos": (math.log10(x), math.log10(m.flops_per_s / 1e12)), "data": k, "size": size,
                          "brush": pg.mkBrush(run_color(self.session, m.run)), "pen": self._pen(m)})
        self.scatter.setData(spots)
        self.plot.addItem(self.scatter)
        self.plot.addItem(self.op_scatter)
        self._draw_ops()
        self.plot.getAxis("bottom").setTicks([log_ticks(lo, hi)])
        ys = [m.flops_per_s / 1e12 for m in self.marks] + ([roof_top / 1e12] if roof_top else [])
        if ys:
            self.plot.getAxis("left").setTicks([log_ticks(min(ys), max(ys))])
        self.status.setText(self._status(analyses))

    def _pen(self, m: Mark):
        if m.layer == self.session.selected_layer or STEP.sub("", self.session.selected_layer) == m.name:
            return pg.mkPen(palette().foreground, width=2.5)
        return pg.mkPen(palette().background, width=0.5)

    def _draw_links(self, edge: float) -> None:
        by_name: dict[str, list[Mark]] = {}
        for m in self.marks:
            by_name.setdefault(m.name, []).append(m)
        xs, ys = [], []
        for members in by_name.values():
            if len(members) < 2:
                continue
            for m in sorted(members, key=lambda m: m.run):
                xs.append(m.intensity if math.isfinite(m.intensity) else edge)
                ys.append(m.flops_per_s / 1e12)
            xs.append(np.nan)
            ys.append(np.nan)
        if xs:
            self.plot.plot(np.array(xs), np.array(ys), pen=pg.mkPen(palette().grid, width=1), connect="finite")

    def _draw_ops(self) -> None:
        """The selected layer's ops, in each run, as small triangles."""
        self.op_marks = []
        name = self.session.selected_layer
        if name:
            for i, run in enumerate(self.session.runs):
                layer = next((s for s in run.analysis.layers if s.name == name), None)
                if layer is None:
                    continue
                for op in layer.ops:
                    if op.flops > 0 and op.time_ns > 0:
                        self.op_marks.append(Mark(i, op.name, name, op.arithmetic_intensity,
                                                  op.flops / (op.time_ns * 1e-9), 0.0, op.bound, op.mfu, op.time_ns))
        finite = [m.intensity for m in self.marks if math.isfinite(m.intensity)] or [100.0]
        edge = max(finite) * 3
        self.op_scatter.setData([{"pos": (math.log10(m.intensity if math.isfinite(m.intensity) else edge),
                                          math.log10(m.flops_per_s / 1e12)), "data": k, "size": 8,
                                  "brush": pg.mkBrush(run_color(self.session, m.run)),
                                  "pen": pg.mkPen(palette().foreground, width=1)}
                                 for k, m in enumerate(self.op_marks)])

    def _status(self, analyses) -> str:
        missing = [r.title for r, a in zip(self.session.runs, analyses, strict=True) if a.roofs is None]
        text = ("Each mark is a layer: its FLOPs over the bytes it moves to and from device memory (x) and the "
                "FLOP/s it reached (y), sized by its share of its run's time. Below a sloped roof a layer is "
                "memory-bound; under a flat one, compute-bound. Click a mark to select its layer.")
        if missing:
            text += f" No chip data (no roofs): {', '.join(missing)}."
        return text

    # --- interaction --------------------------------------------------------------------------

    def _describe(self, m: Mark) -> str:
        run = self.session.runs[m.run]
        intensity = "no device-memory traffic" if not math.isfinite(m.intensity) else f"{m.intensity:,.1f} FLOP/B"
        mfu = "" if m.mfu is None else f" · MFU {100 * m.mfu:.0f}%"
        return (f"{m.name} on {run.title}\n{m.time_ns / 1e3:,.1f} µs ({100 * m.share:.1f}% of the run)\n"
                f"{intensity} · {m.flops_per_s / 1e12:,.2f} TFLOP/s{mfu}\nbound: {m.bound}")

    def _tip(self, x: float, y: float, data: int) -> str:
        return self._describe(self.marks[data])

    def _op_tip(self, x: float, y: float, data: int) -> str:
        return "op " + self._describe(self.op_marks[data])

    def _clicked(self, _item, points, _event=None) -> None:
        if len(points):
            self.session.select_layer(self.marks[points[0].data()].layer)

    def _selection_changed(self, *_: object) -> None:
        if not self.shown:
            return
        if self.marks:
            self.scatter.setPen([self._pen(m) for m in self.marks])
        self._draw_ops()

    def view_pos_of(self, mark: Mark) -> QPointF:
        """Where ``mark`` is drawn, in the plot widget's viewport coordinates (for tests and tours)."""
        finite = [m.intensity for m in self.marks if math.isfinite(m.intensity)] or [100.0]
        x = mark.intensity if math.isfinite(mark.intensity) else max(finite) * 3
        scene = self.plot.plotItem.vb.mapViewToScene(QPointF(math.log10(x), math.log10(mark.flops_per_s / 1e12)))
        return self.plot.mapFromScene(scene)
