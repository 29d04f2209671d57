"""Views whose content is made when they are first looked at (the analysis of a big run takes a
moment; a tab nobody opens should not cost it)."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget


class LazyView(QWidget):
    """``shown`` turns True the first time the view is shown, and :meth:`first_shown` runs then."""

    shown = False

    def showEvent(self, event) -> None:  # noqa: N802 (Qt)
        super().showEvent(event)
        if not self.shown:
            self.shown = True
            self.first_shown()

    def first_shown(self) -> None:
        raise NotImplementedError
