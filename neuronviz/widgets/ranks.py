"""Several ranks as one view: a row per rank (its engines' busy share, its waits, its collectives,
how often the others waited for it), then every collective matched across ranks with each rank's
arrival and the straggler marked. A collective's row shows it in every pane. The view Neuron
Explorer's FAQ says it lacks for multi-rank device profiles (sim.ranks)."""

from __future__ import annotations

import math

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QLabel, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout

from neuronviz.session import Session
from neuronviz.widgets import compact_rows
from neuronviz.widgets.lazy import LazyView
from neuronviz.widgets.operators import SLOWER
from sim.catalogue import number
from sim.ranks import ENGINES, collectives, rank_summaries

HINT = ("Open the device profiles of several ranks together (File > Open profile directory, or several at once with "
        "File > Open, or neuronviz DIR DIR...): their collectives are matched here, rank by rank, on one clock.")
RANK_COLUMNS = ("rank", *(f"{e.capitalize() if e != 'gpsimd' else 'GpSimd'} busy %" for e in ENGINES), "waits µs",
                "collectives µs", "waited for others µs", "last to arrive")
STRAGGLER_ALPHA = 0.45


def _item(text: str, tip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if tip:
        item.setToolTip(tip)
    return item


def _us(ns: float) -> str:
    return "-" if not math.isfinite(ns) else number(ns / 1e3)


class RanksView(LazyView):
    sig_show_span = Signal(int, float, float)  # run index, start ns, end ns: zoom the panes there

    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.title = QLabel(HINT)
        self.title.setWordWrap(True)
        self.overview = QTableWidget(0, len(RANK_COLUMNS))
        self.overview.setHorizontalHeaderLabels(list(RANK_COLUMNS))
        self.collectives = QTableWidget(0, 0)
        self.collectives.cellClicked.connect(self._collective_clicked)
        for table in (self.overview, self.collectives):
            table.verticalHeader().setVisible(False)
            compact_rows(table)
        split = QSplitter(Qt.Orientation.Horizontal)  # side by side: the tab is as short as the others
        split.addWidget(self.overview)
        split.addWidget(self.collectives)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addWidget(split, 1)
        self.matched = []
        session.sig_runs_changed.connect(self.refresh)

    def first_shown(self) -> None:
        self.refresh()

    def refresh(self, *_: object) -> None:
        if not self.shown:
            return
        runs = self.session.runs
        traces = [r.trace for r in runs]
        self.matched = collectives(traces) if len(traces) > 1 else []
        if not self.matched:
            self.title.setText(HINT)
            self.overview.setRowCount(0)
            self.collectives.setRowCount(0)
            return
        spread = max(c.spread_ns for c in self.matched)
        self.title.setText(f"{len(runs)} ranks, {len(self.matched):,} collectives matched in order; the widest "
                           f"spread between first and last arrival {_us(spread)} µs. The straggler of each "
                           "collective (the rank the others waited for) is marked; click one to show it.")
        summaries = rank_summaries(traces, self.matched)
        self.overview.setRowCount(len(runs))
        for r, (run, s) in enumerate(zip(runs, summaries, strict=True)):
            cells = [run.title, *("-" if e not in s.busy else number(100 * s.busy[e], "percent") for e in ENGINES),
                     _us(s.wait_ns), _us(s.collective_ns), _us(s.waited_for_others_ns), f"{s.last_arrivals:,}"]
            for c, text in enumerate(cells):
                self.overview.setItem(r, c, _item(text))
        self.overview.resizeColumnsToContents()
        headers = ["#", "collective", "spread µs",
                   *(f"{i + 1}: {r.short_title} arrives µs" for i, r in enumerate(runs))]
        self.collectives.setColumnCount(len(headers))
        self.collectives.setHorizontalHeaderLabels(headers)
        self.collectives.setRowCount(len(self.matched))
        first_col = 3
        for k, c in enumerate(self.matched):
            first = min(s for s in c.starts if math.isfinite(s))
            self.collectives.setItem(k, 0, _item(f"{c.index + 1}"))
            self.collectives.setItem(k, 1, _item(c.name))
            self.collectives.setItem(k, 2, _item(_us(c.spread_ns)))
            for r, start in enumerate(c.starts):
                tip = (f"arrived {_us(start - first)} µs after the first; waited {_us(c.waits_ns[r])} µs for the "
                       f"straggler" if math.isfinite(start) else "this rank ran fewer collectives")
                item = _item(_us(start - first), tip)
                if r == c.straggler:
                    color = QColor(SLOWER)
                    color.setAlphaF(STRAGGLER_ALPHA)
                    item.setBackground(QBrush(color))
                    item.setToolTip(f"the straggler: arrived last, {_us(c.spread_ns)} µs after the first")
                self.collectives.setItem(k, first_col + r, item)
        self.collectives.resizeColumnsToContents()

    def _collective_clicked(self, row: int, _column: int) -> None:
        if 0 <= row < len(self.matched):
            c = self.matched[row]
            starts = [s for s in c.starts if math.isfinite(s)]
            ends = [e for e in c.ends if math.isfinite(e)]
            self.sig_show_span.emit(c.straggler, min(starts), max(ends))
