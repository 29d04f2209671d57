"""A title over a read-only table with one row per run: the layout of the comparison docks."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QLabel, QTableWidget, QVBoxLayout, QWidget

from neuronviz.widgets import compact_rows


class ComparisonTable(QWidget):
    def __init__(self, columns: Sequence[str], title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel(title)
        self.table = QTableWidget(0, len(columns))
        self.table.setHorizontalHeaderLabels(list(columns))
        self.table.verticalHeader().setVisible(False)
        compact_rows(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addWidget(self.table)
