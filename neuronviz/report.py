"""Text and JSON summaries of simulated runs, shared by the CLI commands."""

from __future__ import annotations

from sim import catalogue
from sim.analysis import model_layer
from sim.hardware.chip import DEFAULT_OPT_LEVEL
from sim.metrics import ENGINES, compute_metrics
from sim.record import run_record
from sim.trace import Trace
from sim.validated import headline_text

# the catalogue's figures ``simulate`` prints, by mode: a generation's TTFT, TPOT and end to end
LATENCY_KEYS = {"decode": ("time_to_first_token_ms", "per_token_ms", "per_token_under_load_ms", "latency_ms"),
                "serve": ("time_to_first_token_ms", "per_token_ms", "per_token_under_load_ms", "latency_ms")}
TABLE_KEYS = ("throughput_per_s", "cost_per_million_usd", "achieved_tflops", "mfu_percent",
              *(f"{e}_active_percent" for e in ENGINES), "hbm_read_bytes")


def runs_table(traces: list[Trace]) -> str:
    """A readable table of runs, one row per chip, every figure the catalogue's as every view writes it."""
    first = traces[0].meta
    mode = first["mode"]
    keys = (*LATENCY_KEYS.get(mode, ("latency_ms", "latency_under_load_ms")), *TABLE_KEYS)
    header = ["chip", "instance", "cores", "copies", *(catalogue.title(k, mode) for k in keys)]
    rows = []
    for tr in traces:
        r = run_record(tr)
        rows.append([r["chip"], r["instance"], str(r["cores_per_copy"]), str(r["copies"]),
                     *(catalogue.text(k, r.get(k)) for k in keys)])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines += [f"{tr.run.deployment.chip} validated: {said}" for tr in traces if (said := headline_text(tr))]
    title = f"{first['model']} {mode} batch {first['batch']} seq {first['seq']} {first['dtype']} "
    levels = sorted({tr.run.software.optlevel for tr in traces} - {None, DEFAULT_OPT_LEVEL})  # not the default
    if levels:
        title += f"compiled {'/'.join(f'-O{level}' for level in levels)} "
    if mode != "serve":
        title += "(latency: one request, its copy alone; loaded: every copy busy, as throughput is measured)"
    if first.get("grad_accum", 1) > 1:
        title += f" x {first['grad_accum']} micro-batches (latency = per step)"
    if mode == "decode":
        title += f" new tokens {first['new_tokens']} (latency: the whole generation)"
    if mode == "serve":
        users = (f"arriving at {first['rate']:g}/s" if first.get("rate")
                 else f"from {first['concurrency']} users")
        title += (f"new tokens {first['new_tokens']}: {first['requests']} requests {users} on each copy "
                  "(medians; latency: end to end; loaded: every copy serving; throughput: output tokens/s of every "
                  "copy)")
        for tr in traces:
            r = run_record(tr)

            def t(key: str, rec=r) -> str:
                return catalogue.text(key, rec[key])

            lines.append(f"{r['chip']}: TTFT p50 {t('ttft_p50_ms')} p99 {t('ttft_p99_ms')} ms · TPOT p50 "
                         f"{t('tpot_p50_ms')} p99 {t('tpot_p99_ms')} ms · ITL p50 {t('itl_p50_ms')} "
                         f"p99 {t('itl_p99_ms')} ms · {t('output_tokens_per_s')} output tokens/s, "
                         f"{t('requests_per_s')} requests/s per copy")
    return "\n".join([title, *lines])


def file_summary(path: str, traces: list[Trace]) -> str:
    """``neuronviz info``: one line per run of a trace file."""
    header = ["#", "chip", "instance", "model", "mode", "batch", "seq", "dtype", "tracks", "events", "duration ms",
              "latency ms"]
    rows = []
    for i, tr in enumerate(traces, 1):
        w, d = tr.run.workload, tr.run.deployment
        met = compute_metrics(tr)
        rows.append([str(i), d.chip_name, d.instance, w.model, w.mode, str(w.batch), str(w.seq), w.dtype,
                     str(len(tr.tracks)), f"{tr.n_events:,}",
                     catalogue.number(tr.run_end_ns / 1e6), catalogue.text("latency_ms", met.latency_s * 1e3)])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([f"{path}: {len(traces)} run(s)", *lines])


