"""Summary table comparing the runs: sortable, copyable (Ctrl+C copies tab-separated rows)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTableWidgetItem, QWidget

from neuronviz.session import Session
from neuronviz.widgets import compact_rows

COLUMNS = ("run", "instance", "latency ms", "loaded ms", "throughput /s", "speed-up", "MFU %", "Tensor %",
           "Vector %", "Scalar %", "GpSimd %", "HBM read MB", "HBM write MB", "$ per million")
COLUMN_TIPS = {  # what each number is, on hovering its column's title
    "latency ms": "One request with its model copy alone on the chip, as published latencies are measured; for "
                  "decode runs the time per generated token (the time to first token is in the pane's header); "
                  "for serving runs the median time per output token of its requests.",
    "loaded ms": "The same with every copy the instance runs busy at once (they share the chip's memory "
                 "bandwidth): what the throughput is measured with.",
    "MFU %": "Model FLOPs utilization: the model's FLOPs over the TensorE peak of the copy's cores during its "
             "latency.",
    "throughput /s": "Inferences per second of every copy running on the instance "
                     "(samples for training runs, tokens for decode and serving runs).",
    "speed-up": "The baseline run's latency over this run's (whole runs, decode included).",
    **{f"{engine} %": "Busy share of the run's time, the first NeuronCore's engine."
       for engine in ("Tensor", "Vector", "Scalar", "GpSimd")},
    "HBM read MB": "Bytes one model copy reads from device memory (HBM, or DDR on Inferentia1) in the run.",
    "HBM write MB": "Bytes one model copy writes to device memory (HBM, or DDR on Inferentia1) in the run.",
    "$ per million": "Instance price per hour over the inferences (tokens for decode) it serves in an hour, "
                     "per million.",
}


def summary_rows(session: Session) -> list[list[object]]:
    """One row per run, in the order of :data:`COLUMNS` (numbers stay numbers)."""
    rows = []
    base = session.runs[session.baseline].metrics.latency_s if session.runs else 0.0
    for run in session.runs:
        met, m = run.metrics, run.trace.meta
        u = met.engine_utilization
        decode = m.get("mode") in ("decode", "serve") and met.per_token_s is not None
        latency = met.per_token_s if decode else met.latency_s
        loaded = met.per_token_under_load_s if decode else met.latency_under_load_s
        # a trace of another tool says how long it ran, not how many inferences it served
        imported = m.get("mode") == "imported"
        throughput = None if imported else round(met.throughput_per_s, 2)
        rows.append([
            run.title, m.get("instance", ""), round(latency * 1e3, 4),
            None if imported or loaded is None else round(loaded * 1e3, 4), throughput,
            round(base / met.latency_s, 3) if met.latency_s else 0.0,
            None if met.mfu is None else round(100 * met.mfu, 1),
            *(round(100 * u.get(k, 0.0), 1) for k in ("tensor", "vector", "scalar", "gpsimd")),
            round(met.hbm_read_bytes / 1e6, 2), round(met.hbm_write_bytes / 1e6, 2),
            None if met.cost_per_million_usd is None else round(met.cost_per_million_usd, 4),
        ])
    return rows


CONFIG_COLUMNS = ("chip", "model", "mode", "batch", "seq", "dtype", "cores per copy", "copies")


def summary_csv_rows(session: Session) -> tuple[list[str], list[list[object]]]:
    """The summary table with each run's configuration first: the rows of the CSV export."""
    header = [*CONFIG_COLUMNS, *COLUMNS]
    rows = []
    for run, row in zip(session.runs, summary_rows(session), strict=True):
        m = run.trace.meta
        config = [m.get("chip", ""), m.get("model", ""), m.get("mode", ""), m.get("batch", ""), m.get("seq", ""),
                  m.get("dtype", ""), m.get("cores_per_copy", ""), m.get("copies", "")]
        rows.append([*config, *row])
    return header, rows


class _NumberItem(QTableWidgetItem):
    def __init__(self, value: object) -> None:
        super().__init__("n/a" if value is None else (f"{value:,}" if isinstance(value, (int, float)) else str(value)))
        self.value = value
        if isinstance(value, (int, float)):
            self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.value, getattr(other, "value", None)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return bool(a < b)  # a NumPy number's comparison is no bool to Qt
        return str(a) < str(b)


class SummaryTable(QTableWidget):
    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.session = session
        self.setHorizontalHeaderLabels(COLUMNS)
        for c, name in enumerate(COLUMNS):
            if name in COLUMN_TIPS:  # as rich text, which Qt wraps instead of one line across the screen
                self.horizontalHeaderItem(c).setToolTip(f"<p>{COLUMN_TIPS[name]}</p>")
        # the sort arrow takes room in the title: make it again when the sorted column changes
        self.horizontalHeader().sortIndicatorChanged.connect(lambda *_: self.resizeColumnsToContents())
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        compact_rows(self)
        QShortcut(QKeySequence.StandardKey.Copy, self, self.copy_selection)
        session.sig_runs_changed.connect(self.refresh)
        session.sig_baseline_changed.connect(self.refresh)
        self.refresh()

    def refresh(self, *_: object) -> None:
        self.setSortingEnabled(False)
        rows = summary_rows(self.session)
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                self.setItem(r, c, _NumberItem(value))
        self.resizeColumnsToContents()
        self.setSortingEnabled(True)

    def table_text(self, selected_only: bool = True) -> str:
        """The table (or its selected rows) as tab-separated text with a header line."""
        rows = sorted({i.row() for i in self.selectedIndexes()}) if selected_only else []
        rows = rows or list(range(self.rowCount()))
        lines = ["\t".join(COLUMNS)]
        for r in rows:
            lines.append("\t".join(self.item(r, c).text() for c in range(self.columnCount())))
        return "\n".join(lines)

    def copy_selection(self) -> None:
        QGuiApplication.clipboard().setText(self.table_text())
