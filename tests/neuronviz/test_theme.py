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


def test_switching_to_dark_repaints_the_tabs_plots_and_keeps_placeholders_readable(demo_window, qtbot):
    from PySide6.QtGui import QPalette

    demo_window.set_theme("dark")
    qtbot.wait(10)  # the widgets take the application's new palette from the event loop
    try:
        for plot in (demo_window.roofline.plot, *demo_window.requests.cdf.values(), demo_window.sweep.plot):
            plot.resize(300, 200)
            assert plot.grab().toImage().pixelColor(2, 2).name() == DARK.background  # made light, now dark
            axis = plot.getAxis("bottom")
            assert axis.textPen().color().name() == DARK.foreground
            assert axis.labelStyle["color"] == DARK.foreground
        search = demo_window.playback.search
        assert search.text() == "" and search.placeholderText()
        base = search.palette().color(QPalette.ColorRole.Base)
        img = search.grab().toImage()
        lightest = max(img.pixelColor(x, img.height() // 2).lightness() for x in range(img.width() // 2))
        assert lightest > base.lightness() + 60  # the placeholder's letters stand out from the box
    finally:
        demo_window.set_theme("light")
