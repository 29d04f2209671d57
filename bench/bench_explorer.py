"""Opening a big Neuron Explorer profile: 10 million instructions (and a million DMA packets) in
Parquet tables, against pyarrow's own read of the columns used.

Run: .venv/bin/python bench/bench_explorer.py [MILLIONS]
Target: a 10M-instruction profile opens in seconds (load_file in a fresh process, its peak
resident memory reported), within a few times of pyarrow.parquet.read_table of the same columns.
The profile is written as Explorer writes one: the Instruction table split into numbered files.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

T0 = 1_000_000  # the first hardware timestamp, ns
ENGINES = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync")
OPCODES = ("MATMUL", "LDWEIGHTS", "TENSOR_TENSOR", "ACTIVATE", "EVENT_SEMAPHORE", "TENSOR_SCALAR_PTR", "IOTA")
PART_ROWS = 2_500_000  # rows of one numbered file of a split table
USED = ["start_ts", "end_ts", "engine", "pcore_idx", "opcode", "layer", "adjusted_flops", "hbm_read_bytes",
        "hbm_write_bytes", "evt_wait_time_ns", "dma_wait_time_ns"]


def instructions(n: int, first: int, rng: np.random.Generator) -> pa.Table:
    """``n`` instructions of 5 engines over 200 layers, 100 ns apart on each engine."""
    engine = rng.integers(0, len(ENGINES), n)
    start = T0 + (first + np.arange(n)) * 20
    dur = rng.integers(10, 90, n)
    layer = (first + np.arange(n)) * 200 // (10 * n)
    return pa.table({
        "start_ts": start, "end_ts": start + dur, "duration_ns": dur,
        "engine": pa.DictionaryArray.from_arrays(engine.astype(np.int32), ENGINES).cast(pa.string()),
        "pcore_idx": np.zeros(n, np.int64),
        "opcode": pa.DictionaryArray.from_arrays(rng.integers(0, len(OPCODES), n).astype(np.int32), OPCODES)
        .cast(pa.string()),
        "operands": pa.nulls(n, pa.string()), "id": np.arange(first, first + n), "pc": np.arange(n),
        "bir_id": pa.array(["sg0000:1"] * 1).take(np.zeros(n, np.int64)),
        "layer": pa.array([f"layer_{i}" for i in range(200)]).take(np.minimum(layer, 199)),
        "adjusted_flops": np.where(engine == 0, 2 * 128 * 128 * 512, 0),
        "hbm_read_bytes": rng.integers(0, 4096, n), "hbm_write_bytes": np.zeros(n, np.int64),
        "evt_wait_time_ns": np.where(rng.random(n) < 0.05, 40, 0), "dma_wait_time_ns": np.zeros(n, np.int64),
    })


def write_profile(directory: Path, millions: float) -> int:
    rng = np.random.default_rng(0)
    n = int(millions * 1e6)
    directory.mkdir()
    pq.write_table(pa.table({"profile_schema_version": ["7.4.0"], "first_hw_timestamp": [T0],
                             "instance_type": ["trn1.2xlarge"], "profile_name": ["bench"]}),
                   directory / "Metadata.parquet")
    for i, first in enumerate(range(0, n, PART_ROWS)):
        pq.write_table(instructions(min(PART_ROWS, n - first), first, rng), directory / f"Instruction_{i}.parquet")
    m = n // 10
    start = T0 + np.arange(m) * 200
    pq.write_table(pa.table({"start_ts": start, "end_ts": start + 150, "duration_ns": np.full(m, 150),
                             "queue_type": pa.array(["data", "input", "output"]).take(rng.integers(0, 3, m)),
                             "queue_name": pa.array(["qSyncIO0", "qWeights1"]).take(rng.integers(0, 2, m)),
                             "pcore_idx": np.zeros(m, np.int64), "transfer_bytes": np.full(m, 2048)}),
                   directory / "DmaPacket.parquet")
    return n + m


_OPEN = """
import sys, time
from sim.io import load_file
t = time.perf_counter()
(trace,) = load_file(sys.argv[1])
seconds = time.perf_counter() - t
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1e3
print(seconds, peak, trace.n_events)
"""


def main() -> None:
    millions = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "big@latest"
        t = time.perf_counter()
        rows = write_profile(d, millions)
        disk = sum(p.stat().st_size for p in d.iterdir())
        print(f"profile: {millions:g}M instructions + {rows - int(millions * 1e6):,} DMA packets, "
              f"{disk / 1e6:,.0f} MB of Parquet (written in {time.perf_counter() - t:.1f} s)")
        t = time.perf_counter()
        for part in sorted(d.glob("Instruction_*.parquet")):
            pq.read_table(part, columns=USED)
        pq.read_table(d / "DmaPacket.parquet")
        arrow_s = time.perf_counter() - t
        print(f"pyarrow read_table of the columns used: {arrow_s:.2f} s")
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", _OPEN, str(d)], check=True, capture_output=True,
                                 text=True).stdout.split()
            runs.append((float(out[0]), float(out[1]), int(out[2])))
        seconds, peak = min(r[0] for r in runs), max(r[1] for r in runs)
        print(f"load_file in a fresh process: {seconds:.2f} s ({seconds / rows * 1e6 * 1e3:.0f} ms per million "
              f"rows; {seconds / arrow_s:.1f}x pyarrow's read), peak memory {peak:,.0f} MB, "
              f"{runs[0][2]:,} events")


if __name__ == "__main__":
    main()
