"""Fitting the named residuals of ``efficiency.toml`` to published measurements.

Each residual is the one unknown of one mechanism, fitted on the rows that mechanism dominates
(chosen by what the rows' publications state, never by their measured values): the DMA run
length of weight streams on the memory-bound rows, the runtime's cost per execution on the
one-sequence encoder rows, the TensorE issue overhead of compiled code on the compute-bound rows,
a server's request handling on the serving stacks' time-to-first-token rows, the round trip of
logits sampled on the host on the rows whose stack samples there, the KV cache's
DMA run on the rows whose decode steps read large caches, the
collectives' fixed cost on the rows whose tensor-parallel copy spans chips, the host-device copy
rate on the Batch rows (Trainium1 its own, on its rows), the rate of faulting in fresh host pages
on the rows whose outputs exceed the host allocator's threshold, the host's generate loop on the
encoder-decoder rows' time per token. A coordinate search
minimises each residual's median absolute error on its rows in turn, a few rounds.

:func:`leave_one_generation_out` fits without one chip generation's rows and reports that
generation's error with the parameters fitted on the others.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sim.hardware.chip import load_toml
from sim.host import LOGIT_BYTES
from sim.stacks import samples_on_host, stack_of
from sim.validate import Row, validate
from sim.workloads import get_model

WORKERS = os.cpu_count() or 1  # the simulations of a fit run on every core of this machine
# rows whose median absolute error moves less than this (0.1 percentage point) over a residual's
# whole range do not tell its value: Inferentia1's encoder Batch rows and the host-copy rate
# (0.06 point from 1 to 32 GB/s), which would otherwise pull it to either end of its range
UNINFORMED = 1e-3
# the logits a step returns for its sampling to tell the rate at which the host samples them: a
# batch of 8 at Llama-2's vocabulary of 32,000 (the steps of smaller ones spend a percent on it)
SAMPLED_BYTES = 1e6


def _decode(row: Row) -> bool:
    return row.config is not None and row.config.mode in ("decode", "serve")


def _encoder(row: Row) -> bool:
    return row.config is not None and row.config.mode == "inference"


def _host_logits(row: Row) -> float:
    """The bytes of logits each step of ``row`` returns to the host to sample, 0 when its graph
    samples on the device."""
    cfg = row.config
    if not samples_on_host(cfg.stack, cfg.sampling):
        return 0.0
    return float(cfg.batch * get_model(cfg.model).vocab * LOGIT_BYTES)


def _context(row: Row) -> int:
    """The positions a decode step of ``row`` attends at most: its compiled length, else its prompt
    and output."""
    return row.config.max_seq or (row.config.seq or 0) + row.config.new_tokens


@dataclass(frozen=True)
class Residual:
    """A named residual, the rows it is fitted on (in words and as a selection), and its range."""

    name: str
    rows: str
    select: Callable[[Row], bool]
    low: float
    high: float
    log: bool = False
    chip: str = ""  # a residual of one generation only (its table in efficiency.toml)

    @property
    def key(self) -> str:
        """The residual's name, with its generation's for one of a generation's own."""
        return f"{self.name}[{self.chip}]" if self.chip else self.name


RESIDUALS: tuple[Residual, ...] = (
    Residual("weight_descriptor_bytes", "time per output token at batch 1 (weights stream once per token)",
             lambda r: _decode(r) and r.metric == "tpot_ms" and r.config.batch == 1, 512, 8192, log=True),
    Residual("kv_descriptor_bytes", "time per output token of batches of 8 or more or contexts of 2,048 positions or "
             "more (a step reads much of its KV cache)",
             lambda r: _decode(r) and r.metric == "tpot_ms" and (r.config.batch >= 8 or _context(r) >= 2048),
             256, 8192, log=True),
    Residual("launch_overhead_s", "encoder latency at batch 1 (Real Time)",
             lambda r: _encoder(r) and r.metric == "latency_ms" and r.config.batch == 1, 0.0, 4e-4),
    Residual("mm_wait_cycles", "encoder and vision throughput at batch 8 and more, and training throughput",
             lambda r: (_encoder(r) and r.metric == "throughput" and r.config.batch >= 8) or r.metric == "train_per_s",
             0.0, 1024.0),
    Residual("mm_wait_cycles", "Trainium2's time to first token (its prompts encoded by compiled matmuls)",
             lambda r: r.generation == "trn2" and _decode(r) and r.metric == "ttft_ms", 0.0, 1024.0, chip="trn2"),
    Residual("server_request_s", "time to first token of the serving stacks' rows (vLLM on Neuron, optimum-neuron)",
             lambda r: _decode(r) and r.metric == "ttft_ms" and stack_of(r.config.stack).server,
             0.0, 0.06),
    Residual("host_sampling_bytes_per_s", "time per output token of the rows sampling on the host whose steps "
             "return at least 1 MB of logits (Transformers NeuronX at batch 8 and more, optimum-neuron's CPU sampling)",
             lambda r: _decode(r) and r.metric == "tpot_ms" and _host_logits(r) >= SAMPLED_BYTES, 1e8, 1e10, log=True),
    Residual("collective_setup_s", "time per output token of copies spanning several chips",
             lambda r: _decode(r) and r.metric == "tpot_ms" and (r.config.cores or 1) > 2, 0.0, 2e-4),
    Residual("host_copy_bytes_per_s", "encoder and vision throughput at batch 8 and more on the generations without "
             "their own rate (inf2.xlarge's rows)",
             lambda r: _encoder(r) and r.metric == "throughput" and r.config.batch >= 8 and r.generation != "trn1",
             1e9, 3.2e10, log=True),
    Residual("host_copy_bytes_per_s", "Trainium1's encoder and vision throughput at batch 8 and more "
             "(trn1.2xlarge's rows)",
             lambda r: _encoder(r) and r.metric == "throughput" and r.config.batch >= 8 and r.generation == "trn1",
             1e9, 3.2e10, log=True, chip="trn1"),
    Residual("host_fault_bytes_per_s", "latency of the models returning more than 32 MiB an inference "
             "(xlm-roberta-base's masked-LM logits: 128 MB a sequence)",
             lambda r: _encoder(r) and r.metric == "latency_ms" and r.config.head == "mlm", 1e9, 1.2e10, log=True),
    Residual("generate_step_s", "per-token latency of the encoder-decoder pages (transformers' generate, 4 beams)",
             lambda r: _decode(r) and r.metric == "per_token_ms", 0.0, 1e-2),
    Residual("core_dma_bytes_per_s", "Inferentia1 latency at batch 1 (one copy streaming its weights)",
             lambda r: r.generation == "inf1" and _encoder(r) and r.metric == "latency_ms" and r.config.batch == 1,
             5e9, 6e10, log=True, chip="inf1"),
)


