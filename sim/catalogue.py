"""The metric catalogue: every figure a view, report or record gives of a run, defined once.

Each :class:`Metric` has its name (the key of ``simulate --json``, a sweep's column, a CSV's
header), a label and unit for tables and headers, its scope (what it is of: one request, the
model copy, the first NeuronCore, the instance or every instance of the run), how it is computed
from the trace's events, and its Neuron Explorer name where the meaning is the same (the
``report`` summary's keys). :func:`measure` computes them all from :func:`sim.metrics.compute_metrics`;
:func:`text` writes one as every view writes it. A view, report or file never computes a figure of
its own: it reads this.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sim.metrics import ENGINES, RunMetrics, compute_metrics
from sim.trace import Trace

REQUEST, COPY, CORE, INSTANCE, RUN = "request", "copy", "core", "instance", "run"
SCOPE_LABELS = {REQUEST: "request", COPY: "copy", CORE: "NC0", INSTANCE: "instance", RUN: "run"}
ALL_MODES = ("inference", "decode", "serve", "training", "imported")
GENERATING = ("decode", "serve")
SIMULATED = ("inference", "decode", "serve", "training")
SERVING_FIGURES = (("ttft", "TTFT", "times to first token"), ("tpot", "TPOT", "times per output token"),
                   ("itl", "ITL", "gaps between successive tokens"), ("e2e", "e2e", "end-to-end latencies"))
ENGINE_LABELS = {"tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd"}
MB = ("MB", 1e6)
# what a run's throughput counts, by mode
ITEMS = {"inference": "inferences", "decode": "tokens", "serve": "tokens", "training": "samples"}


@dataclass(frozen=True)
class Metric:
    """One figure of a run: ``value`` reads it from the run's metrics (None where it does not apply)."""

    key: str
    label: str
    unit: str
    scope: str
    definition: str
    value: Callable[[RunMetrics], float | None]
    explorer: str | None = None  # Neuron Explorer's name of the same figure
    modes: tuple[str, ...] = SIMULATED
    kind: str = "number"  # number, percent (to a tenth) or money
    shown: tuple[str, float] | None = None  # the unit views write it in and what one of it is (bytes: MB, 1e6)
    mode_labels: tuple[tuple[str, str], ...] = ()  # its label in runs of a mode, where that differs


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100.0 * fraction


def _serving(key: str) -> Callable[[RunMetrics], float | None]:
    return lambda m: m.serving[key] * 1e3


