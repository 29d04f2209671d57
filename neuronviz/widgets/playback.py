"""Playback bar: play/pause, speed, loop, scrub slider, the time readout and the search box."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSlider,
    QWidget,
)

from neuronviz.session import Session
from sim.catalogue import duration

SLIDER_STEPS = 10_000
SECONDS_PER_RUN = 8.0  # at 1x, the longest run plays in this many seconds
SPEEDS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)


class PlaybackBar(QWidget):
    sig_find_next = Signal(bool)  # Enter in the search box: True for the previous match (Shift+Enter)

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.play_button = QPushButton("Play")
        self.play_button.setCheckable(True)
        self.play_button.setToolTip("Play / pause (Space)")
        self.speed = QComboBox()
        self.speed.addItems([f"{s:g}×" for s in SPEEDS])
        self.speed.setCurrentIndex(SPEEDS.index(1.0))
        self.speed.setToolTip("Playback speed")
        self.loop = QCheckBox("Loop")
        self.loop.setChecked(True)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.readout = QLabel()
        self.readout.setMinimumWidth(190)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Find layer or op (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.setMinimumWidth(200)
        self.search.setMaximumWidth(260)
        self.search.setToolTip("Highlights matching layers in every pane; Enter jumps to the next, Shift+Enter back")
        self.matches = QLabel()
        self.search.textChanged.connect(session.set_search)
        self.search.returnPressed.connect(
            lambda: self.sig_find_next.emit(bool(QApplication.keyboardModifiers() & Qt.KeyboardModifier.ShiftModifier)))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        for w in (self.play_button, self.speed, self.loop):
            layout.addWidget(w)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.readout)
        layout.addWidget(self.search)
        layout.addWidget(self.matches)
        self.timer = QTimer(self)
        self.timer.setInterval(16)
        self.timer.timeout.connect(self._tick)
        self._last = 0.0
        self.play_button.toggled.connect(self.set_playing)
        self.slider.valueChanged.connect(lambda v: session.set_playhead(v / SLIDER_STEPS))
        session.sig_playhead_moved.connect(self._show)
        session.sig_runs_changed.connect(self._show)
        self._show()

    @property
    def playing(self) -> bool:
        return self.timer.isActive()

    def set_playing(self, on: bool) -> None:
        if on and self.session.playhead >= 1.0:
            self.session.set_playhead(0.0)
        self._last = time.perf_counter()
        self.timer.start() if on else self.timer.stop()
        self.play_button.blockSignals(True)
        self.play_button.setChecked(on)
        self.play_button.setText("Pause" if on else "Play")
        self.play_button.blockSignals(False)

    def toggle(self) -> None:
        self.set_playing(not self.playing)

    def step(self, fraction: float) -> None:
        self.session.set_playhead(self.session.playhead + fraction)

    def _tick(self) -> None:
        now = time.perf_counter()
        dt, self._last = now - self._last, now
        speed = SPEEDS[self.speed.currentIndex()]
        nxt = self.session.playhead + dt * speed / SECONDS_PER_RUN
        if nxt >= 1.0:
            if self.loop.isChecked():
                nxt = 0.0
            else:
                self.session.set_playhead(1.0)
                self.set_playing(False)
                return
        self.session.set_playhead(nxt)

    def _show(self, *_: object) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(round(self.session.playhead * SLIDER_STEPS))
        self.slider.blockSignals(False)
        if self.session.normalised:
            self.readout.setText(f"{100 * self.session.playhead:.1f}% of each run")
        else:
            t = self.session.playhead * self.session.max_duration_ns
            self.readout.setText(f"t = {duration(t)} of {duration(self.session.max_duration_ns)}")
