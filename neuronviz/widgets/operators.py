"""The operator table of one run, by layer and expandable to ops (or by model block and expandable
to layers, how a device profile meets a simulation): time, share, FLOPs, bytes,
intensity, what bounds it, MFU, MBU and spills, and for every other run its time and the delta
against this one (coloured, saturating at 2x). Sortable, filterable, copyable (Ctrl+C); a row
selects its layer in every pane. Below it, the run's insights: a click selects the layers they
name and zooms the panes to them."""

from __future__ import annotations

import math

from PySide6.QtCore import QObject, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QGuiApplication, QKeySequence, QShortcut, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from neuronviz.session import Session
from neuronviz.widgets.lazy import LazyView
from sim.analysis import Stats, insights
from sim.catalogue import number, times
from sim.compare import block_stats

LAYERS, BLOCKS = "layers", "model blocks"
GROUPINGS = (LAYERS, BLOCKS)
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
LAYER_ROLE = Qt.ItemDataRole.UserRole + 2
BASE_COLUMNS = ("layer / op", "time µs", "share %", "GFLOP", "MB", "FLOP/B", "bound", "MFU %", "MBU %", "spill MB")
DELTA_SATURATION = 2.0  # a delta colour is full at twice (or half) the time
FASTER, SLOWER = QColor("#009E73"), QColor("#D55E00")
SEVERITY_COLORS = {"high": "#D55E00", "medium": "#E69F00", "low": "#56B4E9"}


def _disjoint(analyses: list) -> bool:
    """Whether some two runs share no layer name (a device profile and a simulation)."""
    names = [{s.name for s in a.layers} for a in analyses]
    return any(a and b and not a & b for k, a in enumerate(names) for b in names[k + 1:])


def _cell(text: str, sort: float | str | None = None, align_right: bool = True) -> QStandardItem:
    item = QStandardItem(text)
    item.setEditable(False)
    item.setData(sort if sort is not None else text, SORT_ROLE)
    if align_right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


def _pct(value: float | None) -> tuple[str, float]:
    return ("-", -1.0) if value is None else (f"{100 * value:.0f}", 100 * value)


def delta_color(ratio: float) -> QColor:
    """Green when the other run takes less time, red when more; full colour at 2x either way."""
    if ratio <= 0 or not math.isfinite(ratio):
        return QColor(0, 0, 0, 0)
    strength = min(1.0, abs(math.log(ratio)) / math.log(DELTA_SATURATION))
    color = QColor(FASTER if ratio < 1 else SLOWER)
    color.setAlphaF(0.15 + 0.6 * strength)
    return color


