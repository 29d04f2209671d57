"""Validation against published Neuron measurements: simulate each row, report the error.

Each row of ``calibration/published.csv`` names a model, an instance, a batch, sequence lengths
and a metric (latency, throughput, time to first token, time per output token, training
throughput). A row becomes a :class:`RunConfig` with the row's deployment (tensor-parallel
degree for LLM rows, one copy per core otherwise) and as many copies running as the measurement
kept requests in flight (one for a latency-oriented "Real Time" row); rows of models the simulator cannot build
are reported as skipped with the reason, never silently dropped.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from sim.errors import SimError
from sim.metrics import compute_metrics
from sim.run import RunConfig, deployment, simulate
from sim.workloads import get_model, preset_names
from sim.workloads.models import CNN

PUBLISHED = Path(__file__).with_name("calibration") / "published.csv"
METRICS = ("latency_ms_p50", "throughput_per_s", "ttft_ms_p50", "tpot_ms_p50", "per_token_ms_p50",
           "train_seq_per_s_cluster")


@dataclass(frozen=True)
class Row:
    model: str
    instance: str
    cores: int | None
    parallelism: str
    batch: int
    seq_in: int
    seq_out: int
    metric: str
    measured: float
    source: str

    @property
    def key(self) -> tuple:
        """Rows with equal keys differ only in the instance (for generation ratios)."""
        return self.model, self.batch, self.seq_in, self.seq_out, self.metric, self.parallelism.split(";")[0]


@dataclass(frozen=True)
class Result:
    row: Row
    simulated: float | None
    skipped: str = ""

    @property
    def error(self) -> float | None:
        """Signed relative error of the simulated value against the measurement."""
        if self.simulated is None or not self.row.measured:
            return None
        return relative_error(self.simulated, self.row.measured)


def relative_error(simulated: float, measured: float) -> float:
    return (simulated - measured) / measured


def _int(text: str, default: int = 0) -> int:
    text = text.strip().split("x")[0]
    return int(text) if text.isdigit() else default


def read_rows(path: Path = PUBLISHED) -> list[Row]:
    with open(path, newline="", encoding="utf-8") as f:
        return [Row(model=r["model"], instance=r["instance"], cores=_int(r["cores_per_model_or_tp"]) or None,
                    parallelism=r["parallelism"], batch=_int(r["batch"], 1), seq_in=_int(r["seq_in"]),
                    seq_out=_int(r["seq_out"]), metric=r["metric"], measured=float(r["value"]), source=r["source"])
                for r in csv.DictReader(f) if r["metric"] in METRICS]


def _nodes(parallelism: str) -> int:
    for part in parallelism.split(";"):
        if part.strip().startswith("nodes="):
            return _int(part.split("=")[1], 1)
    return 1


def copies_in_measurement(rows: list[Row]) -> dict[tuple, int]:
    """How many model copies ran concurrently in each encoder measurement.

    A latency row and a throughput row of the same setup tell it: copies = throughput x
    latency / batch (inf2 benchmarks run one copy per core; inf1 ones one copy over all four).
    """
    latency = {_setup(r): r.measured for r in rows if r.metric == "latency_ms_p50"}
    out = {}
    for r in rows:
        if r.metric == "throughput_per_s" and _setup(r) in latency:
            out[_setup(r)] = max(1, round(r.measured * latency[_setup(r)] / 1e3 / r.batch))
    return out


def _setup(row: Row) -> tuple:
    return row.model, row.instance, row.batch, row.seq_in, row.seq_out, row.parallelism, row.cores


def row_config(row: Row, copies: dict[tuple, int] | None = None) -> RunConfig:
    """The simulation that reproduces ``row``'s setup; :class:`SimError` when it cannot."""
    model = {"distilbert-base": "distilbert"}.get(row.model, row.model)
    if model not in preset_names():
        raise SimError(f"no preset for {row.model}")
    if row.metric == "train_seq_per_s_cluster":
        if "PP=" in row.parallelism or "TP=" in row.parallelism:
            raise SimError("pipeline/tensor-parallel training is not modelled yet")
        return RunConfig(model=model, instance=row.instance, mode="training", batch=row.batch, seq=row.seq_in or None)
    if row.parallelism == "pipeline":
        raise SimError("NeuronCore Pipeline (layers split over cores, weights held on chip) is not modelled yet")
    if row.seq_out:
        cores = row.cores if row.parallelism == "tensor-parallel" else None
        return RunConfig(model=model, instance=row.instance, mode="decode", batch=row.batch, seq=row.seq_in,
                         new_tokens=row.seq_out, cores=cores)
    cores = row.cores if row.parallelism == "tensor-parallel" else None
    n = (copies or {}).get(_setup(row))
    if cores is None and n and row.cores and row.cores // n > 1 and get_model(model).family != CNN:
        cores = row.cores // n  # one copy spread over several cores (a CNN cannot be: it runs on one)
    cfg = RunConfig(model=model, instance=row.instance, batch=row.batch, seq=row.seq_in or None, cores=cores)
    # as many copies as the benchmark kept requests in flight, at most what the instance holds
    return cfg if n is None else replace(cfg, copies=min(n, deployment(cfg).copies))


def queueing(row: Row, cfg: RunConfig, copies: dict[tuple, int]) -> float:
    """How many requests share each running copy in the measurement: a benchmark that keeps more
    requests in flight than the instance has copies measures their wait too (latency = service
    time x requests per copy)."""
    n = copies.get(_setup(row))
    if row.metric != "latency_ms_p50" or n is None or not cfg.copies:
        return 1.0
    return max(1.0, n / cfg.copies)


