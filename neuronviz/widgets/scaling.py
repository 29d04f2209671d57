"""Scaling of the comparison's training runs: step time, scaling efficiency and cost per step as
the cluster grows from 1 to 64 instances (each instance running the run's copies, data parallel
over EFA), simulated off the GUI thread on request."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pyqtgraph as pg
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from neuronviz.axes import log_ticks
from neuronviz.runner import _Worker
from neuronviz.session import Session
from neuronviz.theme import palette
from sim.description import RunDescription
from sim.errors import SimError
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate

NODES = (1, 2, 4, 8, 16, 32, 64)
CURVE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")  # Okabe-Ito


@dataclass(frozen=True)
class ScalingPoint:
    nodes: int
    step_s: float
    efficiency: float
    cost_per_step_usd: float | None


def training_config(run: RunDescription) -> RunConfig | None:
    """The configuration a training run was simulated with, every copy running (None for other
    runs and imported traces)."""
    config = run.software.config
    if run.workload.mode != "training" or config is None:
        return None
    return replace(config, copies=None)


def scaling_point(cfg: RunConfig, nodes: int) -> ScalingPoint:
    """One cluster size of ``cfg``: its metrics only (no events are kept)."""
    trace = simulate(replace(cfg, nodes=nodes), max_events=0)
    met = compute_metrics(trace)
    efficiency = 1.0 if met.scaling_efficiency is None else met.scaling_efficiency
    return ScalingPoint(nodes, met.latency_under_load_s, efficiency, met.cost_per_step_usd)  # the catalogue's


class ScalingRunner(_Worker):
    sig_point = Signal(int, int, object)  # generation, run index, ScalingPoint
    sig_finished = Signal(int)
    sig_failed = Signal(int, int, str)  # generation, run index, one-line reason

    def _work(self, gen: int, request: list) -> None:
        for index, cfg in request:
            for nodes in NODES:
                if not self.current(gen):
                    return
                try:
                    point = scaling_point(cfg, nodes)
                except SimError as exc:
                    self.sig_failed.emit(gen, index, str(exc))
                    break
                except Exception as exc:  # noqa: BLE001 - a worker thread must say why it stopped, not die silently
                    self.sig_failed.emit(gen, index, f"stopped: {type(exc).__name__}: {exc}")
                    break
                self.sig_point.emit(gen, index, point)
        if self.current(gen):
            self.sig_finished.emit(gen)


class ScalingView(QWidget):
    """Three plots against the number of instances, one curve per training run of the session."""

    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.runner = ScalingRunner(self)
        self.runner.sig_point.connect(self._point)
        self.runner.sig_failed.connect(self._failed)
        self.runner.sig_finished.connect(self._finished)
        self._gen = 0
        self.points: dict[int, list[ScalingPoint]] = {}
        self.notes: dict[int, str] = {}
        self.button = QPushButton("Simulate on 1 to 64 instances")
        self.button.clicked.connect(self.start)
        self.status = QLabel()
        self.status.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.button)
        top.addWidget(self.status, 1)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(palette().background)
        self.plots = {}
        for col, (key, title) in enumerate((("step", "step ms"), ("efficiency", "efficiency %"), ("cost", "$ / step"))):
            plot = self.graphics.addPlot(row=0, col=col)
            plot.setLogMode(x=True, y=key == "cost")  # the cost of a step grows with the cluster it runs on
            plot.setLabel("left", title)
            plot.setLabel("bottom", "instances")
            plot.getAxis("left").enableAutoSIPrefix(False)  # dollars as dollars, not "x0.001"
            plot.showGrid(x=True, y=True, alpha=0.3)
            plot.getAxis("bottom").setTicks([[(math.log10(n), str(n)) for n in NODES]])
            if col == 0:
                plot.addLegend(offset=(-4, -4))  # bottom right: step times rise to the top right
            self.plots[key] = plot
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.graphics, 1)
        session.sig_runs_changed.connect(self.reset)
        self.reset()

    def training_runs(self) -> list[tuple[int, RunConfig]]:
        out = []
        for i, run in enumerate(self.session.runs):
            cfg = training_config(run.trace.run)
            if cfg is not None:
                out.append((i, cfg))
        return out

    def reset(self, *_: object) -> None:
        self.runner.cancel()
        self.points, self.notes = {}, {}
        runs = self.training_runs()
        self.button.setEnabled(bool(runs))
        self.status.setText(f"{len(runs)} training run(s): simulate each on 1 to 64 instances of its instance type "
                            "(a few seconds a run)." if runs else
                            "Scaling needs a training run: simulate one with mode 'training' in the Run panel.")
        self._draw()

    def start(self) -> None:
        runs = self.training_runs()
        if not runs:
            return
        self.points, self.notes = {i: [] for i, _ in runs}, {}
        self.button.setEnabled(False)
        self.status.setText("Simulating...")
        self._gen = self.runner.start(runs)

    def _point(self, gen: int, index: int, point: ScalingPoint) -> None:
        if gen == self._gen:
            self.points.setdefault(index, []).append(point)
            self._draw()

    def _failed(self, gen: int, index: int, reason: str) -> None:
        if gen == self._gen:
            self.notes[index] = reason

    def _finished(self, gen: int) -> None:
        if gen != self._gen:
            return
        self.button.setEnabled(True)
        notes = "; ".join(f"{self.session.runs[i].title}: {text}" for i, text in self.notes.items())
        self.status.setText(notes or "Each instance runs the run's copies; efficiency is throughput per instance "
                                     "against one instance's.")

    def _draw(self) -> None:
        for plot in self.plots.values():
            plot.clear()
        for k, (index, points) in enumerate(sorted(self.points.items())):
            if not points or index >= len(self.session.runs):
                continue
            pen = pg.mkPen(CURVE_COLORS[k % len(CURVE_COLORS)], width=2)
            title = self.session.runs[index].title
            nodes = [p.nodes for p in points]
            self.plots["step"].plot(nodes, [p.step_s * 1e3 for p in points], pen=pen, symbol="o", symbolSize=5,
                                    symbolBrush=pen.color(), name=title)
            self.plots["efficiency"].plot(nodes, [100 * p.efficiency for p in points], pen=pen, symbol="o",
                                          symbolSize=5, symbolBrush=pen.color())
            priced = [(p.nodes, p.cost_per_step_usd) for p in points if p.cost_per_step_usd is not None]
            if priced:
                self.plots["cost"].plot(*zip(*priced, strict=True), pen=pen, symbol="o", symbolSize=5,
                                        symbolBrush=pen.color())
        self.plots["efficiency"].setYRange(0, 105, padding=0)
        costs = [p.cost_per_step_usd for points in self.points.values() for p in points if p.cost_per_step_usd]
        self.plots["cost"].getAxis("left").setTicks([log_ticks(min(costs), max(costs), "$")] if costs else None)

