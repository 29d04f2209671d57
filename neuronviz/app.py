"""Application wiring: QApplication, settings, session, main window, the files to open."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import QSettings, QStandardPaths
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from neuronviz import __version__
from neuronviz.files import demo_runs
from neuronviz.main_window import MainWindow
from neuronviz.resources import resource_path
from neuronviz.session import Run, Session
from neuronviz.theme import THEMES, apply_theme


def make_app(theme: str = "system") -> QApplication:
    # Qt's raster engine hands every blend of 96 or more lines to a thread pool and waits for it.
    # For pane-sized images the hand-off costs more than the blend: a zoom frame of four panes
    # spent 3-5 ms waiting on it (bench/bench_gui.py). Read once, when Qt first paints.
    os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("neuronviz")
    app.setOrganizationName("neuronviz")
    app.setApplicationVersion(__version__)
    icon = resource_path("neuronviz.svg")
    if icon is not None:
        app.setWindowIcon(QIcon(str(icon)))
    pg.setConfigOptions(antialias=False)
    apply_theme(theme)
    return app


def build_window(runs: list[Run] | None, settings: QSettings, path: str = "",
                 demo_cache: Path | None = None) -> MainWindow:
    """A main window showing ``runs`` (the demo comparison when ``None``, its traces kept in
    ``demo_cache`` when given: see :func:`neuronviz.files.demo_runs`)."""
    session = Session()
    window = MainWindow(session, settings)
    session.set_runs(demo_runs(demo_cache) if runs is None else runs, path=path)
    return window


def demo_cache() -> Path:
    """Where the app keeps the demo's traces between launches: the user's cache folder."""
    return Path(QStandardPaths.writableLocation(QStandardPaths.StandardLocation.CacheLocation))


def run_app(argv: list[str]) -> int:
    """``neuronviz [FILE...]``: open the files (a bad one shows a dialog), or the animated demo."""
    app = make_app()
    settings = QSettings()
    theme = str(settings.value("view/theme", "system"))
    apply_theme(theme if theme in THEMES else "system")
    window = build_window(None if not argv else [], settings, demo_cache=demo_cache())
    window.show()
    if argv:
        window.open_files(argv)
    else:
        window.playback.set_playing(True)
    code = app.exec()
    shiboken6.delete(window)  # now, while Qt is whole: at interpreter shutdown the teardown order is random
    return code

