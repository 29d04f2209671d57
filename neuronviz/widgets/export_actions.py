"""File > Export in the app: images of the view or of one pane, the clipboard, animations with
progress and cancel, and the summary as CSV. The files are made by :mod:`neuronviz.export`, the
same code the headless CLI uses."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QMessageBox,
    QProgressDialog,
    QSpinBox,
    QWidget,
)

from neuronviz.export import (
    ExportCancelled,
    ExportError,
    frame_count,
    render,
    write_animation,
    write_image,
    write_summary_csv,
)
from neuronviz.session import Session

IMAGE_FILTERS = {"PNG image (*.png)": ".png", "SVG vector image (*.svg)": ".svg"}
DEFAULT_FPS, DEFAULT_SECONDS = 10, 5.0


def _with_suffix(path: str, chosen_filter: str, filters: dict[str, str]) -> str:
    if path.lower().endswith(tuple(filters.values())):
        return path
    return path + filters.get(chosen_filter, next(iter(filters.values())))


class AnimationDialog(QDialog):
    """Frames per second and length of an exported animation."""

    def __init__(self, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export animation")
        self.fps = QSpinBox()
        self.fps.setRange(1, 60)
        self.fps.setValue(int(settings.value("export/fps", DEFAULT_FPS)))
        self.seconds = QDoubleSpinBox()
        self.seconds.setRange(0.5, 120.0)
        self.seconds.setSuffix(" s")
        self.seconds.setValue(float(settings.value("export/seconds", DEFAULT_SECONDS)))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Frames per second", self.fps)
        form.addRow("Length (the playhead sweeps the whole run)", self.seconds)
        form.addRow(buttons)


class ExportActions:
    """The export commands of one main window."""

    def __init__(self, window: QWidget, session: Session, settings: QSettings) -> None:
        self.window, self.session, self.settings = window, session, settings

    def _folder(self) -> str:
        return str(self.settings.value("export/folder", "") or "")

    def _remember_folder(self, path: str) -> None:
        self.settings.setValue("export/folder", str(Path(path).parent))

    def _warn(self, exc: Exception) -> None:
        QMessageBox.warning(self.window, "Cannot export", str(exc))

    def export_image(self, widget: QWidget | None = None) -> str | None:
        """Ask for a .png or .svg name and write ``widget`` (default: the whole window) to it."""
        widget = widget or self.window
        path, chosen = QFileDialog.getSaveFileName(self.window, "Export image", self._folder(),
                                                   ";;".join(IMAGE_FILTERS))
        if not path:
            return None
        path = _with_suffix(path, chosen, IMAGE_FILTERS)
        try:
            write_image(widget, path)
        except ExportError as exc:
            self._warn(exc)
            return None
        self._remember_folder(path)
        return path

    def copy_image(self, widget: QWidget | None = None) -> None:
        QGuiApplication.clipboard().setImage(render(widget or self.window))

    def export_animation(self) -> str | None:
        """Ask for fps, length and a .gif name; render with a cancellable progress dialog."""
        if not self.session.runs:
            return None
        dialog = AnimationDialog(self.settings, self.window)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        fps, seconds = dialog.fps.value(), dialog.seconds.value()
        try:
            frame_count(fps, seconds, self.window.size())  # refused now, not after picking a file
        except ExportError as exc:
            self._warn(exc)
            return None
        self.settings.setValue("export/fps", fps)
        self.settings.setValue("export/seconds", seconds)
        path, _ = QFileDialog.getSaveFileName(self.window, "Export animation", self._folder(), "Animated GIF (*.gif)")
        if not path:
            return None
        path = path if path.lower().endswith(".gif") else path + ".gif"
        return self.write_animation(path, fps, seconds)

    def write_animation(self, path: str, fps: int, seconds: float) -> str | None:
        """Render the animation to ``path`` with a progress dialog; None if it failed or was cancelled."""
        progress = QProgressDialog("Rendering frames…", "Cancel", 0, 1, self.window)
        progress.setWindowTitle("Export animation")
        progress.setWindowModality(Qt.WindowModality.WindowModal)
        progress.setMinimumDuration(0)

        def report(done: int, total: int) -> bool:
            progress.setMaximum(total)
            progress.setValue(done)
            progress.setLabelText(f"Rendering frame {min(done + 1, total)} of {total}…")
            QApplication.processEvents()
            return not progress.wasCanceled()

        playback = getattr(self.window, "playback", None)
        was_playing = bool(playback and playback.playing)
        if playback:
            playback.set_playing(False)
        try:
            write_animation(self.session, self.window, path, fps, seconds, progress=report)
        except ExportCancelled:
            return None
        except ExportError as exc:
            self._warn(exc)
            return None
        finally:
            progress.close()
            if playback and was_playing:
                playback.set_playing(True)
        self._remember_folder(path)
        return path

    def export_csv(self) -> str | None:
        if not self.session.runs:
            return None
        path, _ = QFileDialog.getSaveFileName(self.window, "Export summary", self._folder(), "CSV table (*.csv)")
        if not path:
            return None
        path = path if path.lower().endswith(".csv") else path + ".csv"
        try:
            write_summary_csv(self.session, path)
        except ExportError as exc:
            self._warn(exc)
            return None
        self._remember_folder(path)
        return path