CATALOGUE: tuple[Metric, ...] = (
    Metric("latency_ms", "latency", "ms", REQUEST,
           "One request with its copy alone: the drawn span of its events, from the first (the host's handling of "
           "it, the copy of its inputs) to the last, the host's costs included. Decode: the whole generation; "
           "serve: the median of its requests' end-to-end; training: one optimizer step.",
           lambda m: _ms(m.latency_s), modes=ALL_MODES,
           mode_labels=(("decode", "e2e"), ("serve", "e2e p50"), ("training", "step"), ("imported", "duration"))),
    Metric("latency_under_load_ms", "loaded", "ms", REQUEST,
           "The latency with every copy the instance runs busy at once (they share the chip's memory bandwidth).",
           lambda m: _ms(m.latency_under_load_s)),
    Metric("time_to_first_token_ms", "TTFT", "ms", REQUEST,
           "From the request's first event to the end of its prompt's pass (its first token), drawn; serve: the "
           "median of its requests'.", lambda m: _ms(m.time_to_first_token_s), modes=GENERATING),
    Metric("per_token_ms", "TPOT", "ms", REQUEST,
           "The time per output token after the first: the drawn span from the first token to the last over the "
           "tokens after the first; serve: the median of its requests'.",
           lambda m: _ms(m.per_token_s), modes=GENERATING),
    Metric("per_token_under_load_ms", "loaded TPOT", "ms", REQUEST,
           "The time per output token with every copy the instance runs busy at once.",
           lambda m: _ms(m.per_token_under_load_s), modes=GENERATING),
    Metric("host_ms", "host", "ms", REQUEST,
           "What the host's costs on the Host row take of the latency: launches, an inference's copies, the "
           "request's handling, a generate loop.", lambda m: _ms(m.host_s), modes=("inference", "decode", "training")),
    Metric("host_per_token_ms", "host per token", "ms", REQUEST,
           "What the host's costs take of each token after the first (an encoder-decoder's generate loop).",
           lambda m: _ms(m.host_per_token_s), modes=("decode",)),
    *(Metric(f"{name}_{stat}_ms", f"{label} {stat}", "ms", REQUEST,
             f"The {stat} of the served requests' {what} (serving benchmarks' figure).",
             _serving(f"{name}_{stat}_s"), modes=("serve",))
      for name, label, what in SERVING_FIGURES for stat in ("mean", "p50", "p99")),
    Metric("output_tokens_per_s", "output tokens", "/s", COPY, "Output tokens one copy serves a second over the run.",
           lambda m: m.serving["output_tokens_per_s"], modes=("serve",)),
    Metric("requests_per_s", "requests", "/s", COPY, "Requests one copy serves a second over the run.",
           lambda m: m.serving["requests_per_s"], modes=("serve",)),
    Metric("throughput_per_s", "throughput", "/s", INSTANCE,
           "What every copy of every instance produces a second with all of them busy: inferences, output tokens "
           "(decode, serve) or training samples.", lambda m: m.throughput_per_s),
    Metric("tokens_per_s", "tokens", "/s", INSTANCE,
           "Tokens every copy of every instance generates (decode, serve) or trains on (training) a second.",
           lambda m: m.tokens_per_s, modes=("decode", "serve", "training")),
    Metric("cost_per_million_tokens_usd", "cost", "$ per million tokens", INSTANCE,
           "The on-demand price of every instance over a million tokens generated or trained on.",
           lambda m: m.cost_per_million_tokens_usd, modes=("decode", "serve", "training"), kind="money"),
    Metric("cost_per_million_requests_usd", "cost", "$ per million requests", INSTANCE,
           "The on-demand price of every instance over a million generation requests.",
           lambda m: m.cost_per_million_requests_usd, modes=GENERATING, kind="money"),
    Metric("cost_per_million_usd", "cost", "$", INSTANCE,
           "The on-demand price of every instance of the run over a million of what the throughput counts "
           "(inferences, tokens, samples).", lambda m: m.cost_per_million_usd, kind="money"),
    Metric("cost_per_step_usd", "cost", "$ per step", INSTANCE,
           "The on-demand price of every instance over one optimizer step's time.",
           lambda m: m.cost_per_step_usd, modes=("training",), kind="money"),
    Metric("total_time_ms", "span", "ms", RUN,
           "The drawn span the utilizations are over: one request's for requests back to back, the run's "
           "otherwise.", lambda m: _ms(m.span_s), explorer="total_time", modes=ALL_MODES),
    Metric("achieved_tflops", "achieved", "TFLOP/s", COPY, "The copy's model FLOPs over the span.",
           lambda m: m.achieved_flops_per_s / 1e12),
    Metric("mfu_percent", "MFU", "%", COPY,
           "Model FLOPs (not what the backward pass recomputes) over the TensorE peak of the copy's cores during "
           "the span.", lambda m: _pct(m.mfu), explorer="mfu_estimated_percent", kind="percent"),
    Metric("hfu_percent", "HFU", "%", COPY,
           "Hardware FLOPs (the model's, what the backward pass recomputes and the transposes on the array) over "
           "the same peak.", lambda m: _pct(m.hfu), explorer="hfu_estimated_percent", kind="percent"),
    Metric("mbu_percent", "MBU", "%", COPY,
           "Device-memory bytes read and written over the copy's share of the memory bandwidth during the span.",
           lambda m: _pct(m.mbu), explorer="mbu_estimated_percent", kind="percent"),
    *(Metric(f"{e}_active_percent", ENGINE_LABELS[e], "%", CORE,
             f"The first NeuronCore's {e} engine: the share of the span its events cover.",
             lambda m, e=e: _pct(m.engine_utilization.get(e, 0.0)), explorer=f"{e}_engine_active_time_percent",
             kind="percent") for e in ENGINES),
    Metric("hbm_read_bytes", "HBM read", "B", COPY,
           "Bytes the copy reads from device memory (HBM; DDR on Inferentia1) over the span: its DMA read events'.",
           lambda m: m.hbm_read_bytes, explorer="hbm_read_bytes", shown=MB),
    Metric("hbm_write_bytes", "HBM write", "B", COPY, "Bytes the copy writes to device memory over the span.",
           lambda m: m.hbm_write_bytes, explorer="hbm_write_bytes", shown=MB),
    Metric("hbm_read_gbps", "HBM read", "GB/s", COPY, "The copy's device-memory reads over the span.",
           lambda m: m.hbm_read_bytes_per_s / 1e9),
    Metric("hbm_write_gbps", "HBM write", "GB/s", COPY, "The copy's device-memory writes over the span.",
           lambda m: m.hbm_write_bytes_per_s / 1e9),
    Metric("flops", "model FLOPs", "FLOP", COPY, "The model's FLOPs the copy's events do over the span.",
           lambda m: m.flops, explorer="model_flops"),
    Metric("mm_arithmetic_intensity", "FLOP/B", "FLOP/B", COPY,
           "Hardware FLOPs of the copy over its device-memory bytes.", lambda m: m.mm_arithmetic_intensity,
           explorer="mm_arithmetic_intensity"),
    Metric("average_dma_size", "DMA size", "B", COPY, "Device-memory bytes per DMA transfer.",
           lambda m: m.average_dma_bytes, explorer="average_dma_size"),
    Metric("spill_save_bytes", "spill save", "B", COPY, "Bytes saved to device memory because SBUF had no room.",
           lambda m: m.spill_save_bytes, explorer="spill_save_bytes", shown=MB),
    Metric("spill_reload_bytes", "spill reload", "B", COPY, "Spilled bytes loaded back.",
           lambda m: m.spill_reload_bytes, explorer="spill_reload_bytes", shown=MB),
    Metric("tensor_throttled_percent", "TensorE throttled", "%", CORE,
           "The share of the first NeuronCore's TensorE active time lost to the warm-up (dI/dt) throttle.",
           lambda m: _pct(m.tensor_throttled), kind="percent"),
    Metric("recomputed_flops", "recomputed FLOPs", "FLOP", COPY,
           "FLOPs the backward pass spends recomputing forward ops (activation checkpointing, a flash kernel's "
           "scores), beside the model's.", lambda m: m.recomputed_flops, modes=("training",)),
    Metric("allreduce_ms", "gradient collectives", "ms", REQUEST,
           "The drawn time of the step's data-parallel gradient collectives.", lambda m: _ms(m.gradient_comm_s),
           modes=("training",)),
    Metric("exposed_comm_ms", "exposed collectives", "ms", REQUEST,
           "The drawn time when a collective runs while no engine or DMA queue of the core is busy.",
           lambda m: _ms(m.exposed_comm_s), modes=("training",)),
    Metric("scaling_efficiency", "scaling efficiency", "", INSTANCE,
           "A step on one instance over the step on all of them, at the same batch per instance.",
           lambda m: m.scaling_efficiency, modes=("training",)),
)
BY_KEY = {m.key: m for m in CATALOGUE}


