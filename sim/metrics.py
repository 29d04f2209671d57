"""Metrics derived from a Trace: latency, throughput, utilization, FLOP/s, traffic and cost.

Names follow ``neuron-profile`` summaries where the meaning is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.description import RunDescription
from sim.host import HOST, WAITS
from sim.serve import serving_summary
from sim.trace import Trace, union_intervals
from sim.workloads.models import CLIP, CNN, VISION_TRANSFORMER

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
RECOMPUTED = (".recompute", ".grad_recompute")  # the names of forward ops a backward pass runs again


@dataclass(frozen=True)
class RunMetrics:
    """What a run achieved, per request for requests back to back (:func:`requests_back_to_back`;
    FLOPs and bytes too), of the whole run otherwise (a serving run's requests overlap).
    ``latency_s`` (and for decode ``time_to_first_token_s`` and ``per_token_s``) is one request
    with its model copy alone on the chip: the span of its events, the host's costs on the host
    track included; the ``_under_load`` figures are the same with every running copy busy, and the
    throughput follows from them. ``span_s`` is the drawn span the utilizations are over: one
    request's back to back, the run's otherwise (Neuron Explorer's ``total_time``)."""

    latency_s: float
    throughput_per_s: float  # of every copy of every instance: inferences, tokens (decode, serve), samples (training)
    cost_per_million_usd: float | None  # of what the throughput counts, at the price of every instance
    engine_utilization: dict[str, float]
    flops: float  # the model's FLOPs: what the backward pass recomputes is not counted again
    achieved_flops_per_s: float
    hbm_read_bytes: float
    hbm_write_bytes: float
    span_s: float = 0.0
    cost_per_million_requests_usd: float | None = None  # decode, serve: a request a generation
    cost_per_million_tokens_usd: float | None = None  # decode, serve: generated; training: trained on
    cost_per_step_usd: float | None = None  # training: one optimizer step of every instance
    tokens_per_s: float | None = None  # of every copy: generated (decode, serve) or trained on (training)
    time_to_first_token_s: float | None = None
    per_token_s: float | None = None
    latency_under_load_s: float | None = None
    per_token_under_load_s: float | None = None
    # model FLOPs (and with what the backward pass recomputes and the transposes on the array:
    # hardware FLOPs) over the copy's TensorE peak during ``span_s``; device-memory bytes over the
    # copy's share of the memory's bandwidth (None without the chip's peaks)
    mfu: float | None = None
    hfu: float | None = None
    mbu: float | None = None
    # training: FLOPs the backward pass spends recomputing forward ops (activation checkpointing,
    # a flash-attention kernel's scores), run besides the model's (hardware FLOPs are their sum)
    recomputed_flops: float = 0.0
    # the profiler's counts, summed over the ops: FLOPs per byte of device memory of the matmuls'
    # work, bytes per DMA transfer, bytes spilled from SBUF and reloaded, and the share of
    # TensorE's active time lost to the warm-up (dI/dt) throttle
    mm_arithmetic_intensity: float | None = None
    average_dma_bytes: float | None = None
    spill_save_bytes: float = 0.0
    spill_reload_bytes: float = 0.0
    tensor_throttled: float | None = None
    # training: time of the data-parallel gradient collectives, the time when a collective kept
    # the core waiting (no engine or DMA queue busy), and the throughput per instance against
    # one instance's at the same per-instance batch (runs over several instances)
    gradient_comm_s: float | None = None
    exposed_comm_s: float | None = None
    scaling_efficiency: float | None = None
    # serve: the server's figures (sim.serve.serving_summary: TTFT, TPOT, ITL, end-to-end at
    # p50/p99, output tokens and requests a second), one copy serving alone
    serving: dict[str, float] | None = None
    # of the latency: what the host's costs on the host track take (launches, copies, a request's
    # handling, a generate loop); for decode also of each token after the first
    host_s: float = 0.0
    host_per_token_s: float | None = None

    @property
    def hbm_read_bytes_per_s(self) -> float:
        """The copy's device-memory reads over ``span_s``."""
        return self.hbm_read_bytes / self.span_s if self.span_s > 0 else 0.0

    @property
    def hbm_write_bytes_per_s(self) -> float:
        return self.hbm_write_bytes / self.span_s if self.span_s > 0 else 0.0


def requests_back_to_back(trace: Trace) -> int:
    """The identical requests an inference trace runs one after another (its figures are one
    request's); 1 for any other run (a serving run's requests overlap: its figures are the run's)."""
    w = trace.run.workload
    return w.requests if w.mode == "inference" else 1


def scaled_layer_total(trace: Trace, key: str) -> float:
    """A per-layer count of the metadata (``layer_stats``) over the whole run, the executions
    that were not stored counted."""
    per_layer = (trace.meta.get("layer_stats") or {}).get(key)
    if not per_layer or len(per_layer) != len(trace.layer_names):
        return 0.0
    return float(np.dot(np.asarray(per_layer, float), trace.layer_repeats))


def memory_bytes_per_s_per_core(trace: Trace) -> float | None:
    """One core's share of its device memory's bandwidth while the run's cores run (None for a
    trace without chip data)."""
    hw = trace.run.hardware
    return hw.memory_share_bytes_per_s if hw else None


def engine_utilization(trace: Trace) -> dict[str, float]:
    """Busy fraction of each compute engine of core 0 over the run's duration."""
    span = max(trace.duration_ns, trace.meta.get("total_ns", 0.0)) or 1.0  # the run may end in unstored steps
    out = {}
    for kind in ENGINES:
        idx = trace.track_index(kind)
        out[kind] = trace.run_busy_ns(idx) / span if idx >= 0 else 0.0
    return out


def recomputed_flops(trace: Trace) -> float:
    """FLOPs of one core's run spent on ops recomputed for the backward pass (:data:`RECOMPUTED`)."""
    again = np.array([name.endswith(RECOMPUTED) for name in trace.op_names], dtype=bool)
    if not again.any():
        return 0.0
    op = trace.events["op"]
    sel = (op >= 0) & again[np.clip(op, 0, None)]
    return float((trace.events["flops"][sel] * trace.event_repeats[sel]).sum())


def _dma_bytes(trace: Trace, kind: str) -> float:
    idx = trace.track_index(kind)
    if idx < 0:
        return 0.0
    return trace.run_total("bytes", idx)


GRADIENT_COLLECTIVES = ("grad_", "param_")  # op names of a training step's data-parallel collectives


def communication(trace: Trace) -> tuple[float, float]:
    """Seconds of the run's data-parallel gradient collectives, and seconds when a collective
    ran while no engine or DMA queue of the core was busy (the communication it could not hide)."""
    coll = trace.track_index("collective")
    if coll < 0:
        return 0.0, 0.0
    ev, repeats = trace.events, trace.event_repeats
    sel = ev["track"] == coll
    starts, durs = union_intervals(ev["start_ns"][~sel], ev["dur_ns"][~sel])
    before = np.concatenate(([0.0], np.cumsum(durs)))

    def working(t: np.ndarray) -> np.ndarray:  # time the core worked before t
        i = np.searchsorted(starts, t, side="right") - 1
        ic = np.clip(i, 0, None)
        return np.where(i >= 0, before[ic] + np.clip(t - starts[ic], 0.0, durs[ic] if len(durs) else 0.0), 0.0)

    s, d = ev["start_ns"][sel], ev["dur_ns"][sel]
    exposed = (d - (working(s + d) - working(s))) * repeats[sel]
    names = np.array(trace.op_names, dtype=object)[ev["op"][sel]] if len(s) else np.zeros(0, object)
    gradient = np.array([str(n).startswith(GRADIENT_COLLECTIVES) for n in names], bool)
    return float(np.sum(d[gradient] * repeats[sel][gradient])) * 1e-9, float(np.sum(exposed)) * 1e-9


def host_ns(trace: Trace, after_ns: float = -np.inf) -> float:
    """Time of the host's costs in the run's layers (not its work beside the engines', nor the
    waits the host track draws) that start at ``after_ns`` or later, the executions that were not
    stored counted."""
    idx = trace.track_index(HOST)
    if idx < 0:
        return 0.0
    ev = trace.events
    waits = np.isin(np.asarray(trace.op_names, dtype=object), WAITS) if trace.op_names else np.zeros(0, bool)
    sel = (ev["track"] == idx) & (ev["layer"] >= 0) & (ev["start_ns"] >= after_ns) & ~waits[ev["op"]]
    return float(np.sum(ev["dur_ns"][sel] * trace.event_repeats[sel]))


def compute_metrics(trace: Trace) -> RunMetrics:
    """Everything the views, reports and records give of a run, from its trace alone: the
    figures :mod:`sim.catalogue` defines."""
    m, run = trace.meta, trace.run
    shards = run.deployment.shards
    requests = requests_back_to_back(trace)
    times = _times(trace, requests)
    span = m.get("total_ns", trace.duration_ns) * 1e-9 / requests
    recomputed = recomputed_flops(trace) * shards / requests
    flops = trace.run_total("flops") * shards / requests - recomputed  # what one request does
    read, write = (_dma_bytes(trace, kind) * shards / requests for kind in ("dma_read", "dma_write"))
    per_run = {key: scaled_layer_total(trace, key) * shards / requests
               for key in ("dma_transfers", "transpose_flops", "spill_save_bytes", "spill_reload_bytes")}
    peak = m.get("peak_flops_per_core")
    peak = peak * shards * span if peak and span > 0 else None  # the copy's FLOPs at its peak
    memory = memory_bytes_per_s_per_core(trace)
    memory = memory * shards * span if memory and span > 0 else None
    traffic = read + write
    tensor = trace.track_index("tensor")
    tensor_busy = trace.run_busy_ns(tensor) if tensor >= 0 else 0.0
    gradient_comm = exposed = scaling = None
    if run.workload.mode == "training":
        gradient_comm, exposed = communication(trace)
        single = m.get("single_node")  # the same step on one instance, for a run over several
        if single is not None:
            scaling = single["total_ns"] * 1e-9 / times["latency_under_load_s"]
    return RunMetrics(
        **times, engine_utilization=engine_utilization(trace), flops=flops, span_s=span,
        achieved_flops_per_s=flops / span if span > 0 else 0.0, hbm_read_bytes=read, hbm_write_bytes=write,
        mfu=flops / peak if peak else None,
        hfu=(flops + recomputed + per_run["transpose_flops"]) / peak if peak else None,
        mbu=traffic / memory if memory else None, recomputed_flops=recomputed,
        mm_arithmetic_intensity=(flops + recomputed) / traffic if traffic else None,
        average_dma_bytes=traffic / per_run["dma_transfers"] if per_run["dma_transfers"] else None,
        spill_save_bytes=per_run["spill_save_bytes"], spill_reload_bytes=per_run["spill_reload_bytes"],
        tensor_throttled=scaled_layer_total(trace, "tensor_throttled_ns") / tensor_busy if tensor_busy else None,
        gradient_comm_s=gradient_comm, exposed_comm_s=exposed, scaling_efficiency=scaling,
        host_s=host_ns(trace) * 1e-9 / requests,
    )


def _times(trace: Trace, requests: int) -> dict:
    """One request's latency (alone and under load), for generating runs its time to the first
    token and per token after it, and the throughput and cost per million that follow."""
    m, w, d = trace.meta, trace.run.workload, trace.run.deployment
    alone = {"total_ns": m.get("total_ns", trace.duration_ns), "prefill_ns": m.get("prefill_ns"),
             "per_token_ns": m.get("per_token_ns")}
    loaded = {**alone, **m.get("under_load", {})}
    out = {"latency_s": alone["total_ns"] * 1e-9 / requests,
           "latency_under_load_s": loaded["total_ns"] * 1e-9 / requests, "time_to_first_token_s": None,
           "per_token_s": None, "per_token_under_load_s": None, "host_per_token_s": None, "serving": None}
    # a training step's micro-batches; the requests a decode graph serves (its padding serves none)
    items = (w.batch if w.concurrency is None else w.concurrency) * w.grad_accum
    if w.mode == "serve":  # the benchmark's medians
        serving = serving_summary(m["serving"])
        under = m.get("under_load") or serving
        out.update(latency_s=serving["e2e_p50_s"], latency_under_load_s=under["e2e_p50_s"],
                   time_to_first_token_s=serving["ttft_p50_s"], per_token_s=serving["tpot_p50_s"],
                   per_token_under_load_s=under["tpot_p50_s"], serving=serving)
        throughput = d.copies * under["output_tokens_per_s"]  # every copy of the instance a server
    elif w.mode == "decode":
        out["time_to_first_token_s"] = alone["prefill_ns"] * 1e-9
        if (w.new_tokens or 2) > 1:
            out.update(per_token_s=alone["per_token_ns"] * 1e-9, per_token_under_load_s=loaded["per_token_ns"] * 1e-9,
                       host_per_token_s=host_ns(trace, alone["prefill_ns"]) * 1e-9 / (w.new_tokens - 1))
            each = out["per_token_under_load_s"]
        else:  # the prompt's pass makes the only token: no time per token, one token a request
            each = out["latency_under_load_s"]
        throughput = d.copies * items / each if each > 0 else 0.0
    else:
        loaded = out["latency_under_load_s"]  # every copy (a training run's over all its instances)
        throughput = d.data_parallel * items / loaded if loaded > 0 else 0.0
    out["throughput_per_s"] = throughput
    out["tokens_per_s"] = (throughput if w.generating else throughput * w.seq
                           if w.mode == "training" and w.family not in TOKENLESS else None)
    out.update(_costs(trace.run, throughput, out))
    return out


TOKENLESS = (CNN, VISION_TRANSFORMER, CLIP)  # models whose samples are images, not tokens


def _costs(run: RunDescription, throughput: float, times: dict) -> dict[str, float | None]:
    """What the run's output costs at the on-demand price of every instance it runs on: per million
    of what its throughput counts (inferences, tokens, samples), per million requests and tokens,
    and per training step."""
    w, d = run.workload, run.deployment
    price = None if d.price_usd_per_hour is None else d.price_usd_per_hour * d.nodes  # every instance it runs on

    def per_million(rate: float) -> float | None:
        return None if price is None or rate <= 0 else price / (rate * 3600.0) * 1e6

    out = {"cost_per_million_usd": per_million(throughput), "cost_per_million_requests_usd": None,
           "cost_per_million_tokens_usd": None, "cost_per_step_usd": None}
    if w.mode == "serve":  # requests a second of every copy serving
        out["cost_per_million_requests_usd"] = per_million(d.copies * times["serving"]["requests_per_s"])
        out["cost_per_million_tokens_usd"] = out["cost_per_million_usd"]
    elif w.mode == "decode":  # a copy's requests, one generation each
        loaded = times["latency_under_load_s"]
        out["cost_per_million_requests_usd"] = per_million(d.copies * (w.concurrency or w.batch) / loaded
                                                           if loaded > 0 else 0.0)
        out["cost_per_million_tokens_usd"] = out["cost_per_million_usd"]
    elif w.mode == "training":
        out["cost_per_step_usd"] = None if price is None else price * times["latency_under_load_s"] / 3600.0
        out["cost_per_million_tokens_usd"] = per_million(times["tokens_per_s"] or 0.0)  # the tokens trained on
    return out
