"""Opening and saving trace files for the app and the CLI, with one-line errors."""

from __future__ import annotations

from pathlib import Path

from neuronviz.session import Run
from sim.errors import TraceFileError
from sim.io.native import load_traces, save_traces
from sim.run import RunConfig, simulate

DEMO_CHIPS = ("inf1", "inf2", "trn1", "trn2")
NATIVE_SUFFIX = ".nvtrace"


def open_runs(path: str) -> list[Run]:
    """The runs in ``path``; raises :class:`TraceFileError` with a one-line reason."""
    p = Path(path)
    if p.suffix.lower() != NATIVE_SUFFIX and p.exists() and p.is_file():
        raise TraceFileError(f"{path}: not a neuronviz trace (expected a {NATIVE_SUFFIX} file)")
    return [Run(trace, source=str(p)) for trace in load_traces(p)]


def save_runs(path: str, runs: list[Run]) -> None:
    save_traces(path, [r.trace for r in runs])


def demo_runs() -> list[Run]:
    """The embedded demo: bert-large, batch 1, sequence 128, inference, on four generations."""
    return [Run(simulate(RunConfig(model="bert-large", chip=chip, batch=1, seq=128)), source="demo")
            for chip in DEMO_CHIPS]
