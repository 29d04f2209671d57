"""Colours used everywhere: engine colours from the Okabe-Ito palette (readable by colour-blind
users), and light/dark backgrounds that follow the system colour scheme unless the user picks
one (View > Theme, or ``--theme`` for the headless exports)."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

ENGINE_COLORS = {
    "tensor": "#0072B2",      # blue
    "vector": "#E69F00",      # orange
    "scalar": "#009E73",      # bluish green
    "gpsimd": "#CC79A7",      # reddish purple
    "dma_read": "#56B4E9",    # sky blue
    "dma_write": "#D55E00",   # vermillion
    "collective": "#F0E442",  # yellow
    "host": "#5D6D7E",        # slate: the host's launches, copies and request handling
    "neuronlink": "#CC79A7",  # reddish purple: collective traffic between chips
    "efa": "#009E73",         # bluish green: and between instances
    "other": "#999999",
}
GENERATION_COLORS = {  # one per chip generation where runs are compared as points (sweeps)
    "inf1": "#E69F00",  # orange
    "inf2": "#D55E00",  # vermillion
    "trn1": "#56B4E9",  # sky blue
    "trn2": "#0072B2",  # blue
    "trn3": "#009E73",  # bluish green
}
ENGINE_LABELS = {
    "tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd",
    "dma_read": "DMA read", "dma_write": "DMA write", "collective": "Collective", "host": "Host",
}


def engine_color(kind: str) -> QColor:
    return QColor(ENGINE_COLORS.get(kind, ENGINE_COLORS["other"]))


# slices of another tool's trace, coloured by name as Perfetto colours them: Tableau's 20 without
# its greys (a grey slice would read as "no colour"), mid and light tones that carry dark text
SLICE_COLORS = ("#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F", "#EDC948", "#B07AA1", "#FF9DA7",
                "#9C755F", "#A0CBE8", "#FFBE7D", "#8CD17D", "#B6992D", "#499894", "#86BCB6", "#D37295",
                "#FABFD2", "#D4A6C8")
_DIGITS = re.compile(r"\d+")


def name_color(name: str) -> QColor:
    """The colour of a slice named ``name``: the same for the same name in every run and session
    (a CRC of it, not Python's salted hash), digits left out as Perfetto does, so that
    ``ProfilerStep#1`` and ``ProfilerStep#2`` look alike."""
    key = _DIGITS.sub("", name).encode("utf-8", "surrogatepass")
    return QColor(SLICE_COLORS[zlib.crc32(key) % len(SLICE_COLORS)])


def text_on(color: QColor) -> QColor:
    """Black or white, whichever reads better on ``color`` (by its luminance)."""
    luminance = 0.299 * color.redF() + 0.587 * color.greenF() + 0.114 * color.blueF()
    return QColor("#101010") if luminance > 0.5 else QColor("white")


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


THEMES = ("system", "light", "dark")
_chosen = "system"
_system_style: str | None = None  # the style Qt picked for this desktop, kept while a theme is forced


def is_dark() -> bool:
    """True when the chosen theme, or the system's colour scheme when following it, is dark."""
    if _chosen != "system":
        return _chosen == "dark"
    app = QGuiApplication.instance()
    if app is None:
        return False
    return app.styleHints().colorScheme() == Qt.ColorScheme.Dark


def palette() -> Palette:
    return DARK if is_dark() else LIGHT


def _widget_palette(p: Palette) -> QPalette:
    """A Fusion palette in the plot colours, for a theme that differs from the system's."""
    pal = QPalette()
    base, text = QColor(p.background), QColor(p.foreground)
    window = base.lighter(130) if is_dark() else base.darker(106)
    for role, colour in ((QPalette.ColorRole.Window, window), (QPalette.ColorRole.Base, base),
                         (QPalette.ColorRole.AlternateBase, window), (QPalette.ColorRole.Button, window),
                         (QPalette.ColorRole.WindowText, text), (QPalette.ColorRole.Text, text),
                         (QPalette.ColorRole.ButtonText, text), (QPalette.ColorRole.ToolTipBase, base),
                         (QPalette.ColorRole.ToolTipText, text), (QPalette.ColorRole.Highlight, QColor("#0072B2")),
                         (QPalette.ColorRole.HighlightedText, QColor("white"))):
        pal.setColor(role, colour)
    hint = QColor(text)
    hint.setAlpha(128)  # placeholders: the text colour, half seen (Qt's own default on its palettes)
    pal.setColor(QPalette.ColorRole.PlaceholderText, hint)
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor(p.grid))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, QColor(p.grid))
    return pal


def apply_theme(name: str) -> None:
    """Use theme ``name`` (system, light or dark) for the widgets and every plot made from now on."""
    global _chosen, _system_style
    if name not in THEMES:
        raise ValueError(f"unknown theme '{name}' (choose from {', '.join(THEMES)})")
    _chosen = name
    app = QApplication.instance()
    pal = palette()
    if app is not None:
        if name == "system":
            if _system_style is not None:  # back to the desktop's own style and palette
                app.setStyle(QStyleFactory.create(_system_style))
                _system_style = None
            app.setPalette(QPalette())
        else:
            if _system_style is None:
                _system_style = app.style().name()
            app.setStyle(QStyleFactory.create("Fusion"))
            app.setPalette(_widget_palette(pal))
    pg.setConfigOptions(background=pal.background, foreground=pal.foreground)


def restyle_plots(root: QWidget) -> None:
    """Give the plots under ``root`` made before the theme changed its colours: background, axes
    (lines, ticks, labels) and legend text. What they draw in run colours stays."""
    pal = palette()
    for view in root.findChildren(pg.GraphicsView):
        view.setBackground(pal.background)
        for item in view.scene().items():
            if isinstance(item, pg.AxisItem):
                item.setPen(pal.foreground)
                item.setTextPen(pal.foreground)
            elif isinstance(item, pg.LegendItem):
                item.setLabelTextColor(pal.foreground)
