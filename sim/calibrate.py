"""Fitting the named residuals of ``efficiency.toml`` to published measurements.

Each residual is the one unknown of one mechanism, fitted on the rows that mechanism dominates
(chosen by what the rows' publications state, never by their measured values): the DMA run
length of weight streams on the memory-bound rows, the runtime's cost per execution on the
one-sequence encoder rows, the TensorE issue overhead of compiled code on the compute-bound rows,
the serving stack's request handling on the short-prompt time-to-first-token rows, the
collectives' fixed cost on the rows whose tensor-parallel copy spans chips. A coordinate search
minimises each residual's median absolute error on its rows in turn, a few rounds.

:func:`leave_one_generation_out` fits without one chip generation's rows and reports that
generation's error with the parameters fitted on the others.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from sim.hardware.chip import Efficiency, all_chips
from sim.validate import Result, Row, validate


def _decode(row: Row) -> bool:
    return row.config is not None and row.config.mode == "decode"


def _encoder(row: Row) -> bool:
    return row.config is not None and row.config.mode == "inference"


def _prompt(row: Row) -> int:
    return row.config.seq or 0


@dataclass(frozen=True)
class Residual:
    """A named residual, the rows it is fitted on (in words and as a selection), and its range."""

    name: str
    rows: str
    select: Callable[[Row], bool]
    low: float
    high: float
    log: bool = False


RESIDUALS: tuple[Residual, ...] = (
    Residual("weight_descriptor_bytes", "time per output token at batch 1 (weights stream once per token)",
             lambda r: _decode(r) and r.metric == "tpot_ms" and r.config.batch == 1, 512, 8192, log=True),
    Residual("launch_overhead_s", "encoder latency at batch 1 (Real Time)",
             lambda r: _encoder(r) and r.metric == "latency_ms" and r.config.batch == 1, 0.0, 4e-4),
    Residual("mm_issue_cycles", "encoder and vision throughput at batch 8 and more, and training throughput",
             lambda r: (_encoder(r) and r.metric == "throughput" and r.config.batch >= 8) or r.metric == "train_per_s",
             0.0, 1024.0),
    Residual("request_overhead_s", "time to first token of prompts of at most 512 tokens",
             lambda r: _decode(r) and r.metric == "ttft_ms" and _prompt(r) <= 512, 0.0, 0.06),
    Residual("collective_setup_s", "time per output token of copies spanning several chips",
             lambda r: _decode(r) and r.metric == "tpot_ms" and (r.config.cores or 1) > 2, 0.0, 2e-4),
)


def base_efficiency(chip_key: str) -> Efficiency:
    return all_chips()[chip_key].efficiency


def current_values() -> dict[str, float]:
    """The residuals as the data file has them (the default table)."""
    eff = base_efficiency("trn1")
    return {r.name: float(getattr(eff, r.name)) for r in RESIDUALS}


def _overrides(values: dict[str, float]) -> Callable[[str], Efficiency]:
    return lambda chip: replace(base_efficiency(chip), **values)


def _median_error(results: Sequence[Result]) -> float:
    errors = [abs(r.error) for r in results if r.counted]
    return statistics.median(errors) if errors else float("nan")


def _grid(lo: float, hi: float, points: int, log: bool) -> np.ndarray:
    if log:
        return np.geomspace(max(lo, 1e-12), hi, points)
    return np.linspace(lo, hi, points)


def fit_one(res: Residual, rows: Sequence[Row], values: dict[str, float], points: int = 7) -> float:
    """The value of ``res`` that minimises its rows' median absolute error, the others held."""
    chosen = [r for r in rows if r.independent and r.config is not None and res.select(r)]
    if not chosen:
        return values[res.name]

    def error(v: float) -> float:
        err = _median_error(validate(chosen, _overrides({**values, res.name: float(v)})))
        return float("inf") if np.isnan(err) else err

    lo, hi = res.low, res.high
    best = values[res.name]
    for _ in range(2):  # a grid, then a finer one around its best point
        grid = _grid(lo, hi, points, res.log)
        scores = [error(v) for v in grid]
        i = int(np.argmin(scores))
        best = float(grid[i])
        lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    return best


def fit(rows: Sequence[Row], start: dict[str, float] | None = None, rounds: int = 2) -> dict[str, float]:
    """Every residual fitted on its rows in turn, ``rounds`` times over."""
    values = dict(start or current_values())
    for _ in range(rounds):
        for res in RESIDUALS:
            values[res.name] = fit_one(res, rows, values)
    return values


@dataclass(frozen=True)
class HeldOut:
    generation: str
    values: dict[str, float]  # fitted without the generation's rows
    error_fitted_elsewhere: float  # the generation's median absolute error with those values
    error_in_sample: float  # ... and with the values fitted on every row


def leave_one_generation_out(rows: Sequence[Row], generations: Sequence[str], in_sample: dict[str, float]
                             ) -> list[HeldOut]:
    """For each generation, fit on the other generations' rows and measure it with that fit."""
    out = []
    for gen in generations:
        others = [r for r in rows if r.generation != gen]
        mine = [r for r in rows if r.generation == gen]
        values = fit(others, in_sample)
        out.append(HeldOut(gen, values, _median_error(validate(mine, _overrides(values))),
                           _median_error(validate(mine, _overrides(in_sample)))))
    return out
