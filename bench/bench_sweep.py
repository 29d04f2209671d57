"""Sweep speed: configurations per second of bert-base in one process, on the local process pool
and on a local Dask cluster of two workers, and what a cluster of N workers would do; and the time a
sweep spends writing its results, appended to its journal against the whole file rewritten at every
flush (as sweeps did before the journal).

Run: .venv/bin/python bench/bench_sweep.py      (target: 1,000 configurations in under 60 s on the pool)
     .venv/bin/python bench/bench_sweep.py --writing      (the writing figures alone, in a few seconds)
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

from sim.sweep import Journal, grid, run_point, sweep, write_results

INSTANCES = ["inf1.xlarge", "inf2.xlarge", "inf2.48xlarge", "trn1.2xlarge", "trn1.32xlarge"]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
SEQS = [16, 32, 64, 96, 128, 256, 384, 512]
DTYPES = ["bf16", "fp16", "fp32"]  # 5 x 10 x 8 x 3 = 1,200 configurations of bert-base


def _points(n: int):
    return grid(["bert-base"], INSTANCES, BATCHES, SEQS, dtypes=DTYPES)[:n]


def _rate(points, **kwargs) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        sweep(points, os.path.join(tmp, "r.parquet"), **kwargs)
        return len(points) / (time.perf_counter() - start)


def _write_times(rows: list[dict], flush_rows: int) -> tuple[float, float]:
    """Seconds spent writing ``rows`` arriving ``flush_rows`` between flushes: the whole file rewritten
    at each flush, and the journal appended at each flush with the results file written once at the end."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp, "whole.parquet")
        start = time.perf_counter()
        for n in range(flush_rows, len(rows) + flush_rows, flush_rows):
            write_results(target, rows[:n])
        whole = time.perf_counter() - start
        target, start = Path(tmp, "journal.parquet"), time.perf_counter()
        journal = Journal(target)
        for n in range(0, len(rows), flush_rows):
            journal.append(rows[n:n + flush_rows])
        write_results(target, rows)
        journal.remove()
        return whole, time.perf_counter() - start


def writing() -> None:
    base = [run_point(p) for p in _points(40)]  # rows of real configurations (some cannot run: fp8 on inf1)
    # a pool of 2 cores finishes ~50 configurations between flushes 2 s apart, a cluster of 8 workers ~200
    for count, flush_rows in ((1_000, 16), (1_000, 50), (10_000, 200)):
        rows = [{**r, "config_id": f"{r['config_id']}|{i}"} for i, r in zip(range(count), itertools.cycle(base))]
        whole, journal = _write_times(rows, flush_rows)
        print(f"writing {count:7,} rows, {flush_rows:5,} a flush: rewritten whole {whole * 1e3:8.1f} ms, "
              f"journal {journal * 1e3:7.1f} ms ({whole / journal:5.1f}x less)")


def main() -> None:
    if sys.argv[1:] == ["--writing"]:
        writing()
        return
    from distributed import LocalCluster

    cores = os.cpu_count() or 1
    one = _rate(_points(100), workers=1)
    print(f"one process:            {one:7.1f} configurations/s")
    points = _points(1000)
    start = time.perf_counter()
    pool = _rate(points, workers=cores)
    print(f"process pool ({cores} cores): {pool:7.1f} configurations/s, 1,000 in {time.perf_counter() - start:.1f} s "
          f"(target < 60 s, ratio {(time.perf_counter() - start) / 60:.2f}); {pool / one:.2f}x one process")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = _rate(points, engine="dask", address=cluster.scheduler_address)
    print(f"local Dask, 2 workers:  {dask:7.1f} configurations/s ({dask / one:.2f}x one process)")
    # each configuration is independent and a task of up to 16 of them costs the scheduler about a
    # millisecond, so a cluster scales with its workers until the scheduler's ~1,000 tasks/s bind
    for workers in (16, 64, 256):
        projected = min(workers * one, 1000 * 16)
        print(f"projected Dask cluster of {workers:3d} workers: {projected:9.0f} configurations/s "
              f"(assumes {one:.1f}/s per worker, as one process here, and at most 1,000 tasks/s of 16)")
    writing()


if __name__ == "__main__":
    main()
