"""Colours used everywhere: engine colours from the Okabe-Ito palette (readable by colour-blind
users), and light/dark backgrounds that follow the system colour scheme."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication

ENGINE_COLORS = {
    "tensor": "#0072B2",      # blue
    "vector": "#E69F00",      # orange
    "scalar": "#009E73",      # bluish green
    "gpsimd": "#CC79A7",      # reddish purple
    "dma_read": "#56B4E9",    # sky blue
    "dma_write": "#D55E00",   # vermillion
    "collective": "#F0E442",  # yellow
    "other": "#999999",
}
ENGINE_LABELS = {
    "tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd",
    "dma_read": "DMA read", "dma_write": "DMA write", "collective": "Collective",
}


def engine_color(kind: str) -> QColor:
    return QColor(ENGINE_COLORS.get(kind, ENGINE_COLORS["other"]))


@dataclass(frozen=True)
class Palette:
    background: str
    foreground: str
    grid: str
    layer_a: str
    layer_b: str
    selection: str
    playhead: str


LIGHT = Palette("#ffffff", "#202020", "#d8d8d8", "#c9d3e0", "#e3e8ef", "#000000", "#c00000")
DARK = Palette("#1e1e1e", "#e0e0e0", "#3a3a3a", "#3b4656", "#2c3440", "#ffffff", "#ff5050")


def is_dark() -> bool:
    """True when the system (or the forced style) uses a dark colour scheme."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    return app.styleHints().colorScheme() == Qt.ColorScheme.Dark


def palette() -> Palette:
    return DARK if is_dark() else LIGHT
