"""Forcing a theme and going back to the system's: style and palette come back as they were."""

from PySide6.QtWidgets import QApplication, QStyleFactory

from neuronviz.app import make_app
from neuronviz.theme import DARK, apply_theme, palette


def test_following_the_system_again_restores_its_style_and_palette():
    app = make_app()
    original = app.style().name()
    try:
        apply_theme("system")
        app.setStyle(QStyleFactory.create("Windows"))
        system_window = QApplication.palette().window().color()
        apply_theme("dark")
        assert app.style().name() == "fusion" and palette() == DARK
        assert QApplication.palette().window().color().lightness() < 80
        apply_theme("system")
        assert app.style().name() == "windows"
        assert QApplication.palette().window().color() == system_window
    finally:
        apply_theme("system")
        app.setStyle(QStyleFactory.create(original))
