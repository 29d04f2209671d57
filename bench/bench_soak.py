"""Playback soak: the demo comparison playing in a loop at the fastest speed, the window painting
every frame, for a given time; the process's memory sampled throughout. Growth after the first
minute (caches filled, first frames drawn) is what a leak would show.

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_soak.py [MINUTES]
(default 30; target: resident memory grows under 5% from the first minute to the end)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

WARM_UP_S = 60.0  # memory after this is the baseline
SAMPLE_S = 10.0


def rss_mb() -> float:
    """Resident memory of this process now (not the peak), from /proc."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> int:
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from neuronviz.app import build_window, make_app
    from neuronviz.widgets.playback import SPEEDS

    app = make_app()
    with tempfile.TemporaryDirectory() as tmp:
        window = build_window(None, QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
        window.resize(1600, 1000)
        window.show()
        bar = window.playback
        bar.speed.setCurrentIndex(len(SPEEDS) - 1)
        bar.loop.setChecked(True)
        bar.set_playing(True)
        start = time.perf_counter()
        end = start + minutes * 60.0
        baseline = None
        samples, frames, next_sample = [], 0, start + SAMPLE_S
        while time.perf_counter() < end:
            app.processEvents()
            window.grab()  # paint every pane as a frame on screen would
            frames += 1
            now = time.perf_counter()
            if now >= next_sample:
                samples.append((now - start, rss_mb()))
                next_sample += SAMPLE_S
                if baseline is None and now - start >= WARM_UP_S:
                    baseline = samples[-1][1]
        took = time.perf_counter() - start
        final = rss_mb()
        window.close()
    QApplication.processEvents()
    base = baseline if baseline is not None else samples[0][1] if samples else final
    growth = (final - base) / base
    print(f"{took / 60:.1f} min of playback, {frames:,} frames ({frames / took:.1f} frames/s)")
    print(f"resident memory: {base:,.0f} MB after the first minute, {final:,.0f} MB at the end, "
          f"peak {max(v for _, v in samples) if samples else final:,.0f} MB")
    print(f"growth: {100 * growth:+.2f}% (target under 5%, ratio {abs(growth) / 0.05:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
