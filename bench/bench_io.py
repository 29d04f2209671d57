"""Trace file speed on a trace of over a million events: the native .nvtrace format against plain
numpy.save/numpy.load of the same arrays, and Chrome Trace Event JSON export and import.

Run: .venv/bin/python bench/bench_io.py
Targets: native load within 2x of numpy.load of the trace's arrays; Chrome JSON import of a million
events under 3 s and 1 GB (measured in a fresh process: its peak resident memory, interpreter and
imports included), our own export's and a PyTorch profile's of a million nested slices and their
flows alike. Times are the best of several runs: this kind of machine has noisy neighbours.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

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
    """Best wall time of ``fn`` over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


_LOAD_IN_A_FRESH_PROCESS = """
import resource, sys, time
from sim.io.chrome import load_chrome
t = time.perf_counter()
traces = load_chrome(sys.argv[1])
seconds = time.perf_counter() - t
try:  # this process's own peak (ru_maxrss would count the parent's memory before exec)
    with open("/proc/self/status") as f:
        peak_kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
except OSError:
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(seconds, peak_kb / 1e3)
"""


def load_chrome_alone(path: Path) -> tuple[float, float]:
    """load_chrome of ``path`` in a fresh interpreter: its time and the process's peak memory (MB)."""
    out = subprocess.run([sys.executable, "-c", _LOAD_IN_A_FRESH_PROCESS, str(path)], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def write_profiler_like(path: Path, steps: int) -> int:
    """A PyTorch-profiler-like file: per step, ProfilerStep > aten::linear > aten::addmm >
    cudaLaunchKernel on the main thread, the kernel on a GPU stream and an ac2g flow between them
    (Kineto's shape); returns how many events it holds."""
    per_step = 50.0  # us
    parts = []
    for i in range(steps):
        t = i * per_step
        parts.append(
            f'{{"ph":"X","cat":"cpu_op","name":"ProfilerStep#{i}","pid":1,"tid":1,"ts":{t},"dur":48}},'
            f'{{"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":{t + 1},"dur":40}},'
            f'{{"ph":"X","cat":"cpu_op","name":"aten::addmm","pid":1,"tid":1,"ts":{t + 2},"dur":30}},'
            f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{t + 3},"dur":5}},'
            f'{{"ph":"X","cat":"kernel","name":"sgemm","pid":0,"tid":7,"ts":{t + 10},"dur":20}},'
            f'{{"ph":"s","cat":"ac2g","name":"ac2g","id":{i},"pid":1,"tid":1,"ts":{t + 3}}},'
            f'{{"ph":"f","cat":"ac2g","name":"ac2g","id":{i},"pid":0,"tid":7,"ts":{t + 10},"bp":"e"}}')
    path.write_text('{"traceEvents":[' + ",".join(parts) + "]}")
    return 7 * steps


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
        print(f"native save:  {save_s:7.3f} s  ({mb(native)})")
        # numpy.load of the same arrays: the event columns, then every array of the trace (the native
        # file also holds the counters and the layer spans)
        raw = folder / "raw"
        raw.mkdir()
        arrays = {**{f"event_{n}": c for n, c in trace.events.items()},
                  **{f"counter{i}_{part}": getattr(c, part) for i, c in enumerate(trace.counters.values())
                     for part in ("t_ns", "value")},
                  "op_layer": trace.op_layer, "layer_start_ns": trace.layer_start_ns,
                  "layer_end_ns": trace.layer_end_ns}
        for name, a in arrays.items():
            np.save(raw / f"{name}.npy", a, allow_pickle=False)
        events = [n for n in arrays if n.startswith("event_")]

        def in_turns(names: list[str]) -> tuple[float, float]:
            """Median times of a native load and of numpy.load of ``names``, taken in turns so that
            each finds memory as the other leaves it (an allocator reusing the blocks another load
            of the same sizes just freed would flatter whichever came second)."""
            native_t, numpy_t = [], []
            for _ in range(15):
                t = time.perf_counter()
                load_traces(native)
                native_t.append(time.perf_counter() - t)
                t = time.perf_counter()
                {n: np.load(raw / f"{n}.npy", allow_pickle=False) for n in names}  # noqa: B018
                numpy_t.append(time.perf_counter() - t)
            return statistics.median(native_t), statistics.median(numpy_t)

        load_s, all_s = in_turns(list(arrays))
        _, numpy_s = in_turns(events)
        raw_mb = sum(os.path.getsize(raw / f"{n}.npy") for n in events) / 1e6
        print(f"native load:  {load_s:7.3f} s  (median of 15, in turns with numpy.load)")
        print(f"numpy.load of the {len(events)} raw event columns: {numpy_s:7.3f} s  ({raw_mb:,.1f} MB); "
              f"native load / that: {load_s / numpy_s:.2f}x")
        print(f"numpy.load of all {len(arrays)} arrays of the trace (events, counters, layers): {all_s:7.3f} s; "
              f"native load / that: {load_s / all_s:.2f}x (target <= 2x)")

        print("Chrome JSON:")
        export_s = timed(lambda: export_chrome([trace]), 1)
        print(f"  export_chrome (dict of {trace.n_events + samples:,} events): {export_s:7.3f} s")
        js = folder / "big.json"
        save_json_s = timed(lambda: save_chrome(js, [trace]), 1)
        print(f"  save_chrome:  {save_json_s:7.3f} s  ({mb(js)})")
        n_json = trace.n_events + samples
        runs = [load_chrome_alone(js) for _ in range(3)]
        load_json_s, peak_mb = min(t for t, _ in runs), max(m for _, m in runs)
        print(f"  load_chrome in a fresh process: {load_json_s:7.3f} s ({load_json_s / n_json * 1e6:.2f} s per "
              f"million events; target < 3 s), peak memory {peak_mb:,.0f} MB for all {n_json / 1e6:.2f} million "
              "(target < 1,000 MB for one million)")
        gz = folder / "big.json.gz"
        save_gz_s = timed(lambda: save_chrome(gz, [trace]), 1)
        print(f"  save_chrome .json.gz: {save_gz_s:7.3f} s  ({mb(gz)})")
        load_gz_s = timed(lambda: load_chrome(gz), 3)
        print(f"  load_chrome .json.gz: {load_gz_s:7.3f} s")
        print(f"Chrome JSON / native: save {save_json_s / save_s:.1f}x, load {load_json_s / load_s:.1f}x; "
              f"per event: save {save_json_s / (trace.n_events + samples) * 1e6:.2f} us, "
              f"load {load_json_s / (trace.n_events + samples) * 1e6:.2f} us")
        profile = folder / "profiler.json"
        n_profile = write_profiler_like(profile, MIN_EVENTS // 7 + 1)
        runs = [load_chrome_alone(profile) for _ in range(3)]
        print(f"  load_chrome of a PyTorch-like profile of {n_profile / 1e6:.2f} million events (nested 4 deep, "
              f"{n_profile // 7:,} flows; {mb(profile)}) in a fresh process: {min(t for t, _ in runs):7.3f} s, "
              f"peak memory {max(m for _, m in runs):,.0f} MB (targets < 3 s, < 1,000 MB)")


if __name__ == "__main__":
    main()
