"""Area selection on the timeline, as in Perfetto: drag selects a time window; Shift+drag (or
the middle button) pans, the wheel zooms."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal


class AreaViewBox(pg.ViewBox):
    sig_area = Signal(float, float, bool)  # x where the drag started, x now (view coords), finished

    def mouseDragEvent(self, ev, axis=None) -> None:
        pans = ev.button() == Qt.MouseButton.MiddleButton or (
            ev.button() == Qt.MouseButton.LeftButton and ev.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        if pans or ev.button() != Qt.MouseButton.LeftButton:
            super().mouseDragEvent(ev, axis)  # pyqtgraph pans with the left or middle button
            return
        ev.accept()
        a = self.mapSceneToView(ev.buttonDownScenePos()).x()
        b = self.mapSceneToView(ev.scenePos()).x()
        self.sig_area.emit(a, b, bool(ev.isFinish()))
