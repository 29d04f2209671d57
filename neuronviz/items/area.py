"""Area selection on the timeline, as in Perfetto: drag selects a time window; Shift+drag (or
the middle button) pans, the wheel zooms."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal


class LinkedViewBox(pg.ViewBox):
    """A view whose linked x range is the same time range as its link's, wherever the two sit on
    screen. (pyqtgraph lines up views that overlap horizontally on screen by their pixel offset:
    a pane without a chip diagram under one with it was shifted by the diagram's width.)
    Without a context menu unless asked for: the panes' views have none, and making pyqtgraph's
    one, to throw it away, cost 4 ms a view (eight in the demo's first frame)."""

    def __init__(self, *args, enableMenu: bool = False, **kwargs) -> None:
        super().__init__(*args, enableMenu=enableMenu, **kwargs)

    def linkedViewChanged(self, view, axis) -> None:
        if axis != pg.ViewBox.XAxis or self.linksBlocked or view is None:
            super().linkedViewChanged(view, axis)
            return
        view.blockLink(True)  # setting our range informs our link in turn: not back to where it came from
        try:
            self.enableAutoRange(pg.ViewBox.XAxis, False)
            self.setXRange(*view.viewRange()[0], padding=0)
        finally:
            view.blockLink(False)


class AreaViewBox(LinkedViewBox):
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
