import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from neuronviz.app import build_window, make_app


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def demo_window(qtbot, settings, monkeypatch):
    # closing the window at teardown must not wait on the "unsaved runs" question
    monkeypatch.setattr(QMessageBox, "question", lambda *args: QMessageBox.StandardButton.Discard)
    make_app()
    window = build_window(None, settings)
    qtbot.addWidget(window)
    window.resize(1600, 1000)
    window.show()
    qtbot.waitExposed(window)
    yield window
    window.playback.set_playing(False)
    window.runner.cancel()
