"""Opening a big Neuron Explorer profile: 10 million instructions (and a million DMA packets) in
Parquet tables, against pyarrow's own read of the columns used.

Run: .venv/bin/python bench/bench_explorer.py [MILLIONS]   (or: bench_explorer.py strip)
Target: a 10M-instruction profile opens in seconds (load_file in a fresh process, its peak
resident memory reported), within a few times of pyarrow.parquet.read_table of the same columns.
The profile is written as Explorer writes one: the Instruction table split into numbered files.

Then the Ranks strip of many ranks' profiles (offscreen): a redraw after a zoom, 4 ranks of 2,500
collectives and 64 of 4,700 (300K bars), at the whole span and zoomed in 10x and 1000x, against
pyqtgraph's BarGraphItem of the same bars (as the strip drew them before). Target: a frame (16 ms).
"""

from __future__ import annotations

import os
import statistics
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


def rank_traces(ranks: int, per_rank: int, rng: np.random.Generator) -> list:
    """``ranks`` ranks of ``per_rank`` collectives each, 10 us apart, each rank arriving up to 2 us
    late, with a MATMUL before each collective on its Tensor engine."""
    from sim.trace import Trace, Track

    tracks = (Track("NC0 Tensor", "tensor", 0), Track("NC0 CC", "collective", 0))
    out = []
    for _ in range(ranks):
        arrive = np.arange(per_rank) * 10_000.0 + rng.uniform(0, 2_000, per_rank)
        start = np.concatenate([arrive - 3_000, arrive])
        dur = np.concatenate([np.full(per_rank, 2_500.0), 12_000.0 - arrive % 10_000 - 4_000])
        n = len(start)
        events = {"track": np.repeat(np.arange(2, dtype=np.int16), per_rank), "start_ns": start, "dur_ns": dur,
                  "op": np.repeat(np.arange(2, dtype=np.int32), per_rank), "layer": np.zeros(n, np.int32),
                  "flops": np.zeros(n), "bytes": np.zeros(n)}
        out.append(Trace(meta={"model": "ranks"}, tracks=tracks, events=events, op_names=("MATMUL", "AllReduce"),
                         op_layer=np.zeros(2, np.int64), layer_names=("layer_0",), layer_kinds=("other",),
                         layer_start_ns=np.zeros(1), layer_end_ns=np.array([start.max() + 20_000.0])))
    return out


def strip_figures() -> None:
    """The Ranks strip's redraw after a zoom: its bars as drawn now and as BarGraphItem drew them."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    from neuronviz.widgets.ranks import COLLECTIVE_COLOR, COLLECTIVE_EDGE, COLLECTIVE_HEIGHT, RankStrip
    from sim.ranks import collectives

    app = QApplication.instance() or QApplication([])
    rng = np.random.default_rng(0)
    print("Ranks strip (1600 x 240 px): redraw after a zoom, median of 15 (ms); bars as drawn now / BarGraphItem")
    for ranks, per_rank in ((4, 2_500), (64, 4_700)):
        traces = rank_traces(ranks, per_rank, rng)
        strip = RankStrip()
        strip.resize(1600, 240)
        strip.show()
        strip.set_ranks([f"r{r}" for r in range(ranks)], traces, collectives(traces), np.ones(ranks))
        app.processEvents()
        span = per_rank * 10_000.0
        new = strip.bars
        old = pg.BarGraphItem(x0=np.concatenate([b[0] for b in new.rows]), x1=np.concatenate([b[1] for b in new.rows]),
                              y=np.repeat(np.arange(ranks, dtype=np.float64), [len(b[0]) for b in new.rows]),
                              height=COLLECTIVE_HEIGHT, brush=COLLECTIVE_COLOR, pen=pg.mkPen(COLLECTIVE_EDGE))
        figures = []
        for zoom in (1, 10, 1000):
            times = {}
            for name, item in (("now", new), ("BarGraphItem", old)):
                strip.removeItem(strip.bars)
                strip.bars = item
                strip.addItem(item)
                samples = []
                for k in range(15):
                    a = span * (0.3 + 0.01 * k) * (zoom > 1)
                    strip.setXRange(a, a + span / zoom, padding=0)
                    t = time.perf_counter()
                    strip.grab()
                    samples.append((time.perf_counter() - t) * 1e3)
                times[name] = statistics.median(samples)
            figures.append(f"{zoom}x {times['now']:.1f} / {times['BarGraphItem']:.1f} "
                           f"({times['BarGraphItem'] / times['now']:.1f}x)")
        print(f"  {ranks} ranks x {per_rank:,} collectives ({ranks * per_rank:,} bars): " + "; ".join(figures))
        strip.close()


def main() -> None:
    if sys.argv[1:] == ["strip"]:
        strip_figures()
        return
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
    strip_figures()


if __name__ == "__main__":
    main()
