"""Simulations and file loads off the GUI thread. Each request has a generation id; results of a
request that was cancelled or superseded are dropped."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from neuronviz.files import on_one_clock, open_problem
from neuronviz.session import SIMULATED, Run
from sim.errors import SimError
from sim.run import RunConfig, simulate


class _Worker(QObject):
    """One request at a time in a worker thread, numbered; a newer request or a cancel makes the
    older one's results stale. Subclasses implement ``_work(generation, request)``."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._generation = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, request: list) -> int:
        """Work on ``request`` in a worker thread; returns the request's generation id."""
        with self._lock:
            self._generation += 1
            gen = self._generation
        self._thread = threading.Thread(target=self._work, args=(gen, request), daemon=True)
        self._thread.start()
        return gen

    def cancel(self) -> None:
        """Drop the running request: what it has left is skipped and its results ignored."""
        with self._lock:
            self._generation += 1

    def current(self, gen: int) -> bool:
        with self._lock:
            return gen == self._generation

    def _work(self, gen: int, request: list) -> None:
        raise NotImplementedError


class SimulationRunner(_Worker):
    sig_progress = Signal(int, int, int)  # generation, runs done, runs asked
    sig_finished = Signal(int, list)  # generation, [Run]
    sig_failed = Signal(int, str)  # generation, one-line reason

    def _work(self, gen: int, configs: list[RunConfig]) -> None:
        runs = []
        try:
            for i, cfg in enumerate(configs):
                if not self.current(gen):
                    return
                runs.append(Run(simulate(cfg), source=SIMULATED))
                self.sig_progress.emit(gen, i + 1, len(configs))
        except SimError as exc:
            if self.current(gen):
                self.sig_failed.emit(gen, str(exc))
            return
        if self.current(gen):
            self.sig_finished.emit(gen, runs)


class _Cancelled(Exception):
    """Raised into a load by its progress callback once the load is no longer wanted."""


class FileLoader(_Worker):
    """Opens trace files off the GUI thread (a big Chrome JSON takes seconds to parse) and builds
    each run's drawing indexes there too; the window stays responsive, sees how far the reading
    has got, and can cancel: a cancelled load stops at its next piece of the file."""

    sig_progress = Signal(int, float)  # generation, share of the files read
    sig_finished = Signal(int, list, list)  # generation, [Run], [path]
    sig_failed = Signal(int, str)  # generation, one-line reason

    def __init__(self, open_runs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._open_runs = open_runs

    def _work(self, gen: int, paths: list[str]) -> None:
        runs = []

        def progress(i: int, share: float) -> None:
            if not self.current(gen):
                raise _Cancelled
            self.sig_progress.emit(gen, (i + share) / len(paths))

        try:
            for i, path in enumerate(paths):
                runs += self._open_runs(path, lambda share, i=i: progress(i, share))
            runs = on_one_clock(runs)  # device profiles opened together: ranks on one clock
            for run in runs:
                if not self.current(gen):
                    return
                run.view  # noqa: B018 - computed here, off the GUI thread
                run.metrics  # noqa: B018
        except _Cancelled:
            return
        except Exception as exc:  # noqa: BLE001 - a worker must always answer, or the window waits forever
            if self.current(gen):
                self.sig_failed.emit(gen, open_problem(paths, exc))
            return
        if self.current(gen):
            self.sig_finished.emit(gen, runs, paths)
