"""Trace file speed on a trace of over a million events: the native .nvtrace format against plain
numpy.save/numpy.load of the same event columns, and Chrome Trace Event JSON export and import.

Run: .venv/bin/python bench/bench_io.py        (target: native load within 3x of numpy.load of
the raw event arrays, and under 1 s)
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sim.io import chrome
from sim.io.chrome import export_chrome, load_chrome, save_chrome
from sim.io.native import load_traces, save_traces
from sim.run import RunConfig, simulate
from sim.trace import Trace

MIN_EVENTS = 1_000_000
CANDIDATES = (
    RunConfig(model="llama-3-8b", chip="inf2", mode="decode", seq=128, new_tokens=64),
    RunConfig(model="llama-3-8b", chip="inf2", mode="decode", seq=128, new_tokens=128),
    RunConfig(model="bert-large", chip="trn1", batch=64, seq=512),
)


def big_trace() -> tuple[Trace, RunConfig]:
    """The first configuration that simulates to at least a million events."""
    for cfg in CANDIDATES:
        trace = simulate(cfg)
        if trace.n_events >= MIN_EVENTS:
            return trace, cfg
    return trace, cfg


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def parse_time(path: Path) -> float:
    """Time load_chrome spends turning the file's text into Python objects with orjson."""
    fail = chrome._Fail(str(path))
    data = chrome._read(path, fail)
    with chrome._gc_paused():
        return timed(lambda: chrome._parse(data, fail), 1)


def mb(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:,.1f} MB"


def main() -> None:
    trace, cfg = big_trace()
    samples = sum(len(c.t_ns) for c in trace.counters.values())
    print(f"trace: {cfg.model} {cfg.mode} seq {cfg.seq} new tokens {cfg.new_tokens} on {cfg.chip}: "
          f"{trace.n_events:,} events, {samples:,} counter samples")

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        native = folder / "big.nvtrace"
        save_s = timed(lambda: save_traces(native, [trace]), 3)
        load_s = timed(lambda: load_traces(native), 5)
        print(f"native save:  {save_s:7.3f} s  ({mb(native)})")
        print(f"native load:  {load_s:7.3f} s")

        raw = folder / "raw"
        raw.mkdir()
        for name, column in trace.events.items():
            np.save(raw / f"{name}.npy", column, allow_pickle=False)
        names = list(trace.events)
        numpy_s = timed(lambda: {n: np.load(raw / f"{n}.npy", allow_pickle=False) for n in names}, 5)
        raw_mb = sum(os.path.getsize(raw / f"{n}.npy") for n in names) / 1e6
        print(f"numpy.load of the {len(names)} raw event columns: {numpy_s:7.3f} s  ({raw_mb:,.1f} MB)")
        print(f"native load / numpy load: {load_s / numpy_s:.2f}x (target <= 3x); "
              f"native load {load_s:.3f} s (target < 1 s, ratio {load_s / 1.0:.2f})")
        # the native file also holds the counters and the layer spans: the same again for every array
        arrays = {**{f"event_{n}": c for n, c in trace.events.items()},
                  **{f"counter{i}_{part}": getattr(c, part) for i, c in enumerate(trace.counters.values())
                     for part in ("t_ns", "value")},
                  "op_layer": trace.op_layer, "layer_start_ns": trace.layer_start_ns,
                  "layer_end_ns": trace.layer_end_ns}
        for name, a in arrays.items():
            np.save(raw / f"{name}.npy", a, allow_pickle=False)
        all_s = timed(lambda: {n: np.load(raw / f"{n}.npy", allow_pickle=False) for n in arrays}, 5)
        print(f"numpy.load of all {len(arrays)} arrays of the trace (events, counters, layers): {all_s:7.3f} s; "
              f"native load / that: {load_s / all_s:.2f}x")

        print("Chrome JSON:")
        export_s = timed(lambda: export_chrome([trace]), 1)
        print(f"  export_chrome (dict of {trace.n_events + samples:,} events): {export_s:7.3f} s")
        js = folder / "big.json"
        save_json_s = timed(lambda: save_chrome(js, [trace]), 1)
        print(f"  save_chrome:  {save_json_s:7.3f} s  ({mb(js)})")
        load_json_s = timed(lambda: load_chrome(js), 1)
        parse_s = parse_time(js)
        print(f"  load_chrome:  {load_json_s:7.3f} s  (of which parsing the JSON text: {parse_s:.3f} s)")
        gz = folder / "big.json.gz"
        save_gz_s = timed(lambda: save_chrome(gz, [trace]), 1)
        print(f"  save_chrome .json.gz: {save_gz_s:7.3f} s  ({mb(gz)})")
        load_gz_s = timed(lambda: load_chrome(gz), 1)
        print(f"  load_chrome .json.gz: {load_gz_s:7.3f} s")
        print(f"Chrome JSON / native: save {save_json_s / save_s:.1f}x, load {load_json_s / load_s:.1f}x; "
              f"per event: save {save_json_s / (trace.n_events + samples) * 1e6:.2f} us, "
              f"load {load_json_s / (trace.n_events + samples) * 1e6:.2f} us")


if __name__ == "__main__":
    main()