# Neuron Explorer's schema-7 names of figures whose catalogue entry keeps the legacy profiler's name
EXPLORER_ALIASES = {"dma_transfer_average_bytes": "average_dma_size"}
EXPLORER_SCALE = {"total_time": 1e3}  # Explorer's unit to the catalogue's: its total_time is in seconds


def from_explorer(summary: Mapping[str, Any]) -> dict[str, float]:
    """A device profile's measured figures (the row of its ``Summary`` table, by Neuron Explorer's
    names and units) by catalogue key: those it gives as finite numbers."""
    by_name = {m.explorer: m for m in CATALOGUE if m.explorer}
    out: dict[str, float] = {}
    for name, value in summary.items():
        metric = by_name.get(EXPLORER_ALIASES.get(name, name))
        if metric is not None and type(value) in (int, float) and math.isfinite(value):
            out[metric.key] = float(value) * EXPLORER_SCALE.get(name, 1.0)
    return out


def applies(metric: Metric, trace: Trace) -> bool:
    """Whether ``metric`` is a figure of ``trace``: of its mode, or one Neuron Explorer gives of
    the device profile it is (from the profile where it gives it, else from its events)."""
    return trace.run.workload.mode in metric.modes or bool(trace.run.measured and metric.explorer)


def measure(trace: Trace, metrics: RunMetrics | None = None) -> dict[str, float | None]:
    """The catalogue's figures of ``trace`` that apply to its mode, by key (None: not known, such
    as a time per token of a generation of one token, or an MFU without the chip's peak). A
    device profile's own measured figures stand for what its events would give."""
    met = compute_metrics(trace) if metrics is None else metrics
    measured = trace.run.measured
    return {m.key: measured[m.key] if m.key in measured else _plain(m.value(met)) for m in CATALOGUE
            if applies(m, trace)}