def simulated_value(row: Row, cfg: RunConfig) -> float:
    met = compute_metrics(simulate(cfg))
    if row.metric == "latency_ms_p50":
        return met.latency_s * 1e3
    if row.metric == "ttft_ms_p50":
        return met.time_to_first_token_s * 1e3
    if row.metric in ("tpot_ms_p50", "per_token_ms_p50"):
        return met.per_token_s * 1e3
    if row.metric == "train_seq_per_s_cluster":
        return met.throughput_per_s * _nodes(row.parallelism)
    return met.throughput_per_s


def validate(rows: Iterable[Row]) -> list[Result]:
    """Simulate every row (identical configurations once)."""
    rows = list(rows)
    copies = copies_in_measurement(rows)
    cache: dict[tuple, float | str] = {}
    out = []
    for row in rows:
        try:
            cfg = row_config(row, copies)
        except SimError as exc:
            out.append(Result(row, None, str(exc)))
            continue
        key = (cfg, row.metric)
        if key not in cache:
            try:
                cache[key] = simulated_value(row, cfg)
            except SimError as exc:
                cache[key] = str(exc)
        value = cache[key]
        if isinstance(value, float):
            out.append(Result(row, value * queueing(row, cfg, copies)))
        else:
            out.append(Result(row, None, value))
    return out


@dataclass(frozen=True)
class Summary:
    compared: int
    skipped: int
    median_abs_error: float
    ratio_pairs: int
    median_abs_ratio_error: float


def generation_ratios(results: list[Result]) -> list[tuple[Result, Result, float]]:
    """Pairs of rows that differ only in the instance's chip generation, with the error of the
    simulated ratio against the measured ratio."""
    by_key: dict[tuple, list[Result]] = {}
    for r in results:
        if r.simulated is not None:
            by_key.setdefault(r.row.key, []).append(r)
    pairs = []
    for group in by_key.values():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if a.row.instance.split(".")[0][:3] != b.row.instance.split(".")[0][:3]:
                    measured = a.row.measured / b.row.measured
                    pairs.append((a, b, relative_error(a.simulated / b.simulated, measured)))
    return pairs


def summarise(results: list[Result]) -> Summary:
    errors = [abs(r.error) for r in results if r.error is not None]
    ratios = [abs(e) for _, _, e in generation_ratios(results)]
    return Summary(len(errors), sum(1 for r in results if r.simulated is None),
                   statistics.median(errors) if errors else float("nan"), len(ratios),
                   statistics.median(ratios) if ratios else float("nan"))


@dataclass(frozen=True)
class Group:
    """The rows of one chip generation and metric: where the model is close and where it is not."""

    generation: str
    metric: str
    rows: int
    median_error: float  # signed: below zero, the simulator is faster (or reports less) than measured
    median_abs_error: float


def by_group(results: list[Result]) -> list[Group]:
    groups: dict[tuple[str, str], list[float]] = {}
    for r in results:
        if r.error is not None:
            groups.setdefault((r.row.instance.split(".")[0], r.row.metric), []).append(r.error)
    return [Group(gen, metric, len(e), statistics.median(e), statistics.median(map(abs, e)))
            for (gen, metric), e in sorted(groups.items())]


def report(results: list[Result]) -> str:
    """The error by generation and metric, the validation table, the generation ratios and the
    summary, as Markdown."""
    lines = ["| generation | metric | rows | median error | median absolute error |", "|---|---|---:|---:|---:|"]
    lines += [f"| {g.generation} | {g.metric} | {g.rows} | {100 * g.median_error:+.1f}% | "
              f"{100 * g.median_abs_error:.1f}% |" for g in by_group(results)]
    lines += ["", "| model | instance | batch | seq in/out | metric | measured | simulated | error |",
              "|---|---|---:|---|---|---:|---:|---:|"]
    for r in results:
        row = r.row
        seq = f"{row.seq_in}/{row.seq_out}" if row.seq_out else str(row.seq_in)
        sim = f"{r.simulated:,.2f}" if r.simulated is not None else f"skipped: {r.skipped}"
        err = f"{100 * r.error:+.1f}%" if r.error is not None else ""
        lines.append(f"| {row.model} | {row.instance} | {row.batch} | {seq} | {row.metric} | {row.measured:,.2f} "
                     f"| {sim} | {err} |")
    pairs = generation_ratios(results)
    if pairs:
        lines += ["", "| model | metric | batch | seq | instances | measured ratio | simulated ratio | error |",
                  "|---|---|---:|---|---|---:|---:|---:|"]
        for a, b, e in pairs:
            lines.append(f"| {a.row.model} | {a.row.metric} | {a.row.batch} | {a.row.seq_in}/{a.row.seq_out} "
                         f"| {a.row.instance} / {b.row.instance} | {a.row.measured / b.row.measured:.3f} "
                         f"| {a.simulated / b.simulated:.3f} | {100 * e:+.1f}% |")
    s = summarise(results)
    lines += ["", f"Rows compared: {s.compared}; skipped: {s.skipped}. Median absolute error: "
                  f"{100 * s.median_abs_error:.1f}%. Generation ratios: {s.ratio_pairs} pairs, median absolute "
                  f"error {100 * s.median_abs_ratio_error:.1f}%."]
    return "\n".join(lines)
