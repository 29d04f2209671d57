"""Which instance to buy: a sweep's configurations as latency against cost per million, one colour
per generation, the Pareto frontier drawn; hover tells a point's configuration, a click simulates
it and opens it as a pane, and a brushed rectangle filters the table of rows below the plot.

Results come from a file of ``neuronviz sweep`` or from a small sweep of the comparison's model
over its instances and a range of batch sizes, simulated in the background."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPointF, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from neuronviz.axes import log_ticks
from neuronviz.runner import SimulationRunner, _Worker
from neuronviz.session import Session
from neuronviz.theme import GENERATION_COLORS, palette
from neuronviz.widgets import compact_rows
from sim.catalogue import number
from sim.errors import SimError
from sim.sweep import STATUS_OK, Point, execute, grid, pareto_front, read_results, write_results

SMALL_SWEEP_BATCHES = (1, 2, 4, 8, 16, 32)
X_COLUMN, Y_COLUMN = "latency_ms", "cost_per_million_inferences_usd"
# each figure as the panes, Summary and report write it (sim.catalogue.number)
TABLE_COLUMNS = (("instance", "instance", str), ("model", "model", str), ("mode", "mode", str),
                 ("batch", "batch", str), ("seq", "seq", str), ("cores_per_copy", "cores", str),
                 ("dtype", "dtype", str), ("latency_ms", "latency ms", number),
                 ("throughput_per_s", "throughput/s", number),
                 ("cost_per_million_inferences_usd", "$ / M", number), ("status", "status", str))
POINT_SIZE = 9


def point_of(row: dict) -> Point:
    """The sweep configuration a row was simulated from."""
    names = {f.name for f in fields(Point)}
    return Point(**{k: row[k] for k in names if k in row and row[k] is not None})


# what the cost column counts in each mode (sim.sweep.costs): an inference, a generation request, a sample
COSTED = {"inference": "inferences", "decode": "requests", "serve": "requests", "training": "samples"}


def cost_label(modes: set) -> str:
    """The cost axis's title: per million of what the column costs in the runs' mode, or of each
    mode's when the sweep mixes them."""
    counted = {COSTED.get(m, "runs") for m in modes}
    if len(counted) == 1:
        return f"$ per million {counted.pop()}"
    return "$ per million inferences, requests or samples (by mode)" if counted else "$ per million"


class SweepRunner(_Worker):
    """A small sweep in a worker thread, its rows reported as they come."""

    sig_rows = Signal(int, list)  # generation, rows
    sig_finished = Signal(int, str)  # generation, "" or why the sweep stopped early

    def _work(self, gen: int, points: list[Point]) -> None:
        try:
            for rows in execute(points, workers=1):
                if not self.current(gen):
                    return
                self.sig_rows.emit(gen, rows)
        except Exception as exc:  # noqa: BLE001 - a worker thread must say why it stopped, not die silently
            if self.current(gen):
                self.sig_finished.emit(gen, f"the sweep stopped: {type(exc).__name__}: {exc}")
            return
        if self.current(gen):
            self.sig_finished.emit(gen, "")


