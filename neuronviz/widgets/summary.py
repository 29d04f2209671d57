"""Summary table comparing the runs: sortable, copyable (Ctrl+C copies tab-separated rows)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTableWidgetItem, QWidget

from neuronviz.session import Session
from neuronviz.widgets import compact_rows
from sim import catalogue
from sim.metrics import ENGINES
from sim.validated import headline_errors, headline_text

# the catalogue's figures the table compares, in this order; a column shows when a run's mode has it
SUMMARY_KEYS = ("latency_ms", "latency_under_load_ms", "time_to_first_token_ms", "per_token_ms",
                "per_token_under_load_ms", "throughput_per_s", "mfu_percent",
                *(f"{e}_active_percent" for e in ENGINES), "hbm_read_bytes", "hbm_write_bytes", "cost_per_million_usd",
                "cost_per_step_usd")
SPEED_UP = "speed-up"
VALIDATED = "validated"  # how far the run's headline figures can be trusted (sim.validated)
ITEMS_COLUMN = "counts"  # what a run's throughput and cost per million count
SPEED_UP_TIP = ("The baseline run's latency over this run's (whole requests: a decode's generation, a serving "
                "run's p50).")
ITEMS_TIP = "What the throughput and the cost per million count: inferences, tokens (decode, serve) or samples."
VALIDATED_TIP = ("The median absolute error of each headline figure's class (chip generation, software, dense or "
                 "mixture-of-experts model, metric) against the published measurements the simulator is validated on "
                 "(docs/accuracy.md), with the class's rows; \"not validated\" where none is published.")
SCOPE_TIP = "Of: {scope}."


def summary_columns(session: Session) -> list[str]:
    """The table's columns: the run, its instance, the catalogue's figures any of its runs has
    (:data:`SUMMARY_KEYS`, by key), what the throughput counts and the speed-up."""
    keys = [k for k in SUMMARY_KEYS if any(catalogue.applies(catalogue.BY_KEY[k], r.trace) for r in session.runs)]
    at = keys.index("throughput_per_s") + 1 if "throughput_per_s" in keys else len(keys)
    validated = [VALIDATED] if any(headline_errors(r.trace) for r in session.runs) else []  # of simulated runs
    return ["run", "instance", *keys[:at], ITEMS_COLUMN, SPEED_UP, *keys[at:], *validated]


def summary_rows(session: Session, columns: list[str]) -> list[list[object]]:
    """One row per run, a value per column (catalogue figures as :func:`sim.catalogue.measure`
    gives them: numbers stay numbers, None where a figure does not apply)."""
    rows = []
    base = session.runs[session.baseline].metrics.latency_s if session.runs else 0.0
    for run in session.runs:
        values, d = run.measures, run.trace.run.deployment
        cells = {"run": run.title, "instance": d.instance,
                 ITEMS_COLUMN: catalogue.ITEMS.get(run.trace.run.workload.mode, ""),
                 SPEED_UP: base / run.metrics.latency_s if run.metrics.latency_s else None,
                 VALIDATED: headline_text(run.trace)}
        rows.append([cells[c] if c in cells else values.get(c) for c in columns])
    return rows


CONFIG_COLUMNS = ("chip", "model", "mode", "batch", "seq", "dtype", "cores per copy", "copies")


def summary_csv_rows(session: Session) -> tuple[list[str], list[list[object]]]:
    """The summary table with each run's configuration first: the rows of the CSV export, every
    figure at full precision under its catalogue name."""
    columns = summary_columns(session)
    header = [*CONFIG_COLUMNS, *columns]
    rows = []
    for run, row in zip(session.runs, summary_rows(session, columns), strict=True):
        w, d = run.trace.run.workload, run.trace.run.deployment
        config = [d.chip, w.model, w.mode, w.batch, w.seq, w.dtype, d.cores_per_copy, d.copies]
        rows.append([*config, *row])
    return header, rows


class _NumberItem(QTableWidgetItem):
    """A cell holding its value (sorted by it) and showing it as every view writes it."""

    def __init__(self, value: object, key: str | None = None) -> None:
        if value is None:
            text = "n/a"
        elif key in catalogue.BY_KEY:
            text = catalogue.text(key, value)
        elif isinstance(value, float):
            text = catalogue.number(value)
        else:
            text = str(value)
        super().__init__(text)
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
        super().__init__(0, 0, parent)
        self.session = session
        self.columns: list[str] = []
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
        self.columns = summary_columns(self.session)
        self.setColumnCount(len(self.columns))
        self.setHorizontalHeaderLabels([self.title(c) for c in self.columns])
        for c, name in enumerate(self.columns):  # as rich text, which Qt wraps instead of one line across the screen
            self.horizontalHeaderItem(c).setToolTip(f"<p>{_tip(name)}</p>")
        rows = summary_rows(self.session, self.columns)
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                self.setItem(r, c, _NumberItem(value, self.columns[c]))
        self.resizeColumnsToContents()
        self.setSortingEnabled(True)

    @staticmethod
    def title(column: str) -> str:
        return catalogue.title(column) if column in catalogue.BY_KEY else column

    def column(self, key: str) -> int:
        """The index of the column of ``key`` (a catalogue key or a title such as "run")."""
        return self.columns.index(key)

    def table_text(self, selected_only: bool = True) -> str:
        """The table (or its selected rows) as tab-separated text with a header line."""
        rows = sorted({i.row() for i in self.selectedIndexes()}) if selected_only else []
        rows = rows or list(range(self.rowCount()))
        lines = ["\t".join(self.title(c) for c in self.columns)]
        for r in rows:
            lines.append("\t".join(self.item(r, c).text() for c in range(self.columnCount())))
        return "\n".join(lines)

    def copy_selection(self) -> None:
        QGuiApplication.clipboard().setText(self.table_text())


def _tip(column: str) -> str:
    """What a column holds, on hovering its title: the catalogue's definition and scope."""
    if column in catalogue.BY_KEY:
        metric = catalogue.BY_KEY[column]
        return f"{metric.definition} {SCOPE_TIP.format(scope=catalogue.SCOPE_LABELS[metric.scope])}"
    return {SPEED_UP: SPEED_UP_TIP, ITEMS_COLUMN: ITEMS_TIP, VALIDATED: VALIDATED_TIP}.get(column, column)
