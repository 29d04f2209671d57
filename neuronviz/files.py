"""Opening and saving trace files for the app and the CLI, with one-line errors."""

from __future__ import annotations

from collections.abc import Callable

from neuronviz.session import Run
from sim.io import load_file, save_file
from sim.run import RunConfig, simulate

DEMO_CHIPS = ("inf1", "inf2", "trn1", "trn2")
OPEN_FILTERS = ("Traces (*.nvtrace *.json *.json.gz)", "neuronviz traces (*.nvtrace)",
                "Chrome trace JSON (*.json *.json.gz)", "All files (*)")
SAVE_FILTERS = {"neuronviz trace (*.nvtrace)": ".nvtrace", "Chrome trace JSON (*.json)": ".json",
                "Chrome trace JSON, gzip (*.json.gz)": ".json.gz"}


def open_runs(path: str, progress: Callable[[float], None] | None = None) -> list[Run]:
    """The runs in a native or Chrome JSON file; raises :class:`TraceFileError` with a one-line reason.
    ``progress`` hears the share of the file read (see :func:`sim.io.load_file`)."""
    return [Run(trace, source=str(path)) for trace in load_file(path, progress)]


def save_runs(path: str, runs: list[Run]) -> None:
    """Save atomically, as Chrome JSON for a .json or .json.gz name, else natively."""
    save_file(path, [r.trace for r in runs])


def with_suffix_of(path: str, name_filter: str) -> str:
    """``path`` with the suffix of the chosen save filter unless it already has a known one."""
    if path.lower().endswith(tuple(SAVE_FILTERS.values())):
        return path
    return path + SAVE_FILTERS.get(name_filter, ".nvtrace")


def demo_runs() -> list[Run]:
    """The embedded demo: bert-large, batch 1, sequence 128, inference, on four generations, each
    serving requests back to back for as long as the slowest takes for one, so every pane works
    for the whole playback and the faster chips finish more requests (the slowest one's single
    request is its run)."""
    single = [simulate(RunConfig(model="bert-large", chip=chip, batch=1, seq=128)) for chip in DEMO_CHIPS]
    longest = max(t.meta["total_ns"] for t in single)
    requests = [max(1, round(longest / t.meta["total_ns"])) for t in single]
    return [Run(t if n == 1 else simulate(RunConfig(model="bert-large", chip=chip, batch=1, seq=128, requests=n)),
                source="demo")
            for chip, t, n in zip(DEMO_CHIPS, single, requests, strict=True)]