def current_values() -> dict[str, float]:
    """The residuals as the data file has them (the default table, or their generation's)."""
    tables = load_toml("efficiency.toml")
    return {r.key: float({**tables["default"], **tables.get(r.chip, {})}[r.name]["value"]) for r in RESIDUALS}


def _overrides(values: dict[str, float]) -> dict[str, dict[str, float]]:
    """Residual values by chip key: a generation's own residuals only for it, the rest for all."""
    tables: dict[str, dict[str, float]] = {"default": {}}
    for r in RESIDUALS:
        if r.key in values:
            tables.setdefault(r.chip or "default", {})[r.name] = values[r.key]
    return tables


def median_error(rows: Sequence[Row], values: dict[str, float]) -> float:
    """The median absolute error of ``rows`` ' independent points with the residuals at ``values``."""
    errors = [abs(r.error) for r in validate(rows, _overrides(values), WORKERS) if r.counted]
    return statistics.median(errors) if errors else float("nan")


def _grid(lo: float, hi: float, points: int, log: bool) -> np.ndarray:
    if log:
        return np.geomspace(max(lo, 1e-12), hi, points)
    return np.linspace(lo, hi, points)


def fit_one(res: Residual, rows: Sequence[Row], values: dict[str, float], points: int = 7) -> float:
    """The value of ``res`` that minimises its rows' median absolute error, the others held."""
    chosen = [r for r in rows if r.independent and r.config is not None and res.select(r)]
    if not chosen:
        return values[res.key]

    def error(v: float) -> float:
        err = median_error(chosen, {**values, res.key: float(v)})
        return float("inf") if np.isnan(err) else err

    lo, hi = res.low, res.high
    best = values[res.key]
    for _ in range(2):  # a grid, then a finer one around its best point
        grid = _grid(lo, hi, points, res.log)
        scores = [error(v) for v in grid]
        if max(scores) - min(scores) < UNINFORMED:  # the rows hardly depend on it: no reason to move it
            return best
        i = int(np.argmin(scores))
        best = float(grid[i])
        lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    return best


def fit(rows: Sequence[Row], start: dict[str, float] | None = None, rounds: int = 2) -> dict[str, float]:
    """Every residual fitted on its rows in turn, ``rounds`` times over."""
    values = dict(start or current_values())
    for _ in range(rounds):
        for res in RESIDUALS:
            values[res.key] = fit_one(res, rows, values)
    return values


@dataclass(frozen=True)
class HeldOut:
    generation: str
    values: dict[str, float]  # fitted without the generation's rows
    error_fitted_elsewhere: float  # the generation's median absolute error with those values
    error_in_sample: float  # ... with the values fitted on every row (from the same start)
    error_data_file: float  # ... and with the data file's values


def middle(res: Residual) -> float:
    """The middle of a residual's range (geometric for one searched on a log scale): where a fit
    that must not know the measurements starts it."""
    return float(np.sqrt(max(res.low, 1e-12) * res.high)) if res.log else (res.low + res.high) / 2


def middle_start() -> dict[str, float]:
    """Every residual in the middle of its range: where a fit starts that must not depend on values
    fitted before (the data file's, fitted on every row), so that its result is the same whoever
    runs it and a fit without some rows is comparable with one on all of them."""
    return {r.key: middle(r) for r in RESIDUALS}


def held_out_start(generation: str, fitted_elsewhere: dict[str, float] | None = None) -> dict[str, float]:
    """The residuals a fit without ``generation`` 's rows starts from (``fitted_elsewhere`` None)
    or ends with: every residual starts in the middle of its range, so that one none of the other
    rows depends on stays there rather than at a value fitted on the held-out rows; a residual of
    the held-out generation alone cannot be fitted elsewhere and takes what its shared counterpart
    was fitted to (the data file's [default] value where there is none)."""
    default = load_toml("efficiency.toml")["default"]
    values = dict(fitted_elsewhere) if fitted_elsewhere is not None else middle_start()
    for r in RESIDUALS:
        if r.chip == generation:
            values[r.key] = values.get(r.name, float(default[r.name]["value"]))
    return values


def leave_one_generation_out(rows: Sequence[Row], generations: Sequence[str], in_sample: dict[str, float]
                             ) -> list[HeldOut]:
    """For each generation, fit on the other generations' rows and measure it with that fit, with
    ``in_sample`` (fitted on every row) and with the data file's values."""
    out = []
    for gen in generations:
        others = [r for r in rows if r.generation != gen]
        mine = [r for r in rows if r.generation == gen]
        values = held_out_start(gen, fit(others, held_out_start(gen)))
        errors = [median_error(mine, v) for v in (values, in_sample, current_values())]
        out.append(HeldOut(gen, values, *errors))
    return out