class RowsModel(QAbstractTableModel):
    """The rows inside the brush (all rows without one)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.rows: list[dict] = []

    def set_rows(self, rows: list[dict]) -> None:
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(TABLE_COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return TABLE_COLUMNS[section][1]
        return None

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        key, _, fmt = TABLE_COLUMNS[index.column()]
        value = self.rows[index.row()].get(key)
        if role == Qt.ItemDataRole.DisplayRole:
            return "-" if value is None else fmt(value)
        if role == Qt.ItemDataRole.ToolTipRole and key == "status":
            return self.rows[index.row()].get("reason") or None
        if role == Qt.ItemDataRole.TextAlignmentRole and isinstance(value, int | float):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def _finite_positive(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


class SweepView(QWidget):
    """The Sweep tab."""

    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.rows: list[dict] = []
        self.plotted: list[dict] = []  # the rows with a latency and a cost, in the scatter's order
        self.frontier: list[dict] = []
        self.source = ""
        self.sweeper = SweepRunner(self)
        self.sweeper.sig_rows.connect(self._rows_arrived)
        self.sweeper.sig_finished.connect(self._sweep_finished)
        self.simulator = SimulationRunner(self)
        self.simulator.sig_finished.connect(self._simulated)
        self.simulator.sig_failed.connect(self._simulation_failed)
        self._sweep_gen = self._sim_gen = self._sweep_total = 0

        self.open_button = QPushButton("Open results…")
        self.open_button.clicked.connect(self._browse)
        self.sweep_button = QPushButton("Sweep this comparison")
        self.sweep_button.setToolTip("The first run's model on each instance of the comparison, batch "
                                     + ", ".join(map(str, SMALL_SWEEP_BATCHES)))
        self.sweep_button.clicked.connect(self.sweep_comparison)
        self.save_button = QPushButton("Save results…")
        self.save_button.clicked.connect(self._save)
        self.brush_button = QPushButton("Brush")
        self.brush_button.setCheckable(True)
        self.brush_button.setToolTip("A rectangle on the plot: the table lists the configurations inside it")
        self.brush_button.toggled.connect(self.set_brush)
        self.status = QLabel()
        self.status.setWordWrap(True)
        top = QHBoxLayout()
        for w in (self.open_button, self.sweep_button, self.save_button, self.brush_button):
            top.addWidget(w)
        top.addWidget(self.status, 1)

        self.plot = pg.PlotWidget(background=palette().background)
        self.plot.setLogMode(x=True, y=True)
        self.plot.setLabel("bottom", "latency ms")
        self.plot.setLabel("left", cost_label(set()))
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).enableAutoSIPrefix(False)
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.legend = self.plot.addLegend(offset=(-4, 4))
        self.scatter = pg.ScatterPlotItem(size=POINT_SIZE, hoverable=True, hoverSize=POINT_SIZE + 4,
                                          tip=self._tip, pxMode=True)
        self.scatter.sigClicked.connect(self._clicked)
        self.front_curve = pg.PlotDataItem(pen=pg.mkPen(palette().foreground, width=1.5, style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.front_curve)
        self.plot.addItem(self.scatter)
        self.brush: pg.RectROI | None = None

        self.model = RowsModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSortingEnabled(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.verticalHeader().setVisible(False)
        compact_rows(self.table)
        self.table.doubleClicked.connect(lambda index: self.open_configuration(self.model.rows[index.row()]))
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        session.sig_runs_changed.connect(self._runs_changed)
        self._runs_changed()
        self._redraw()

    # --- sources of rows ----------------------------------------------------------------------

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Sweep results", "", "Sweep results (*.parquet *.csv)")
        if path:
            self.open_results(path)

    def open_results(self, path: str) -> bool:
        """Show the rows of a ``neuronviz sweep`` file; a bad file is a dialog and changes nothing."""
        try:
            rows = read_results(path).to_pylist()
        except SimError as exc:
            QMessageBox.warning(self, "Cannot open sweep results", str(exc))
            return False
        self.sweeper.cancel()
        self.rows, self.source = rows, Path(path).name
        self._redraw()
        return True

    def comparison_points(self) -> list[Point]:
        """The small sweep the comparison suggests: its first run's model, mode and length on every
        instance of its runs, over a range of batch sizes."""
        runs = self.session.runs
        if not runs:
            return []
        first = runs[0].trace.run
        w, config = first.workload, first.software.config
        instances = [i for i in dict.fromkeys(r.trace.run.deployment.instance for r in runs) if i]
        try:  # the model as simulated (a config.json's path), else as the trace names it
            return grid([config.model if config is not None else w.model], instances, SMALL_SWEEP_BATCHES, [w.seq],
                        modes=[w.mode], dtypes=[w.dtype or "bf16"], new_tokens=w.new_tokens or 128)
        except SimError:
            return []

    def sweep_comparison(self) -> None:
        self.start_sweep(self.comparison_points(), "this comparison")

    def start_sweep(self, points: list[Point], source: str) -> None:
        """Simulate ``points`` in the background; their rows replace the plotted ones as they come."""
        if not points:
            return
        self.rows, self.source, self._sweep_total = [], source, len(points)
        self.sweep_button.setEnabled(False)
        self._sweep_gen = self.sweeper.start(points)
        self._redraw()

    def _rows_arrived(self, gen: int, rows: list) -> None:
        if gen == self._sweep_gen:
            self.rows += rows
            self._redraw()

    def _sweep_finished(self, gen: int, problem: str) -> None:
        if gen == self._sweep_gen:
            self.sweep_button.setEnabled(bool(self.comparison_points()))
            self._redraw()
            if problem:
                self.status.setText(problem)

    def clear(self) -> None:
        """Forget the rows shown and stop a sweep still running (another comparison was opened);
        a new sweep may start at once, the stopped one's rows being dropped."""
        self.sweeper.cancel()
        self.rows, self.source, self._sweep_total = [], "", 0
        self.brush_button.setChecked(False)
        self.sweep_button.setEnabled(bool(self.comparison_points()))
        self._redraw()

    def _runs_changed(self, *_: object) -> None:
        self.sweep_button.setEnabled(not self.sweeper.busy and bool(self.comparison_points()))

    def _save(self) -> None:
        if not self.rows:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Save sweep results", "sweep.parquet",
                                              "Parquet (*.parquet);;CSV (*.csv)")
        if path:
            try:
                write_results(path, self.rows)
            except SimError as exc:
                QMessageBox.warning(self, "Cannot save sweep results", str(exc))

    # --- drawing ------------------------------------------------------------------------------

    def _redraw(self) -> None:
        ok = [r for r in self.rows if r.get("status") == STATUS_OK]
        self.plotted = [r for r in ok if _finite_positive(r.get(X_COLUMN)) and _finite_positive(r.get(Y_COLUMN))]
        spots = [{"pos": (math.log10(r[X_COLUMN]), math.log10(r[Y_COLUMN])), "data": i,
                  "brush": pg.mkBrush(GENERATION_COLORS.get(r.get("chip"), "#999999")),
                  "pen": pg.mkPen(palette().background, width=0.5)} for i, r in enumerate(self.plotted)]
        self.scatter.setData(spots)
        front = pareto_front([r[X_COLUMN] for r in self.plotted], [r[Y_COLUMN] for r in self.plotted])
        self.frontier = [self.plotted[i] for i in front]
        self.front_curve.setData([r[X_COLUMN] for r in self.frontier], [r[Y_COLUMN] for r in self.frontier])
        self.legend.clear()
        for chip in dict.fromkeys(r.get("chip") for r in self.plotted):
            self.legend.addItem(pg.ScatterPlotItem(size=POINT_SIZE, brush=pg.mkBrush(GENERATION_COLORS.get(chip,
                                                                                                           "#999999"))),
                                chip)
        if self.plotted:
            self.legend.addItem(self.front_curve, "frontier")
        for axis, column, prefix in (("bottom", X_COLUMN, ""), ("left", Y_COLUMN, "$")):
            values = [r[column] for r in self.plotted]
            self.plot.getAxis(axis).setTicks([log_ticks(min(values), max(values), prefix)] if values else None)
        self.plot.setLabel("left", cost_label({r.get("mode") for r in self.plotted}))
        failed = len(self.rows) - len(ok)
        unpriced = sorted({r["instance"] for r in ok if r.get(Y_COLUMN) is None})
        parts = [f"{self.source}: {len(self.rows)} configurations" if self.source else
                 "Open a file of `neuronviz sweep`, or sweep this comparison's model over its instances."]
        if self.sweeper.busy and len(self.rows) < self._sweep_total:
            parts[0] += f" of {self._sweep_total} (simulating…)"
        if failed:
            parts.append(f"{failed} could not run")
        if unpriced:
            parts.append(f"no price: {', '.join(unpriced)}")
        if self.plotted:
            parts.append("click a point to open it as a pane")
        self.status.setText("; ".join(parts))
        self.save_button.setEnabled(bool(self.rows))
        self._filter()

    def _tip(self, x: float, y: float, data: int) -> str:
        r = self.plotted[data]
        lines = [f"{r.get('instance')} · {r.get('model')} · {r.get('mode')}",
                 f"batch {r.get('batch')} · seq {r.get('seq')} · {r.get('dtype')} · {r.get('cores_per_copy')} "
                 f"core{'' if r.get('cores_per_copy') == 1 else 's'}",
                 f"latency {number(r[X_COLUMN])} ms · {number(r.get('throughput_per_s', 0))} /s",
                 f"${number(r[Y_COLUMN])} per million"]
        return "\n".join(lines)

    # --- brush and table ----------------------------------------------------------------------

    def set_brush(self, on: bool) -> None:
        if self.brush is not None:
            self.plot.removeItem(self.brush)
            self.brush = None
        if on:
            # it starts around the frontier (the configurations worth a look), or mid-view
            if self.frontier:
                xs = [math.log10(r[X_COLUMN]) for r in self.frontier]
                ys = [math.log10(r[Y_COLUMN]) for r in self.frontier]
                (x0, x1), (y0, y1) = (min(xs) - 0.05, max(xs) + 0.05), (min(ys) - 0.05, max(ys) + 0.05)
            else:
                (x0, x1), (y0, y1) = self.plot.viewRange()
                x0, x1, y0, y1 = x0 + (x1 - x0) / 4, x1 - (x1 - x0) / 4, y0 + (y1 - y0) / 4, y1 - (y1 - y0) / 4
            self.brush = pg.RectROI((x0, y0), (x1 - x0, y1 - y0), pen=pg.mkPen(palette().foreground, width=1))
            self.brush.sigRegionChanged.connect(self._filter)
            self.plot.addItem(self.brush)
        self._filter()

    def brushed(self) -> tuple[float, float, float, float] | None:
        """The brush as (latency low, latency high, cost low, cost high), or None."""
        if self.brush is None:
            return None
        (x, y), (w, h) = self.brush.pos(), self.brush.size()
        return 10 ** x, 10 ** (x + w), 10 ** y, 10 ** (y + h)

    def _filter(self, *_: object) -> None:
        box = self.brushed()
        if box is None:
            rows = self.rows
        else:
            x0, x1, y0, y1 = box
            rows = [r for r in self.plotted if x0 <= r[X_COLUMN] <= x1 and y0 <= r[Y_COLUMN] <= y1]
        self.model.set_rows(rows)

    # --- opening a configuration ----------------------------------------------------------------

    def scene_pos_of(self, row: dict) -> QPointF:
        """Where a plotted row's point is, in the plot widget's viewport coordinates."""
        scene = self.plot.plotItem.vb.mapViewToScene(QPointF(math.log10(row[X_COLUMN]), math.log10(row[Y_COLUMN])))
        return self.plot.mapFromScene(scene)

    def _clicked(self, _item, points, _event=None) -> None:
        if len(points):
            self.open_configuration(self.plotted[points[0].data()])

    def open_configuration(self, row: dict) -> None:
        """Simulate the configuration of ``row`` and add it to the comparison as a pane."""
        if row.get("status") != STATUS_OK:
            return
        self.status.setText(f"Simulating {row['instance']} batch {row['batch']}…")
        self._sim_gen = self.simulator.start([point_of(row).config()])

    def _simulated(self, gen: int, runs: list) -> None:
        if gen == self._sim_gen:
            self.session.add_runs(runs)
            self.status.setText(f"Opened {runs[0].title} as a pane.")

    def _simulation_failed(self, gen: int, message: str) -> None:
        if gen == self._sim_gen:
            QMessageBox.warning(self, "Simulation failed", message)

    def shutdown(self) -> None:
        self.sweeper.cancel()
        self.simulator.cancel()

