"""Rendering the window to images: one path serves the menu and the headless CLI."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget

from sim.errors import SimError


class ExportError(SimError):
    """An export that cannot be written (bad size, bad path, unknown format)."""


def parse_size(text: str) -> QSize:
    """``"1600x900"`` -> QSize; a one-line :class:`ExportError` otherwise."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ExportError(f"bad size '{text}': use WIDTHxHEIGHT, e.g. 1600x900") from None
    if not (200 <= w <= 8000 and 150 <= h <= 8000):
        raise ExportError(f"bad size '{text}': width 200-8000 and height 150-8000 pixels")
    return QSize(w, h)


def render(widget: QWidget, size: QSize | None = None) -> QImage:
    """What ``widget`` shows, at ``size`` when given (laid out again at that size)."""
    if size is not None:
        widget.resize(size)
    QApplication.processEvents()
    QApplication.processEvents()
    return widget.grab().toImage()


def write_png(image: QImage, path: str) -> None:
    target = Path(path)
    if target.suffix.lower() != ".png":
        raise ExportError(f"{path}: only .png is supported")
    if not target.parent.exists():
        raise ExportError(f"{path}: folder {target.parent} does not exist")
    tmp = target.with_name(f".{target.name}.tmp.png")
    if not image.save(str(tmp), "PNG"):
        tmp.unlink(missing_ok=True)
        raise ExportError(f"{path}: cannot write the image")
    tmp.replace(target)
