"""The area selection, aggregated per run: what each chip did in the selected time window."""

from __future__ import annotations

from PySide6.QtWidgets import QTableWidgetItem, QWidget

from neuronviz.session import Session
from neuronviz.trace_view import window_stats
from neuronviz.widgets.comparison_table import ComparisonTable
from sim.catalogue import duration, number

# busy shares are the first NeuronCore's; FLOP/s and bytes the whole copy's (every core of it)
COLUMNS = ("run", "window µs", "Tensor %", "Vector %", "Scalar %", "GpSimd %", "DMA %", "TFLOP/s · copy",
           "read MB · copy", "write MB · copy", "ops taking the most time in the window (each op's events summed)")
HINT = "Drag across a timeline to select a time window (Shift+drag pans); Esc clears it."


class AreaStats(ComparisonTable):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(COLUMNS, HINT, parent)
        self.session = session
        session.sig_area_changed.connect(self.refresh)
        session.sig_runs_changed.connect(self.refresh)
        session.sig_time_mode_changed.connect(self.refresh)

    def refresh(self, *_: object) -> None:
        runs = self.session.runs if self.session.area is not None else []
        self.table.setRowCount(len(runs))
        if not runs:
            self.title.setText(HINT)
            return
        first = self.session.area_of(runs[0])
        mode = "of each run" if self.session.normalised else "on the shared time axis"
        self.title.setText(f"Window {duration(first[0])} to {duration(first[1])} {mode} "
                           f"({duration(first[1] - first[0])})")
        for r, run in enumerate(runs):
            t0, t1 = self.session.area_of(run)
            s = window_stats(run.view, t0, t1)
            dma = max(s.busy.get("dma_read", 0.0), s.busy.get("dma_write", 0.0))
            cells = [run.title, number((t1 - t0) / 1e3),
                     *(f"{100 * s.busy.get(k, 0.0):.0f}" for k in ("tensor", "vector", "scalar", "gpsimd")),
                     f"{100 * dma:.0f}", number(s.flops / max(t1 - t0, 1e-9) / 1e3),
                     number(s.read_bytes / 1e6), number(s.write_bytes / 1e6),
                     ", ".join(f"{op} {duration(ns)}" for op, ns in s.top_ops)]
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
