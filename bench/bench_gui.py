"""GUI figures, measured offscreen: launch to first painted frame, and repaint times of four panes
while animating and while zooming a one-million-event trace.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_gui.py
(targets: first frame < 2 s; median repaint < 16 ms, i.e. 60 frames per second)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

LAUNCH = """
import time; t0 = time.perf_counter()
from PySide6.QtCore import QSettings, QTimer
from neuronviz.app import build_window, make_app
app = make_app()
w = build_window(None, QSettings(r"{ini}", QSettings.Format.IniFormat))
w.show()
w.grab()
print(time.perf_counter() - t0)
"""


def first_frame_s() -> float:
    """Seconds from a fresh interpreter to the demo window's first complete frame."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", LAUNCH.format(ini=f"{tmp}/s.ini")], capture_output=True,
                             text=True, check=True)
        del out
        return time.perf_counter() - t0


def repaint_ms(window, step) -> list[float]:
    """Wall time of each frame: the change (``step``), then the event loop until every pane has
    repainted, as the app's own frames run. Counts the viewport paints to make sure each pane
    painted (and how often)."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    class PaintCounter(QObject):
        paints = 0

        def eventFilter(self, watched, event) -> bool:
            if event.type() == QEvent.Type.Paint:
                PaintCounter.paints += 1
            return False

    counter = PaintCounter()
    viewports = [pane.graphics.viewport() for pane in window.panes]
    for v in viewports:
        v.installEventFilter(counter)
    times = []
    for i in range(60):
        t = time.perf_counter()
        step(i)
        QApplication.processEvents()
        times.append((time.perf_counter() - t) * 1e3)
    for v in viewports:
        v.removeEventFilter(counter)
    print(f"  ({PaintCounter.paints / 60 / len(viewports):.2f} paints per pane per frame)")
    return times


def report(label: str, times: list[float]) -> None:
    times = sorted(times)
    p95 = times[int(0.95 * (len(times) - 1))]
    print(f"{label}: median {statistics.median(times):.1f} ms, p95 {p95:.1f} ms "
          f"(target median < 16 ms, ratio {statistics.median(times) / 16:.2f})")


def main() -> None:
    print(f"launch to first painted frame (demo, fresh process): {first_frame_s():.2f} s (target < 2 s)")
    from PySide6.QtCore import QSettings

    from neuronviz.app import build_window, make_app
    from neuronviz.session import Run
    from sim.run import RunConfig, simulate

    make_app()
    trace = simulate(RunConfig(model="llama-3-8b", chip="inf2", mode="decode", seq=128, new_tokens=48))
    print(f"big trace: {trace.n_events:,} events per pane, four panes")
    with tempfile.TemporaryDirectory() as tmp:
        window = build_window([Run(trace) for _ in range(4)], QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
        window.resize(1920, 1080)
        window.show()
        window.grab()
        session = window.session
        animate = repaint_ms(window, lambda i: session.set_playhead(i / 60))
        report("animating (playhead moves, whole run visible)", animate)
        end = trace.duration_ns

        def zoom(i: int) -> None:
            width = end * 0.97 ** i
            window.panes[0].timeline.setXRange(end / 2 - width / 2, end / 2 + width / 2, padding=0)

        report("zooming (x range shrinks 3% per frame)", repaint_ms(window, zoom))
        window.close()


if __name__ == "__main__":
    main()