class OperatorsView(LazyView):
    sig_show_span = Signal(int, float, float)  # run index, start ns, end ns: zoom the panes there

    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.run_box = QComboBox()
        self.run_box.currentIndexChanged.connect(self.refresh)
        # rows by the run's layers, or by model block: how a device profile's framework layers and
        # a simulation's meet (sim.compare.block_of)
        self.group_box = QComboBox()
        self.group_box.addItems(GROUPINGS)
        self.group_box.setToolTip("Layers: each layer of the run, its ops below it. Model blocks: each block of the "
                                  "model (layer 3, embedding, head) with its layers below it, compared with the same "
                                  "block of every other run: how a measured profile's framework layers and a "
                                  "simulation's are compared.")
        self.group_box.currentIndexChanged.connect(self.refresh)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter layers and ops")
        self.filter.setClearButtonEnabled(True)
        self.model = QStandardItemModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setRecursiveFilteringEnabled(True)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setFilterKeyColumn(0)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.tree = QTreeView()
        self.tree.setModel(self.proxy)
        self.tree.setSortingEnabled(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tree.setUniformRowHeights(True)
        self.tree.selectionModel().currentRowChanged.connect(self._row_selected)
        QShortcut(QKeySequence.StandardKey.Copy, self.tree, self.copy_selection)
        self.insight_list = QListWidget()
        self.insight_list.setWordWrap(True)
        self.insight_list.itemClicked.connect(self._insight_clicked)
        top = QHBoxLayout()
        top.addWidget(QLabel("Run"))
        top.addWidget(self.run_box)
        top.addWidget(QLabel("Rows"))
        top.addWidget(self.group_box)
        top.addWidget(self.filter, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.tree)
        insights_box = QWidget()
        box = QVBoxLayout(insights_box)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(QLabel("Insights (click to show)"))
        box.addWidget(self.insight_list, 1)
        split.addWidget(insights_box)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        self.found = []
        session.sig_runs_changed.connect(self._runs_changed)
        session.sig_baseline_changed.connect(lambda index: self.run_box.setCurrentIndex(index))
        session.sig_selection_changed.connect(self._select_layer_row)

    def first_shown(self) -> None:
        self._runs_changed()

    def _runs_changed(self, *_: object) -> None:
        if not self.shown:
            return
        self.run_box.blockSignals(True)
        self.run_box.clear()
        self.run_box.addItems([f"{i + 1}: {r.title}" for i, r in enumerate(self.session.runs)])
        self.run_box.setCurrentIndex(min(self.session.baseline, len(self.session.runs) - 1))
        self.run_box.blockSignals(False)
        self.group_box.blockSignals(True)  # runs that share no layer name meet by model block
        self.group_box.setCurrentText(BLOCKS if _disjoint([r.analysis for r in self.session.runs]) else LAYERS)
        self.group_box.blockSignals(False)
        self.refresh()

    @property
    def run_index(self) -> int:
        return self.run_box.currentIndex()

    # --- the table ----------------------------------------------------------------------------

    def refresh(self, *_: object) -> None:
        self.model.clear()
        self.insight_list.clear()
        runs = self.session.runs
        i = self.run_index
        if not (0 <= i < len(runs)):
            return
        by_block = self.group_box.currentText() == BLOCKS
        rows_of = (lambda r: block_stats(r.trace, r.analysis)) if by_block else (lambda r: r.analysis.layers)
        base = runs[i].analysis
        others = [(j, r) for j, r in enumerate(runs) if j != i]
        theirs = {j: {s.name: s for s in rows_of(r)} for j, r in others}
        headers = list(BASE_COLUMNS)
        for j, r in others:
            short = r.short_title
            headers += [f"{j + 1}: {short} µs", f"Δ {j + 1} vs {i + 1}"]
        self.model.setHorizontalHeaderLabels(headers)
        total = base.total_ns or 1.0
        for layer in rows_of(runs[i]):
            first = layer.ops[0].name if by_block and layer.ops else layer.name  # what a click selects
            row = self._row(layer, total, first)
            for j, _ in others:
                row += self._delta_cells(layer, theirs[j].get(layer.name))
            for op in layer.ops:
                op_row = self._row(op, total, op.name if by_block else layer.name)
                op_row += [_cell("") for _ in range(2 * len(others))]
                row[0].appendRow(op_row)
            self.model.appendRow(row)
        for c in range(len(headers)):
            self.tree.resizeColumnToContents(c)
        # the names, which say what each row is, as wide as they need up to a third of the table
        self.tree.setColumnWidth(0, min(max(160, self.tree.columnWidth(0)), max(160, self.tree.width() // 3)))
        self._fill_insights(i)

    def _row(self, s: Stats, total: float, layer: str) -> list[QStandardItem]:
        ai = s.arithmetic_intensity
        mfu, mbu = _pct(s.mfu), _pct(s.mbu)
        # each figure as the Regions tab writes it (sim.catalogue.number)
        cells = [_cell(s.name, s.start_ns, align_right=False), _cell(number(s.time_ns / 1e3), s.time_ns),
                 _cell(number(100 * s.time_ns / total, "percent"), s.time_ns), _cell(number(s.flops / 1e9), s.flops),
                 _cell(number(s.bytes / 1e6), s.bytes),
                 _cell("∞" if math.isinf(ai) else number(ai), ai if math.isfinite(ai) else 1e300),
                 _cell(s.bound, s.bound, align_right=False), _cell(mfu[0], mfu[1]), _cell(mbu[0], mbu[1]),
                 _cell(number((s.spill_save_bytes + s.spill_reload_bytes) / 1e6),
                       s.spill_save_bytes + s.spill_reload_bytes)]
        cells[0].setData(layer, LAYER_ROLE)
        return cells

    def _delta_cells(self, ours: Stats, theirs: Stats | None) -> list[QStandardItem]:
        if theirs is None or ours.time_ns <= 0:
            return [_cell("-", -1.0), _cell("-", 0.0)]
        ratio = theirs.time_ns / ours.time_ns
        diff = (theirs.time_ns - ours.time_ns) / 1e3
        delta = _cell(f"{diff:+,.2f} µs ({100 * (ratio - 1):+.0f}%)", ratio)
        delta.setBackground(QBrush(delta_color(ratio)))
        delta.setToolTip(f"{times(ratio)} this run's time")
        return [_cell(number(theirs.time_ns / 1e3), theirs.time_ns), delta]

    def copy_selection(self) -> None:
        """The selected rows (all their columns) as tab-separated text, with the header."""
        indexes = self.tree.selectionModel().selectedRows()
        if not indexes:
            return
        headers = [self.model.headerData(c, Qt.Orientation.Horizontal) for c in range(self.model.columnCount())]
        lines = ["\t".join(headers)]
        for idx in sorted(indexes, key=lambda x: (x.parent().row(), x.row())):
            lines.append("\t".join(str(self.proxy.index(idx.row(), c, idx.parent()).data() or "")
                                   for c in range(self.model.columnCount())))
        QGuiApplication.clipboard().setText("\n".join(lines))

    def _row_selected(self, current, _previous=None) -> None:
        if current.isValid():
            layer = self.proxy.index(current.row(), 0, current.parent()).data(LAYER_ROLE)
            if layer:
                self.session.select_layer(layer)

    def _select_layer_row(self, name: str) -> None:
        if not name or not self.shown:
            return
        matches = self.model.findItems(name, Qt.MatchFlag.MatchExactly, 0)
        if matches:
            index = self.proxy.mapFromSource(matches[0].index())
            if index.isValid() and index != self.tree.currentIndex():
                self.tree.setCurrentIndex(index)
                self.tree.scrollTo(index)

    # --- insights -----------------------------------------------------------------------------

    def _fill_insights(self, i: int) -> None:
        runs = self.session.runs
        others = [r for j, r in enumerate(runs) if j != i]
        self.found = insights(runs[i].trace, [r.trace for r in others], runs[i].analysis,
                              [r.analysis for r in others])
        for found in self.found:
            item = QListWidgetItem(f"[{found.severity}] {found.text}")
            item.setForeground(QBrush(QColor(SEVERITY_COLORS.get(found.severity, "#999999"))))
            item.setToolTip(found.text)
            self.insight_list.addItem(item)
        if not self.found:
            self.insight_list.addItem("No finding above its threshold.")

    def _insight_clicked(self, item: QListWidgetItem) -> None:
        row = self.insight_list.row(item)
        if not (0 <= row < len(self.found)):
            return
        found = self.found[row]
        if found.layers:
            self.session.select_layer(found.layers[0])
        if found.end_us > found.start_us:
            self.sig_show_span.emit(self.run_index, found.start_us * 1e3, found.end_us * 1e3)
