"""Text and JSON summaries of simulated runs, shared by the CLI commands."""

from __future__ import annotations

from sim.metrics import ENGINES, compute_metrics
from sim.record import run_record
from sim.trace import Trace


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def runs_table(traces: list[Trace]) -> str:
    """A readable table of runs, one row per chip."""
    header = ["chip", "instance", "cores", "copies", "latency ms", "loaded ms", "throughput/s", "$/M", "TFLOP/s",
              "MFU %", *(e[:3] + " %" for e in ENGINES), "HBM rd MB"]
    rows = []
    for tr in traces:
        r = run_record(tr)
        decode = r["mode"] == "decode"
        lat = r["per_token_ms"] if decode else r["latency_ms"]
        loaded = r["per_token_under_load_ms"] if decode else r["latency_under_load_ms"]
        rows.append([
            r["chip"], r["instance"], str(r["cores_per_copy"]), str(r["copies"]), _fmt(lat, 3), _fmt(loaded, 3),
            _fmt(r["throughput_per_s"], 1), _fmt(r["cost_per_million_usd"], 3), _fmt(r["achieved_tflops"], 1),
            _fmt(r["mfu_percent"], 1),
            *(f"{100 * r['engine_utilization'][e]:.0f}" for e in ENGINES), _fmt(r["hbm_read_bytes"] / 1e6, 1),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    first = traces[0].meta
    title = (f"{first['model']} {first['mode']} batch {first['batch']} seq {first['seq']} {first['dtype']} "
             "(latency: one request, its copy alone; loaded: every copy busy, as throughput is measured)")
    if first.get("grad_accum", 1) > 1:
        title += f" x {first['grad_accum']} micro-batches (latency = per step)"
    if first["mode"] == "decode":
        title += f" new tokens {first['new_tokens']} (latency = per output token)"
        for tr in traces:
            r = run_record(tr)
            lines.append(f"{r['chip']}: time to first token {r['time_to_first_token_ms']:.2f} ms")
    return "\n".join([title, *lines])


def file_summary(path: str, traces: list[Trace]) -> str:
    """``neuronviz info``: one line per run of a trace file."""
    header = ["#", "chip", "instance", "model", "mode", "batch", "seq", "dtype", "tracks", "events", "duration ms",
              "latency ms"]
    rows = []
    for i, tr in enumerate(traces, 1):
        m = tr.meta
        met = compute_metrics(tr)
        rows.append([str(i), str(m.get("chip_name") or m.get("chip", "")), str(m.get("instance", "")),
                     str(m.get("model", "")), str(m.get("mode", "")), str(m.get("batch", "")), str(m.get("seq", "")),
                     str(m.get("dtype", "")), str(len(tr.tracks)), f"{tr.n_events:,}",
                     _fmt(tr.end_ns / 1e6, 3), _fmt(met.latency_s * 1e3, 3)])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([f"{path}: {len(traces)} run(s)", *lines])
