"""A run as one flat record: what ``neuronviz simulate --json`` prints for each run and what a
sweep stores per configuration: the run's configuration and every figure of the metric catalogue
(:mod:`sim.catalogue`) that applies to its mode, under the catalogue's names."""

from __future__ import annotations

from typing import Any

from sim.catalogue import measure
from sim.trace import Trace


def run_record(trace: Trace) -> dict[str, Any]:
    """One run of ``neuronviz simulate --json``."""
    m = trace.meta
    rec: dict[str, Any] = {
        "chip": m["chip"], "instance": m["instance"], "model": m["model"], "mode": m["mode"],
        "batch": m["batch"], "seq": m["seq"], "dtype": m["dtype"], "optlevel": m.get("optlevel"),
        "cores_per_copy": m["cores_per_copy"], "copies": m["copies"],
        "memory_per_core_gib": m.get("memory_per_core_bytes", 0.0) / 2**30, "events": trace.n_events,
    }
    if "kv_heads_per_core" in m:  # a decoder's KV heads each core caches and reads (RunConfig.gqa)
        rec["kv_heads_per_core"] = m["kv_heads_per_core"]
    if m["mode"] == "serve":
        rec.update(concurrency=m.get("concurrency"), requests=m.get("requests"),
                   output_tokens=sum(m["serving"]["output_tokens"]))
    if m["mode"] == "training":  # latency is one step of batch x grad_accum samples per copy
        rec.update(grad_accum=m.get("grad_accum", 1), nodes=m.get("nodes", 1), data_parallel=m.get("data_parallel"))
    rec.update(measure(trace))
    return rec
