"""Details of the selected layer, compared across every open run (from each run's analysis: its
time, what bounds it, and how busy each engine was while it ran)."""

from __future__ import annotations

from PySide6.QtWidgets import QTableWidgetItem, QWidget

from neuronviz.session import Session
from neuronviz.widgets.comparison_table import ComparisonTable
from sim.catalogue import number, times

HINT = "Click a layer in any pane to compare it across runs."
COLUMNS = ("run", "time µs", "vs fastest", "bound by", "Tensor %", "Vector %", "Scalar %", "Memory %", "MFU %",
           "MBU %")
BOUND_LABELS = {"tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd", "memory": "memory",
                "collective": "collective", "latency": "latency (waits)"}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}"


class LayerDetails(ComparisonTable):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(COLUMNS, HINT, parent)
        self.session = session
        session.sig_selection_changed.connect(self.refresh)
        session.sig_runs_changed.connect(self.refresh)

    def refresh(self, *_: object) -> None:
        name = self.session.selected_layer
        rows = []
        for run in self.session.runs if name else []:
            layer = next((s for s in run.analysis.layers if s.name == name), None)
            if layer is not None:
                rows.append((run, layer))
        self.title.setText(f"Layer <b>{name}</b>" if rows else HINT)
        self.table.setRowCount(len(rows))
        fastest = min((s.time_ns for _, s in rows), default=1.0) or 1.0
        for r, (run, s) in enumerate(rows):
            cells = [run.title, number(s.time_ns / 1e3), times(s.time_ns / fastest),
                     BOUND_LABELS.get(s.bound, s.bound),
                     *(_percent(s.busy.get(k)) for k in ("tensor", "vector", "scalar", "memory")),
                     _percent(s.mfu), _percent(s.mbu)]
            for col, text in enumerate(cells):
                self.table.setItem(r, col, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
