"""A run as one flat record of numbers: what ``neuronviz simulate --json`` prints for each run and
what a sweep stores per configuration."""

from __future__ import annotations

from typing import Any

from sim.metrics import RunMetrics, compute_metrics
from sim.trace import Trace
from sim.workloads.models import CLIP, CNN, VISION_TRANSFORMER


def run_record(trace: Trace) -> dict[str, Any]:
    """One run of ``neuronviz simulate --json``."""
    m = trace.meta
    met = compute_metrics(trace)
    rec: dict[str, Any] = {
        "chip": m["chip"], "instance": m["instance"], "model": m["model"], "mode": m["mode"],
        "batch": m["batch"], "seq": m["seq"], "dtype": m["dtype"], "optlevel": m.get("optlevel"),
        "cores_per_copy": m["cores_per_copy"], "copies": m["copies"],
        "memory_per_core_gib": m.get("memory_per_core_bytes", 0.0) / 2**30,
        "latency_ms": met.latency_s * 1e3, "latency_under_load_ms": met.latency_under_load_s * 1e3,
        "throughput_per_s": met.throughput_per_s,
        "cost_per_million_usd": met.cost_per_million_usd,
        "engine_utilization": {k: round(v, 6) for k, v in met.engine_utilization.items()},
        "hbm_read_bytes": met.hbm_read_bytes, "hbm_write_bytes": met.hbm_write_bytes,
        "flops": met.flops, "achieved_tflops": met.achieved_flops_per_s / 1e12,
        "mfu_percent": None if met.mfu is None else 100 * met.mfu, "events": trace.n_events,
        "recomputed_flops": met.recomputed_flops,
        # of the latency: the host's costs on the host track (launches, an inference's copies, a
        # generation request's handling, an encoder-decoder's generate loop)
        "host_ms": met.host_s * 1e3,
    }
    if m["mode"] in ("decode", "serve"):
        rec["time_to_first_token_ms"] = met.time_to_first_token_s * 1e3
        # none when the prompt's pass made the only token
        per_token = {"per_token_ms": met.per_token_s, "per_token_under_load_ms": met.per_token_under_load_s}
        rec.update({key: None if s is None else s * 1e3 for key, s in per_token.items()})
        if "kv_heads_per_core" in m:  # a decoder's KV heads each core caches and reads (RunConfig.gqa)
            rec["kv_heads_per_core"] = m["kv_heads_per_core"]
        # of every token after the first: the host's costs between two steps (a generate loop)
        rec["host_per_token_ms"] = None if met.host_per_token_s is None else met.host_per_token_s * 1e3
    if met.serving is not None:  # medians above; here every percentile, and the server's rates
        rec["concurrency"], rec["requests"] = m.get("concurrency"), m.get("requests")
        for key, value in met.serving.items():
            if key.endswith("_per_s") or key == "output_tokens":
                rec[key] = value
            elif key.endswith("_s"):  # a time
                rec[key[:-2] + "_ms"] = value * 1e3
    if m["mode"] == "training":  # latency is one step of batch x grad_accum samples per copy
        rec.update(_training_record(m, met))
    return rec


def _training_record(m: dict, met: RunMetrics) -> dict[str, Any]:
    step = met.latency_under_load_s
    tokens = None if m.get("family") in (CNN, VISION_TRANSFORMER, CLIP) else m["seq"]  # an image is not tokens
    return {
        "grad_accum": m.get("grad_accum", 1), "nodes": m.get("nodes", 1), "data_parallel": m.get("data_parallel"),
        "step_ms": step * 1e3, "samples_per_s": met.throughput_per_s,
        "tokens_per_s": None if tokens is None else met.throughput_per_s * tokens,
        "compute_ms": (step - met.exposed_comm_s) * 1e3, "allreduce_ms": met.gradient_comm_s * 1e3,
        "exposed_comm_ms": met.exposed_comm_s * 1e3, "scaling_efficiency": met.scaling_efficiency,
    }