REPORT_LAYERS = 15  # the text report lists this many of the slowest layers (--json and --csv list all)


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def _same_layer_summed(layers: list[dict]) -> list[dict]:
    """The layer records of a run, those of one layer in every step of a phase (``decode ctx
    8192 #27/layer0.attention`` and ``#28``, ``micro-batch 2/layer5.mlp`` and ``3``) summed into
    one named without the step, with its FLOP/B, MFU and MBU over them all and the bound of the
    step that takes longest."""
    groups: dict[str, list[dict]] = {}
    for r in layers:
        groups.setdefault(model_layer(r["name"]), []).append(r)
    out = []
    for name, members in groups.items():
        if len(members) == 1:
            out.append(members[0])
            continue
        flops, nbytes = sum(m["flops"] for m in members), sum(m["bytes"] for m in members)
        out.append({**max(members, key=lambda m: m["time_us"]), "name": name,
                    "time_us": sum(m["time_us"] for m in members),
                    "share_percent": sum(m["share_percent"] for m in members),
                    "flops": flops, "bytes": nbytes, "arithmetic_intensity": flops / nbytes if nbytes else None,
                    "mfu": _time_weighted(members, "mfu"), "mbu": _time_weighted(members, "mbu")})
    return out


def _time_weighted(members: list[dict], key: str) -> float | None:
    """``key`` over layer records, each weighted by its time (None when none has it)."""
    known = [m for m in members if m[key] is not None]
    time_us = sum(m["time_us"] for m in known)
    return sum(m[key] * m["time_us"] for m in known) / time_us if time_us > 0 else None


def analysis_text(index: int, record: dict) -> str:
    """One run of ``neuronviz report`` as text: summary, slowest layers, insights."""
    s = record["summary"]
    lines = [f"run {index}: {record['chip']} · {record['instance']} · {record['model']} ({record['mode']})",
             f"  total_time {_num(None if s['total_time'] is None else s['total_time'] * 1e3, ',.3f')} ms · "
             "mfu_estimated_percent "
             f"{_num(s['mfu_estimated_percent'], '.1f')} · hfu_estimated_percent "
             f"{_num(s['hfu_estimated_percent'], '.1f')} · mbu_estimated_percent "
             f"{_num(s['mbu_estimated_percent'], '.1f')}",
             "  " + " · ".join(f"{e}_engine_active_time_percent {_num(s[f'{e}_engine_active_time_percent'], '.1f')}"
                               for e in ("tensor", "vector", "scalar", "gpsimd")),
             f"  hbm_read_bytes {_num(s['hbm_read_bytes'], ',.0f')} · hbm_write_bytes "
             f"{_num(s['hbm_write_bytes'], ',.0f')} · mm_arithmetic_intensity "
             f"{_num(s['mm_arithmetic_intensity'], ',.1f')} · average_dma_size {_num(s['average_dma_size'], ',.0f')} "
             f"· spill_save_bytes {_num(s['spill_save_bytes'], ',.0f')} · spill_reload_bytes "
             f"{_num(s['spill_reload_bytes'], ',.0f')}"]
    if record.get("validated_text"):
        lines.append(f"  validated: {record['validated_text']}")
    grouped = _same_layer_summed(record["layers"])
    layers = sorted(grouped, key=lambda r: -r["time_us"])[:REPORT_LAYERS]
    summed = ", each summed over its phase's steps" if len(grouped) < len(record["layers"]) else ""
    lines.append(f"  slowest layers ({len(layers)} of {len(grouped)}{summed}):")
    width = max([len(r["name"]) for r in layers] + [5])
    lines.append(f"    {'layer':{width}s} {'time us':>12s} {'share':>6s} {'FLOP/B':>9s} {'bound':>10s} "
                 f"{'MFU %':>6s} {'MBU %':>6s}")
    for r in layers:
        ai = r["arithmetic_intensity"]
        lines.append(f"    {r['name']:{width}s} {r['time_us']:12,.1f} {r['share_percent']:5.1f}% "
                     f"{'inf' if ai is None else f'{ai:,.1f}':>9s} {r['bound']:>10s} "
                     f"{_num(None if r['mfu'] is None else 100 * r['mfu'], '6.1f'):>6s} "
                     f"{_num(None if r['mbu'] is None else 100 * r['mbu'], '6.1f'):>6s}")
    lines.append("  insights:" if record["insights"] else "  insights: none")
    lines += [f"    [{i['severity']}] {i['text']}" for i in record["insights"]]
    return "\n".join(lines)
