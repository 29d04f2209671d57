"""Sweep speed: configurations per second of bert-base in one process, on the local process pool
and on a local Dask cluster of two workers, and what a cluster of N workers would do.

Run: .venv/bin/python bench/bench_sweep.py      (target: 1,000 configurations in under 60 s on the pool)
"""

from __future__ import annotations

import os
import tempfile
import time

from sim.sweep import grid, sweep

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


def main() -> None:
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


if __name__ == "__main__":
    main()
