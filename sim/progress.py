"""Progress of long work: how much of it is done, at what rate, how long is left, and a bar that
shows it on a terminal (the CLI's sweeps and animations). The file loaders report a plain share done
(a callable of a float from 0 to 1) and the app draws its own Qt bars; neither needs this."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """``done`` units of ``total``, with the rate since it started (units done before it started,
    such as the rows a resumed sweep already has, do not count towards the rate) and the time left."""

    def __init__(self, total: int, done: int = 0, clock: Callable[[], float] = time.perf_counter) -> None:
        self.total, self.start_done, self.done = total, done, done
        self.clock = clock
        self.started = clock()

    def advance(self, n: int) -> None:
        self.done += n

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total > 0 else 1.0

    @property
    def rate(self) -> float:
        """Units a second since it started."""
        elapsed = self.clock() - self.started
        return (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None before anything is done."""
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 else None


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
