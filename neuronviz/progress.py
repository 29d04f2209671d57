"""The progress bar the CLI draws on a terminal for its sweeps and animations, from a
:class:`sim.progress.Progress`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from sim.progress import Progress


class TerminalBar:
    """A progress bar redrawn in place on ``stream`` (stderr by default), at most every ``every_s``
    seconds and always when the work is done, then ended by a new line::

        sweep [###############...............] 12/24 configurations (3.1/s, 4 s left)
    """

    WIDTH = 30  # characters of the bar

    def __init__(self, what: str, unit: str, stream: TextIO | None = None, every_s: float = 0.2,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.what, self.unit, self.stream, self.every_s, self.clock = what, unit, stream, every_s, clock
        self.shown_at: float | None = None
        self.counts: Progress | None = None

    def __call__(self, state: Progress) -> None:
        now, finished = state.clock(), state.done >= state.total
        if not finished and self.shown_at is not None and now - self.shown_at < self.every_s:
            return
        self.shown_at = now
        filled = self.WIDTH * min(state.done, state.total) // max(state.total, 1)
        eta = "" if state.eta_s is None or finished else f", {state.eta_s:,.0f} s left"
        print(f"\r{self.what} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {state.done:,}/{state.total:,} "
              f"{self.unit} ({state.rate:,.1f}/s{eta})  ", end="\n" if finished else "",
              file=self.stream or sys.stderr, flush=True)

    def count(self, done: int, total: int) -> bool:
        """For work that reports ``(done, total)`` and stops when told False (an animation's frames):
        shows it (its rate on the bar's ``clock``) and goes on."""
        if self.counts is None:
            self.counts = Progress(total, done, self.clock)
        self.counts.total, self.counts.done = total, done
        self(self.counts)
        return True
