"""A run as one flat record: what ``neuronviz simulate --json`` prints for each run and what a
sweep stores per configuration: the run's configuration and every figure of the metric catalogue
(:mod:`sim.catalogue`) that applies to its mode, under the catalogue's names."""

from __future__ import annotations

from typing import Any

from sim.catalogue import measure
from sim.trace import Trace


def run_record(trace: Trace) -> dict[str, Any]:
    """One run of ``neuronviz simulate --json``."""
    m, run = trace.meta, trace.run
    w, d = run.workload, run.deployment
    rec: dict[str, Any] = {
        "chip": d.chip, "instance": d.instance, "model": w.model, "mode": w.mode, "batch": w.batch, "seq": w.seq,
        "dtype": w.dtype, "optlevel": run.software.optlevel, "cores_per_copy": d.cores_per_copy, "copies": d.copies,
        "memory_per_core_gib": d.memory_per_core_bytes / 2**30, "events": trace.n_events,
    }
    if "kv_heads_per_core" in m:  # a decoder's KV heads each core caches and reads (RunConfig.gqa)
        rec["kv_heads_per_core"] = m["kv_heads_per_core"]
    if w.mode == "serve":
        rec.update(concurrency=w.concurrency, requests=w.requests, output_tokens=sum(m["serving"]["output_tokens"]))
    if w.mode == "training":  # latency is one step of batch x grad_accum samples per copy
        rec.update(grad_accum=w.grad_accum, nodes=d.nodes, data_parallel=d.data_parallel)
    rec.update(measure(trace))
    return rec
