"""Views whose content is made when they are first looked at (the analysis of a big run takes a
moment; a tab nobody opens should not cost it)."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget


class LazyView(QWidget):
    """``shown`` turns True the first time part of the view is on screen, and :meth:`first_shown`
    runs then. A dock tab behind another is shown with the window, with nothing of it on screen:
    it waits until its tab is brought forward (its view is then laid out, resized and painted)."""

    shown = False

    def showEvent(self, event) -> None:  # noqa: N802 (Qt)
        super().showEvent(event)
        self._looked_at()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt)
        super().resizeEvent(event)
        self._looked_at()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt)
        super().paintEvent(event)
        if not self.shown:  # not while painting: the content is made right after
            QTimer.singleShot(0, self, self._looked_at)  # dropped if the view is gone by then

    def _looked_at(self) -> None:
        if not self.shown and self.isVisible() and not self.visibleRegion().isEmpty():
            self.shown = True
            self.first_shown()

    def first_shown(self) -> None:
        raise NotImplementedError
