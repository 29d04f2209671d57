"""Vector, Scalar and GpSimd engines: 128 partitions processed in parallel.

An instruction over ``[p partitions, f free elements]`` costs
``max(MIN_II, f * partitions / elems_per_cycle)`` cycles (the NKI ISA's estimated instruction
cost, ``MIN_II`` being the engine's minimum initiation interval ``instr_overhead_cycles``),
whatever ``p`` is: data that spans fewer than 128 partitions leaves lanes idle. The compiler
lays a 2-D tensor ``[rows, cols]`` with the longer axis on partitions when that fills more of
them, and cuts the free axis into instructions of at most ``free_max`` elements.
"""

from __future__ import annotations

from sim.cost.tensor import ceil_div
from sim.hardware.chip import StreamEngine


def layout(elems: int, rows: int, partitions: int, free_max: int) -> tuple[int, int]:
    """Per-partition free size and instruction count of one pass over ``[rows, elems/rows]``."""
    rows = max(rows, 1)
    cols = ceil_div(elems, rows)
    used = min(partitions, max(rows, cols))
    free = ceil_div(elems, used)
    return free, ceil_div(free, free_max)


def stream_seconds(engine: StreamEngine, partitions: int, free: int, instructions: int, passes: float,
                   dtype: str) -> float:
    """Seconds of ``passes`` passes of ``instructions`` instructions covering ``free`` elements."""
    if free <= 0:
        return 0.0
    per_lane_per_cycle = engine.elems_per_cycle[dtype] / partitions
    per_instruction = max(engine.instr_overhead_cycles, free / instructions / per_lane_per_cycle)
    return passes * instructions * per_instruction / engine.clock_hz