def _plain(value: float | None) -> float | None:
    return None if value is None else float(value)


REPORT_EXTRA = ("tensor_throttled_percent",)  # in the report's summary beside Neuron Explorer's names


def explorer_summary(trace: Trace, metrics: RunMetrics | None = None) -> dict[str, float | None]:
    """The figures with a Neuron Explorer name, under that name (``total_time`` in seconds, as its
    profiles give it), and :data:`REPORT_EXTRA`, as ``neuronviz report`` gives them."""
    values = measure(trace, metrics)
    out = {m.explorer: values.get(m.key) for m in CATALOGUE if m.explorer}
    out["total_time"] = None if out["total_time"] is None else out["total_time"] * 1e-3
    out.update({key: values.get(key) for key in REPORT_EXTRA})
    return out


def unit_of(key: str, mode: str) -> str:
    """A figure's unit as a view writes it: the throughput's and cost's with what they count."""
    metric = BY_KEY[key]
    if key == "throughput_per_s":
        return f"{ITEMS[mode]}/s" if mode in ITEMS else "/s"
    if key == "cost_per_million_usd":
        return f"$ per million {ITEMS[mode]}" if mode in ITEMS else "$ per million"
    return metric.shown[0] if metric.shown else metric.unit


def label(key: str, mode: str = "") -> str:
    """A figure's label in a run of ``mode`` (the latency is a generation's e2e, a training step)."""
    metric = BY_KEY[key]
    return dict(metric.mode_labels).get(mode, metric.label)


def title(key: str, mode: str = "") -> str:
    """A figure's column title: its label and the unit views write it in (a cost's unit alone)."""
    unit = unit_of(key, mode)
    if unit.startswith("$"):
        return unit
    return f"{label(key, mode)} {unit}".strip()


def number(value: float | None, kind: str = "number") -> str:
    """A value as every view writes it: four significant digits (no fewer whole ones) with
    thousands separators, percentages to a tenth, "n/a" for none."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if kind == "percent":
        return f"{value:,.1f}"
    return f"{value:,.{_decimals(value)}f}"


# a time's unit by its size: the first whose scale it reaches, ns below them all (the time axis's too)
DURATION_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def duration(ns: float) -> str:
    """A time of ``ns`` nanoseconds as every view writes one: :func:`number`'s four significant
    digits, in s, ms, µs or ns by its size ("2.800 ms", "8,401 µs" is "8.401 ms")."""
    scale, unit = next(((s, u) for s, u in DURATION_UNITS if abs(ns) >= s), DURATION_UNITS[-1])
    return f"{number(ns / scale)} {unit}"


def times(ratio: float | None) -> str:
    """A ratio of two figures (a speed-up) as every view writes one: "9.506×"."""
    return f"{number(ratio)}×"


def _decimals(value: float) -> int:
    """Decimals for four significant digits of ``value`` (none below its whole digits)."""
    return max(0, 3 - math.floor(math.log10(abs(value)))) if value else 0


def shown(key: str, value: float | None) -> float | None:
    """``value`` of the figure ``key`` in the unit views write it in."""
    metric = BY_KEY[key]
    return value / metric.shown[1] if value is not None and metric.shown else value


def text(key: str, value: float | None) -> str:
    """``value`` of the figure ``key`` as every view writes it, in :func:`unit_of`'s unit (not written)."""
    return number(shown(key, value), BY_KEY[key].kind)
