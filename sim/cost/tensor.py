"""TensorE: a matmul tiled onto the systolic array, stationary and moving operands, PSUM tiles.

A ``[m,k] @ [k,n]`` matmul puts one operand (``stationary``, at most ``cols`` wide) into the PE
array and streams the other (``moving``, at most ``moving_free_max`` wide) through it, over
``rows`` contraction partitions at a time; partial sums accumulate in a PSUM bank. Each
MultiplyMoving instruction costs ``max(free size, mm_init_cycles)`` cycles at the BF16 rate;
a LoadStationary runs in the background and only its excess over the matmul it hides behind
is exposed. The compiler picks whichever of ``m`` and ``n`` streams faster.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sim.hardware.chip import TensorEngine


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class MatmulPlan:
    """How one matmul op maps onto the array."""

    stationary: int  # size of the dimension held stationary (output partitions)
    moving: int  # size of the streamed dimension (output free axis)
    k_tiles: int
    s_tiles: int
    f_tiles: int
    instructions: int
    cycles: float

    @property
    def psum_tiles(self) -> int:
        """Output tiles accumulated in PSUM (one bank each)."""
        return self.instructions // self.k_tiles


def _moving_cycles(free: int, te: TensorEngine) -> int:
    """Cycles of MultiplyMoving over all moving tiles of one stationary tile (BF16 rate)."""
    full, rest = divmod(free, te.moving_free_max)
    cycles = full * max(te.moving_free_max, te.mm_init_cycles)
    if rest:
        cycles += max(rest, te.mm_init_cycles)
    return cycles


def _plan(te: TensorEngine, stationary: int, moving: int, k: int, count: int, rate: float) -> MatmulPlan:
    k_per_instr = int(te.rows * max(rate, 1.0))
    k_tiles = ceil_div(k, k_per_instr)
    s_tiles = ceil_div(stationary, te.cols)
    f_tiles = ceil_div(moving, te.moving_free_max)
    mm = _moving_cycles(moving, te) / min(rate, 1.0)
    exposed_ls = max(0.0, te.load_stationary_cycles - mm)
    cycles = count * k_tiles * s_tiles * (mm + exposed_ls)
    return MatmulPlan(stationary, moving, k_tiles, s_tiles, f_tiles,
                      count * k_tiles * s_tiles * f_tiles, cycles)


@lru_cache(maxsize=4096)
def plan_matmul(te: TensorEngine, m: int, k: int, n: int, count: int, dtype: str) -> MatmulPlan:
    """The cheaper of the two orientations of ``count`` x ``[m,k] @ [k,n]``."""
    rate = te.rate[dtype]
    a = _plan(te, m, n, k, count, rate)
    b = _plan(te, n, m, k, count, rate)
    return a if a.cycles <= b.cycles else b
