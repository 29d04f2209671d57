"""Region comparison: up to three regions (the selected time window, the selected layer, all
layers of a kind, the collectives, the whole run), each compared across every run with the same
metrics, side by side, as Neuron Explorer's region highlighter compares up to three."""

from __future__ import annotations

import math

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

from neuronviz.session import Run, Session
from neuronviz.widgets import compact_rows
from neuronviz.widgets.lazy import LazyView
from sim.analysis import Stats, region_of_collectives, region_of_layers, region_of_run, region_of_windows
from sim.catalogue import number
from sim.compare import block_of

MAX_REGIONS = 3
NONE, WINDOW, LAYER, COLLECTIVES, WHOLE = "—", "Selected window", "Selected layer", "Collectives", "Whole run"
KIND_PREFIX = "All layers: "
METRICS = (  # each written as every view writes a figure (sim.catalogue.number)
    ("time µs", lambda s, total: number(s.time_ns / 1e3)),
    ("share of run %", lambda s, total: number(100 * s.time_ns / total, "percent") if total else "-"),
    ("GFLOP", lambda s, total: number(s.flops / 1e9)),
    ("MB moved", lambda s, total: number(s.bytes / 1e6)),
    ("FLOP/B", lambda s, total: "∞" if math.isinf(s.arithmetic_intensity) else number(s.arithmetic_intensity)),
    ("TFLOP/s", lambda s, total: number(s.achieved_flops_per_s / 1e12)),
    ("MFU %", lambda s, total: "-" if s.mfu is None else number(100 * s.mfu, "percent")),
    ("MBU %", lambda s, total: "-" if s.mbu is None else number(100 * s.mbu, "percent")),
    ("bound", lambda s, total: s.bound),
    *((f"{k.capitalize()} busy %", (lambda key: lambda s, total: "-" if key not in s.busy
                                    else number(100 * s.busy[key], "percent"))(k))
      for k in ("tensor", "vector", "scalar", "gpsimd", "memory", "collective", "host")),
)


def region(run: Run, choice: str, session: Session) -> Stats | None:
    """What ``choice`` covers in ``run`` (None when it covers nothing there)."""
    trace, analysis = run.trace, run.analysis
    if choice == WINDOW:
        area = session.area_of(run)
        return None if area is None else region_of_windows(trace, WINDOW, *area)
    if choice == LAYER:  # the layer, or in a run without it (a profile beside a simulation), its model block
        name = session.selected_layer
        if not name:
            return None
        if any(s.name == name for s in analysis.layers):
            return region_of_layers(trace, analysis, name, lambda s: s.name == name)
        block = block_of(name)
        return region_of_layers(trace, analysis, block, lambda s: block_of(s.name) == block)
    if choice == COLLECTIVES:
        return region_of_collectives(trace)
    if choice == WHOLE:  # the catalogue's figures of the run, as the Summary and the header give them
        return region_of_run(trace, WHOLE)
    if choice.startswith(KIND_PREFIX):
        kind = choice.removeprefix(KIND_PREFIX)
        return region_of_layers(trace, analysis, choice, lambda s: s.kind == kind)
    return None


class RegionsView(LazyView):
    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.choices = [QComboBox() for _ in range(MAX_REGIONS)]
        top = QHBoxLayout()
        for i, box in enumerate(self.choices):
            top.addWidget(QLabel(f"Region {i + 1}"))
            top.addWidget(box)
            box.currentTextChanged.connect(self.refresh)
        top.addStretch(1)
        self.table = QTableWidget()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        compact_rows(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        session.sig_runs_changed.connect(self._runs_changed)
        session.sig_area_changed.connect(self.refresh)
        session.sig_selection_changed.connect(self.refresh)

    def first_shown(self) -> None:
        self._runs_changed()

    def _runs_changed(self, *_: object) -> None:
        if not self.shown:
            return
        kinds = list(dict.fromkeys(k for r in self.session.runs for k in r.trace.layer_kinds))
        options = [NONE, WINDOW, LAYER, *(KIND_PREFIX + k for k in kinds), COLLECTIVES, WHOLE]
        defaults = [KIND_PREFIX + k for k in ("attention", "mlp") if k in kinds] + [WHOLE]
        for i, box in enumerate(self.choices):
            box.blockSignals(True)
            current = box.currentText()
            box.clear()
            box.addItems(options)
            box.setCurrentText(current if current in options else (defaults[i] if i < len(defaults) else NONE))
            box.blockSignals(False)
        self.refresh()

    def set_regions(self, *choices: str) -> None:
        for box, choice in zip(self.choices, choices, strict=False):
            box.setCurrentText(choice)

    def refresh(self, *_: object) -> None:
        if not self.shown:
            return
        runs = self.session.runs
        columns = []
        for box in self.choices:
            choice = box.currentText()
            if choice in ("", NONE):
                continue
            for run in runs:
                title = f"{choice} · {run.title}"
                columns.append((title, region(run, choice, self.session), run.metrics.span_s * 1e9))
        self.table.clear()
        self.table.setColumnCount(len(columns))
        self.table.setRowCount(len(METRICS))
        self.table.setHorizontalHeaderLabels([c[0] for c in columns])
        self.table.setVerticalHeaderLabels([m[0] for m in METRICS])
        for col, (_, stats, total) in enumerate(columns):
            for row, (_, fmt) in enumerate(METRICS):
                self.table.setItem(row, col, QTableWidgetItem("-" if stats is None else fmt(stats, total)))
        self.table.resizeColumnsToContents()
