"""Graphics items that draw traces into pyqtgraph views."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TypeVar

Paint = TypeVar("Paint", bound=Callable[..., None])


def reports_errors(paint: Paint) -> Paint:
    """For the paint methods of items in a pyqtgraph view: an exception raised there would
    vanish (PySide drops it on its way back through the view's own paintEvent, written in
    Python), leaving the item blank without a word. It goes to ``sys.excepthook`` instead: a
    traceback in the app, a one-line error from the screenshot and animate commands."""

    @functools.wraps(paint)
    def guarded(*args, **kwargs) -> None:
        try:
            paint(*args, **kwargs)
        except Exception:
            sys.excepthook(*sys.exc_info())

    return guarded  # type: ignore[return-value]
