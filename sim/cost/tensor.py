"""TensorE: matmuls and transposes tiled onto the systolic array, as the NKI ISA describes it.

``nc_matmul(stationary[K, M], moving[K, N])`` loads a stationary tile of at most ``rows``
contraction partitions by ``cols`` columns into the PE array and streams a moving tile of at
most ``moving_free_max`` columns through it, accumulating ``[M, N]`` in a PSUM bank. What one
matmul op costs the array:

- **moving-operand width**: one instruction takes ``max(min(mm_init_cycles, N_stationary),
  N_moving)`` cycles (the ISA's average cost of back-to-back ``nc_matmul``): narrow moving tiles
  (a decode step's few tokens) pay the instruction turnaround unless the stationary tile is
  narrower still;
- **stationary loads**: a LoadStationary (``load_stationary_cycles`` for a full ``cols``-wide
  tile, proportionally less for a narrower one: fast weight load moves four columns a cycle)
  runs in the background behind the instructions of the previous stationary tile; only what it
  outlasts them is exposed;
- **contraction and column fill**: a tile with fewer than ``rows`` contraction partitions or
  ``cols`` stationary columns leaves PEs idle for the whole instruction (head width 64 uses half
  the rows); a dtype packs ``k_pack`` contraction rows per PE (FP8 double-row mode: 2, MX: 4);
- **rate per dtype**: instruction time scales by ``k_pack / rate`` (FP32 runs in four passes);
- **PSUM accumulation groups**: an output tile accumulates over all contraction tiles in one
  bank, so the number of output tiles is the number of PSUM evacuations;
- **fill and drain**: the last result of an instruction leaves the array ``fill_drain_cycles``
  after it was issued; that latency delays the consumer, not the array (see :mod:`sim.lowering`).

The compiler picks whichever orientation (``m`` or ``n`` stationary) keeps the array busy for
fewer cycles. Transposes run on the array as matmuls against an identity (``nc_transpose``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sim.hardware.chip import TensorEngine


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class MatmulPlan:
    """How one matmul (or transpose) op maps onto the array."""

    stationary: int  # size of the dimension held stationary (output partitions)
    moving: int  # size of the streamed dimension (output free axis)
    k_tiles: int
    s_tiles: int
    f_tiles: int
    instructions: int  # MultiplyMoving instructions
    cycles: float  # cycles the array is active (MultiplyMoving plus exposed LoadStationary)
    psum_tiles: int  # output tiles accumulated in PSUM banks, one evacuation each
    psum_free: int  # elements per partition over all output tiles (what evacuations read)


def _moving_cycles(free: int, stationary_cols: int, te: TensorEngine) -> int:
    """Cycles of the instructions streaming all moving slices through one stationary tile of
    ``stationary_cols`` columns: ``max(min(mm_init, stationary_cols), slice)`` each."""
    floor = min(te.mm_init_cycles, stationary_cols)
    full, rest = divmod(free, te.moving_free_max)
    cycles = full * max(te.moving_free_max, floor)
    if rest:
        cycles += max(rest, floor)
    return cycles


def _plan(te: TensorEngine, stationary: int, moving: int, k: int, count: int, dtype: str) -> MatmulPlan:
    pack = te.k_pack[dtype]
    k_tiles = ceil_div(k, te.rows * pack)
    s_tiles = ceil_div(stationary, te.cols)
    f_tiles = ceil_div(moving, te.moving_free_max)
    width = min(stationary, te.cols)
    mm = _moving_cycles(moving, width, te) * pack / te.rate[dtype]
    exposed_ls = max(0.0, te.load_stationary_cycles * width / te.cols - mm)
    tiles = count * k_tiles * s_tiles
    return MatmulPlan(stationary, moving, k_tiles, s_tiles, f_tiles, tiles * f_tiles, tiles * (mm + exposed_ls),
                      count * s_tiles * f_tiles, count * s_tiles * moving)


def tiles_per_bank(plan: MatmulPlan, bank_elems: int) -> int:
    """Output tiles of ``plan`` that one PSUM bank of ``bank_elems`` FP32 elements a partition holds
    side by side: a tile narrower than a bank (an attention matmul over a few positions) shares it."""
    width = ceil_div(plan.psum_free, max(plan.psum_tiles, 1))  # one tile's elements a partition
    return max(1, bank_elems // max(width, 1))


@lru_cache(maxsize=4096)
def plan_matmul(te: TensorEngine, m: int, k: int, n: int, count: int, dtype: str,
                wait_cycles: float = 0.0) -> MatmulPlan:
    """The cheaper of the two orientations of ``count`` x ``[m,k] @ [k,n]``, counting the
    ``wait_cycles`` the array waits before each instruction (compiled code, see
    :mod:`sim.lowering`): the compiler issues fewer, wider instructions when waits dominate."""
    a = _plan(te, m, n, k, count, dtype)
    b = _plan(te, n, m, k, count, dtype)
    return a if a.cycles + wait_cycles * a.instructions <= b.cycles + wait_cycles * b.instructions else b


@lru_cache(maxsize=4096)
def plan_transpose(te: TensorEngine, rows: int, cols: int, count: int) -> MatmulPlan:
    """``count`` transposes of a ``[rows, cols]`` tensor laid out with ``rows`` on partitions.

    Each ``[p, c]`` block (``p <= rows``, ``c <= cols`` of the array) is the stationary operand
    of one matmul against a ``[p, p]`` identity, which streams ``p`` columns: the ISA's
    ``max(p, min(64, c))`` cycles per block (``nc_transpose`` on TensorE). The transposed blocks
    of one column tile fill PSUM banks ``moving_free_max`` elements wide.
    """
    col_tiles = ceil_div(cols, te.cols)
    row_tiles = ceil_div(rows, te.rows)
    full_cols, rest_cols = divmod(cols, te.cols)
    cycles = full_cols * _moving_cycles_blocks(rows, te.cols, te)
    if rest_cols:
        cycles += _moving_cycles_blocks(rows, rest_cols, te)
    cycles = count * cycles / te.rate["bf16"]
    return MatmulPlan(cols, rows, row_tiles, col_tiles, row_tiles, count * col_tiles * row_tiles, cycles,
                      count * col_tiles * ceil_div(rows, te.moving_free_max), count * col_tiles * rows)


def _moving_cycles_blocks(rows: int, cols: int, te: TensorEngine) -> int:
    """Cycles to transpose one column tile ``cols`` wide: one identity matmul per block of at
    most ``rows`` of the array's partitions."""
    floor = min(te.mm_init_cycles, cols)
    full, rest = divmod(rows, te.rows)
    return full * max(te.rows, floor) + (max(rest, floor) if rest else 0)
