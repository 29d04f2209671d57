"""Progress of long work: how much of it is done, at what rate and how long is left (a sweep reports
it; the CLI's terminal bar, :mod:`neuronviz.progress`, shows it). The file loaders report a plain
share done (a callable of a float from 0 to 1) and the app draws its own Qt bars; neither needs this."""

from __future__ import annotations

import time
from collections.abc import Callable


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
    def rate(self) -> float:
        """Units a second since it started."""
        elapsed = self.clock() - self.started
        return (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None before anything is done."""
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 else None
