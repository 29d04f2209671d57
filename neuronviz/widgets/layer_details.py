"""Details of the selected layer, compared across every open run."""

from __future__ import annotations

from PySide6.QtWidgets import QTableWidgetItem, QWidget

from neuronviz.session import Session
from neuronviz.theme import ENGINE_LABELS
from neuronviz.trace_view import compare_layer
from neuronviz.widgets.comparison_table import ComparisonTable

HINT = "Click a layer in any pane to compare it across runs."
COLUMNS = ("run", "time µs", "vs fastest", "bound by", "Tensor %", "Vector %", "Scalar %", "DMA read %")


class LayerDetails(ComparisonTable):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(COLUMNS, HINT, parent)
        self.session = session
        session.sig_selection_changed.connect(self.refresh)
        session.sig_runs_changed.connect(self.refresh)

    def refresh(self, *_: object) -> None:
        name = self.session.selected_layer
        rows = [(run, compare_layer(run.view, name)) for run in self.session.runs] if name else []
        rows = [(run, c) for run, c in rows if c is not None]
        self.title.setText(f"Layer <b>{name}</b>" if rows else HINT)
        self.table.setRowCount(len(rows))
        fastest = min((c.duration_ns for _, c in rows), default=1.0) or 1.0
        for r, (run, c) in enumerate(rows):
            cells = [run.title, f"{c.duration_ns / 1e3:,.2f}", f"{c.duration_ns / fastest:.2f}×",
                     ENGINE_LABELS.get(c.bound, c.bound),
                     *(f"{100 * c.busy.get(k, 0.0):.0f}" for k in ("tensor", "vector", "scalar", "dma_read"))]
            for col, text in enumerate(cells):
                self.table.setItem(r, col, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
