"""``simulate``: from a model, a chip and a configuration to a :class:`Trace`: the phases a mode
runs (prompt and token steps, micro-batches, a serving stack's steps), scheduled on one core's
timeline, and the trace and metadata that describe them."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from sim import __version__
from sim.config import (
    DTYPE_BYTES,
    GENERATING,
    RunConfig,
    bucket_lengths,
    checkpointing,
    compiled_length,
    compute_dtypes,
    encoder_decoder_lengths,
    flash_attention,
    optlevel_of,
    request_count,
    run_precision,
)
from sim.cost.dma import memory_share_bytes_per_s
from sim.deploy import Deployment
from sim.description import hardware
from sim.hardware.chip import DEFAULT_OPT_LEVEL, Efficiency, schedule
from sim.host import (
    HOST,
    HOST_TRACK,
    QUEUED,
    HostCost,
    costs,
    generate_loop,
    host_sampling,
    inference_copies,
    launch,
    request_handling,
)
from sim.lowering import GPSIMD, RESOURCE_NAMES, CoreContext
from sim.memory_plan import plan
from sim.scheduler import CoreScheduler, column, psum_columns, sbuf_rows
from sim.serve import ServeLog, serve, serving_record, serving_summary
from sim.serve import lengths as serve_lengths
from sim.speculation import drafter_of, proposed_tokens, speculation
from sim.stacks import samples_on_host, stack_of
from sim.timeline import RunPhase, Tables, Timeline
from sim.trace import PIPELINE_BUBBLE, Counter, Trace, Track
from sim.workloads import (
    ModelSpec,
    Phase,
    Program,
    build_program,
    shared_programs,
    training_program,
)
from sim.workloads.models import DECODER, ENCODER_DECODER
from sim.workloads.pipeline import heaviest_stage, stage_program
from sim.workloads.speculation import prefill_graphs, step_graphs
from sim.workloads.training import FP32_BYTES as GRADIENT_BYTES
from sim.workloads.training import DataParallel
from sim.workloads.transformer import context_encoding_kernel, kv_heads_per_core

# Repeated decode steps are stored as events until the trace holds this many; later steps are
# still simulated (their time counts in every metric) but not kept as events.
MAX_STORED_EVENTS = 4_000_000


# A training step's micro-batches between the first and the last are identical: this many of
# them are stored as events, the others counted like unstored decode steps.
STORED_MIDDLE_MICRO_BATCHES = 2


def _bucket(length: int, lengths: list[int]) -> int:
    return next(b for b in lengths if b >= length)


def _decode_buckets(prompt: int, new_tokens: int, lengths: list[int]) -> list[tuple[int, int]]:
    """(context bucket, steps) for the ``new_tokens - 1`` token steps after the prefill."""
    out: list[tuple[int, int]] = []
    for length in range(prompt + 1, prompt + new_tokens):
        bucket = _bucket(length, lengths)
        if out and out[-1][0] == bucket:
            out[-1] = (bucket, out[-1][1] + 1)
        else:
            out.append((bucket, 1))
    return out


def _kernels(cfg: RunConfig, lnc: int, prompt: int = 0) -> dict:
    """How a run's programs are built on logical cores of ``lnc`` physical cores: its attention
    kernel (for a whole prompt of ``prompt`` positions, the one NxD Inference picks), its QKV and
    MLP kernels, whether tokens are split, and how experts are spread and run."""
    asked = "attention" in cfg.nki_kernels
    flash = flash_attention(cfg) and (not prompt or context_encoding_kernel(prompt, lnc, asked))
    return {"flash": flash, "sequence_parallel": cfg.sequence_parallel, "ep": cfg.ep, "gqa": cfg.gqa,
            "expert_imbalance": float(cfg.expert_imbalance), "lnc": lnc, "capacity_factor": cfg.capacity_factor,
            "skip_dma": cfg.moe_skip_dma, "head": cfg.head,
            "qkv_kernel": "qkv" in cfg.nki_kernels, "mlp_kernel": "mlp" in cfg.nki_kernels,
            "moe_kernel": "moe" in cfg.nki_kernels}


def _prefill_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int, lengths: list[int]
                    ) -> list[RunPhase]:
    """The prompt's encoding: one graph of the bucket that holds it (the padding is computed
    too), or chunks of ``prefill_chunk`` tokens (:func:`static_chunks`)."""
    batch = cfg.batch if cfg.concurrency is None else 1  # continuous batching encodes one prompt at a time
    tp, start, sample = dep.shards, launch(dep.chip), _sampling(cfg, spec, dep, batch)
    if not cfg.prefill_chunk:
        ce = _bucket(seq, lengths)
        first, *then = _prompt_graphs(cfg, spec, Phase(batch, ce, ce, tp, **_kernels(cfg, dep.lnc, ce)), dt)
        return [RunPhase("prefill", first, before=start, after=sample, then=tuple(then))]
    chunks = -(-seq // cfg.prefill_chunk)
    if static_chunks(cfg):  # one graph for every chunk, run back to back
        return [RunPhase("prefill chunk", _chunk_program(cfg, spec, 0, batch, seq, dep, dt), chunks, number_from=1,
                       before=start, after=sample)]
    return [RunPhase(f"prefill chunk {i + 1}", _chunk_program(cfg, spec, i, batch, seq, dep, dt), before=start,
                     after=sample) for i in range(chunks)]


def _sampling(cfg: RunConfig, spec: ModelSpec, dep: Deployment, rows: int) -> tuple[HostCost, ...]:
    """What the host does after each execution of a generating graph of ``rows`` sequences: with
    sampling on the host, the logits it returns sampled there (every execution returns them, a
    prompt's chunks too; a speculative step's for the draft's tokens and the model's next one)."""
    positions = proposed_tokens(cfg) + 1 if speculation(cfg) else 1
    return host_sampling(dep.chip, samples_on_host(cfg.stack, cfg.sampling), rows * positions, spec.vocab)


def static_chunks(cfg: RunConfig) -> bool:
    """Whether a run's prompt chunks are optimum-neuron's chunked prefill (NxD Inference's vLLM
    does not chunk prefills): one graph for every chunk, the token-generation attention in the
    compiler's ops over the whole compiled cache and the chunk's own keys, the chunk padded to
    its size. With ``--attention flash`` asked for, each chunk is a kernel that meets the chunks
    before it instead."""
    return cfg.attention != "flash"


def _chunk_program(cfg: RunConfig, spec: ModelSpec, n: int, batch: int, seq: int, dep: Deployment, dt: int
                   ) -> Program:
    """The program of chunk ``n`` of a prompt (:func:`static_chunks`)."""
    chunk = cfg.prefill_chunk
    if static_chunks(cfg):
        phase = Phase(batch, chunk, compiled_length(cfg, seq) + chunk, dep.shards, static_chunk=True,
                      **{**_kernels(cfg, dep.lnc), "flash": False})
    else:
        phase = Phase(batch, chunk, (n + 1) * chunk, dep.shards, **_kernels(cfg, dep.lnc))
    return build_program(spec, phase, dt)


def _phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int) -> list[RunPhase]:
    tp = dep.shards
    if spec.family == ENCODER_DECODER:
        return _encoder_decoder_phases(cfg, spec, seq, dep, dt)
    if cfg.mode == "training":
        return _training_phases(cfg, spec, seq, dep, dt)
    start = launch(dep.chip)
    if cfg.mode == "inference":
        phase = Phase(cfg.batch, seq, seq, tp, **_kernels(cfg, dep.lnc))
        # the traced model's inputs and outputs in its own dtype: the compiler's auto-cast is inside the graph
        copy_in, copy_out = inference_copies(spec, phase, DTYPE_BYTES[cfg.dtype], dep.chip)
        return [RunPhase("inference", build_program(spec, phase, dt), repeat=request_count(cfg), numbered=False,
                       before=copy_in + start, after=copy_out)]
    prompts, contexts = bucket_lengths(cfg, seq)
    out = _prefill_phases(cfg, spec, seq, dep, dt, prompts)
    spec_run, sample = speculation(cfg), _sampling(cfg, spec, dep, cfg.batch)
    for bucket, steps in _decode_buckets(seq, cfg.new_tokens, contexts):
        first, *then = _token_step(cfg, spec, bucket, dep, dt)
        out.append(RunPhase(f"decode ctx {bucket}", first, max(1, round(steps / spec_run.tokens_per_step)) if spec_run
                            else steps, before=start, after=sample, then=tuple(then)))
    return out


def _encoder_decoder_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int) -> list[RunPhase]:
    """An encoder-decoder generating: the encoder's pass over the prompt's bucket (which fills the
    decoder's caches), then a decoder step per new token, the first of them part of the time to
    first token. A step's self-attention spans the bucket that holds the tokens so far, its
    cross-attention the encoder's positions. Attention is the compiler's ops unless ``--attention
    flash`` asks for the kernel (the Neuron T5 tutorial runs transformers' attention). After each
    step the core waits for transformers' generate loop on the host to call the next."""
    prompts, contexts = encoder_decoder_lengths(cfg, seq)
    encoded, tp, start, host = _bucket(seq, prompts), dep.shards, launch(dep.chip), generate_loop(dep.chip)
    kernels = {**_kernels(cfg, dep.lnc), "flash": cfg.attention == "flash"}

    def step(positions: int) -> Program:
        return build_program(spec, Phase(cfg.batch, 1, positions, tp, decode_step=True, beams=cfg.beams,
                                         encoder_positions=encoded, **kernels), dt)

    encoder = Phase(cfg.batch, encoded, encoded, tp, beams=cfg.beams, decoder_positions=contexts[-1], **kernels)
    out = [RunPhase("prefill encoder", build_program(spec, encoder, dt), before=start),
           RunPhase("prefill first token", step(_bucket(1, contexts)), before=start, after=host)]
    out += [RunPhase(f"decode ctx {bucket}", step(bucket), steps, before=start, after=host) for bucket, steps in
            _decode_buckets(1, cfg.new_tokens, contexts)]
    return out


def _prompt_graphs(cfg: RunConfig, spec: ModelSpec, phase: Phase, dt: int) -> tuple[Program, ...]:
    """The graphs that encode a whole prompt (``phase``): the model's, and with speculation the
    drafter's too (:func:`sim.workloads.speculation.prefill_graphs`)."""
    d = drafter_of(cfg, spec)
    if d is None:
        return (build_program(spec, phase, dt),)
    return prefill_graphs(spec, d, proposed_tokens(cfg), phase, dt)


def _token_step(cfg: RunConfig, spec: ModelSpec, bucket: int, dep: Deployment, dt: int) -> tuple[Program, ...]:
    """The graphs of one token step of the graph compiled for ``cfg.batch`` over contexts of
    ``bucket`` positions: the model's, or the drafter's proposals and the model's verification
    (:func:`sim.workloads.speculation.step_graphs`)."""
    phase = Phase(cfg.batch, 1, bucket, dep.shards, decode_step=True, **_kernels(cfg, dep.lnc))
    d = drafter_of(cfg, spec)
    if d is None:
        return (build_program(spec, phase, dt),)
    return step_graphs(spec, d, proposed_tokens(cfg), phase, dt)


def _run_serving(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int, max_events: int
                 ) -> tuple[Timeline, ServeLog]:
    """Serve ``cfg``'s requests on one copy of ``dep`` (:func:`sim.serve.serve`), each step a
    program on the core's timeline after the runtime's launch of it, and each request's handling
    by the server on the host track from when it was sent."""
    timeline = _timeline(cfg, dep, max_events)
    prompts, contexts = bucket_lengths(cfg, seq)
    steps: dict[tuple[str, int], RunPhase] = {}
    start, tp, chunk = launch(dep.chip), dep.shards, cfg.prefill_chunk
    prompt_sample, step_sample = _sampling(cfg, spec, dep, 1), _sampling(cfg, spec, dep, cfg.batch)

    def run(key: tuple[str, int], t: float) -> float:
        if key not in steps:
            kind, n = key
            if kind == "decode":
                first, *then = _token_step(cfg, spec, n, dep, dt)
                steps[key] = RunPhase(f"decode ctx {n}", first, before=start, after=step_sample, then=tuple(then))
            elif kind == "chunk":  # chunk n of a prompt (any chunk: one graph for all, :func:`static_chunks`)
                name = "prefill chunk" if static_chunks(cfg) else f"prefill chunk {n + 1}"
                steps[key] = RunPhase(name, _chunk_program(cfg, spec, n, 1, seq, dep, dt), before=start,
                                      after=prompt_sample)
            else:  # a whole prompt, padded to its bucket
                first, *then = _prompt_graphs(cfg, spec, Phase(1, n, n, tp, **_kernels(cfg, dep.lnc, n)), dt)
                steps[key] = RunPhase(f"prefill ctx {n}", first, before=start, after=prompt_sample, then=tuple(then))
        return timeline.run(steps[key], t)

    def prefill(t: float, prompt: int, i: int) -> float:
        if chunk:
            return run(("chunk", 0 if static_chunks(cfg) else i), t)
        return run(("prefill", _bucket(prompt, prompts)), t)

    rng = np.random.default_rng(cfg.seed + 2)
    n = request_count(cfg)
    handling = request_handling(dep.chip, stack_of(cfg.stack))
    log = serve(prompts=serve_lengths(seq, cfg.seq_spread, n, rng),
                outputs=serve_lengths(cfg.new_tokens, cfg.new_tokens_spread, n, rng),
                concurrency=cfg.concurrency, rate=cfg.rate, seed=cfg.seed, batch=cfg.batch, chunk=chunk,
                handling_s=sum(c.dur_s for c in handling), prefill=prefill,
                decode=lambda t, context: run(("decode", _bucket(context, contexts)), t),
                acceptance=spec_run.acceptance if (spec_run := speculation(cfg)) else None)
    for sent, ready, admitted in zip(log.sent, log.ready, log.admitted, strict=True):
        # beside the engine's steps for the requests already in flight: no layer's
        timeline.beside(handling, sent)
        timeline.beside(costs(HostCost(QUEUED, admitted - ready)), ready)
    return timeline, log


def _training_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int) -> list[RunPhase]:
    """One training step: ``grad_accum`` micro-batches' forward and backward passes, the later
    ones adding to the gradients of the earlier ones; the gradient reductions overlap only the
    last backward pass, and the optimizer update follows it once. A pipelined copy is simulated
    on its slowest stage, which then waits for the others to fill and drain the pipeline."""
    fwd = build_program(spec, Phase(cfg.batch, seq, seq, dep.shards, training=True, **_kernels(cfg, dep.lnc)), dt)
    if dep.pipeline > 1:
        share = -(-cfg.batch * seq * spec.hidden // dep.shards)  # a rank's share of the activation between stages
        fwd = stage_program(fwd, dep.pipeline, heaviest_stage(fwd, dep.pipeline), share)
    params, n = fwd.params_per_layer(), cfg.grad_accum
    eff = dep.chip.efficiency
    dp = DataParallel(dep.data_parallel, int(eff.grad_bucket_bytes // GRADIENT_BYTES), cfg.zero1)

    def step(**kw) -> Program:
        return training_program(fwd, params, dp, checkpoint=checkpointing(cfg), **kw)

    start = launch(dep.chip)  # one execution of the step's graph
    if n == 1:
        out = [RunPhase("training step", step(), before=start)]
    else:
        out = [RunPhase("micro-batch", step(update=False), number_from=1, before=start)]
        if n > 2:
            out.append(RunPhase("micro-batch", step(accumulate=True, update=False), n - 2,
                              STORED_MIDDLE_MICRO_BATCHES, number_from=2))
        out.append(RunPhase("micro-batch", step(accumulate=True), number_from=n))
    if dep.pipeline > 1:  # 1F1B: the other stages' first forwards and last backwards
        out.append(RunPhase(PIPELINE_BUBBLE, step(update=False), idle_periods=dep.pipeline - 1))
    return out


def simulate(cfg: RunConfig, *, max_events: int = MAX_STORED_EVENTS, efficiency: Efficiency | None = None) -> Trace:
    """Simulate ``cfg`` and return its trace. Raises :class:`sim.errors.SimError` on bad input.

    The trace is one request served by one model copy with the chip otherwise idle, as published
    latencies are measured. When the copies the deployment runs at once (``cfg.copies``, all by
    default) share memory bandwidth, the loaded run is simulated too; its times (under load, in
    the metadata) give the throughput. A training step always runs every data-parallel copy.
    ``max_events`` bounds the events kept (later repeated steps are counted, not stored);
    ``efficiency`` replaces the chip's calibrated residuals (for fitting them).
    """
    with shared_programs():  # the memory plan's probe, the phases and the loaded run build each graph once
        return _simulate(cfg, max_events, efficiency)


def _simulate(cfg: RunConfig, max_events: int, efficiency: Efficiency | None) -> Trace:
    spec, seq, dt, dep = plan(cfg)
    if efficiency is not None:
        dep = replace(dep, chip=replace(dep.chip, efficiency=efficiency))
    alone = dep if cfg.mode == "training" else replace(dep, copies=1)
    if cfg.mode == "serve":
        timeline, served = _run_serving(cfg, spec, seq, alone, dt, max_events)
        loaded = None
        if alone is not dep and _memory_share(dep) != _memory_share(alone):
            loaded = serving_record(_run_serving(cfg, spec, seq, dep, dt, 0)[1])
        return _build_trace(cfg, spec, seq, dep, alone, timeline, loaded, None, serving_record(served))
    timeline = _run_phases(cfg, spec, seq, alone, dt, max_events)
    loaded = single = None
    if alone is not dep and _memory_share(dep) != _memory_share(alone):
        loaded = _run_phases(cfg, spec, seq, dep, dt, 0).spans
    if dep.nodes > 1:  # the same per-instance work on one instance, for the scaling efficiency
        single = _run_phases(cfg, spec, seq, replace(dep, nodes=1), dt, 0).spans
    return _build_trace(cfg, spec, seq, dep, alone, timeline, loaded, single)


def _memory_share(dep: Deployment) -> float:
    return memory_share_bytes_per_s(dep.chip, dep.active_cores_per_chip)


def _timeline(cfg: RunConfig, dep: Deployment, max_events: int) -> Timeline:
    chip = dep.chip
    plan = schedule(optlevel_of(cfg, chip) or DEFAULT_OPT_LEVEL)
    ctx = CoreContext(chip, *compute_dtypes(cfg, chip), dep.active_cores_per_chip, dep.ranks_per_chip,
                      dep.copies_per_chip, dep.instance.topology, min(dep.nodes, dep.data_parallel), dep.shards,
                      dep.node_cores, run_precision(cfg, chip), cfg.kv_cache, plan.tiles_samples)
    return Timeline(ctx, max_events, plan)


def _run_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int, max_events: int) -> Timeline:
    """Schedule every phase of ``cfg`` on one core of ``dep`` (a decoder's generation request
    handled by its stack's server first; an encoder-decoder generates through transformers'
    generate, in process); keep at most ``max_events`` events."""
    timeline = _timeline(cfg, dep, max_events)
    t0 = 0.0
    if cfg.mode == "decode" and spec.family != ENCODER_DECODER:
        t0 = timeline.host_phase(REQUEST_PHASE, request_handling(dep.chip, stack_of(cfg.stack)), 0.0)
    for phase in _phases(cfg, spec, seq, dep, dt):
        if phase.idle_periods:
            t0 = timeline.idle(phase.name, phase.program, t0, phase.idle_periods)
        else:
            t0 = timeline.run(phase, t0)
    return timeline


REQUEST_PHASE = "request"  # the phase of a generation request's handling, before its prompt is encoded


def _step(starts: np.ndarray, ends: np.ndarray, amounts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step function from spans that each add ``amount`` while open."""
    if not len(starts):
        return np.zeros(1), np.zeros(1)
    # round to picoseconds so a span ending where the next begins does not count twice
    n = len(starts)
    t = np.concatenate([starts, ends])
    np.round(t, 3, out=t)
    order = np.argsort(t, kind="stable")
    t = t[order]
    v = np.empty(2 * n)
    v[:n] = amounts
    np.negative(amounts, out=v[n:])
    v = v[order]
    del order  # the temporaries of a few million spans go as soon as they are used
    np.cumsum(v, out=v)
    last = np.append(t[1:] != t[:-1], True)
    t, v = t[last], v[last]
    v[np.abs(v) < 1e-6 * max(1.0, float(np.abs(amounts).max()))] = 0.0
    # a sample that repeats the value before it changes nothing (back-to-back transfers at one
    # rate): dropping it keeps the step function exact and the series short; the last sample
    # stays, it ends the series
    changes = np.ones(len(v), bool)
    changes[1:-1] = v[1:-1] != v[:-2]
    return t[changes], v[changes]


def _build_trace(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, alone: Deployment,
                 timeline: Timeline, loaded: list | dict | None, single: list | None,
                 served: dict | None = None) -> Trace:
    sched, tables = timeline.sched, timeline.tables
    log = sched.log
    track = _moved(log.track, np.int16)
    start_ns = _moved(log.start, np.float64)
    start_ns *= 1e9
    dur_ns = _moved(log.dur, np.float64)
    dur_ns *= 1e9
    op = _moved(log.op, np.int32)
    order = np.lexsort((start_ns, track))
    track = track[order]  # a column at a time, each unsorted one let go as its sorted one is made
    start_ns = start_ns[order]
    dur_ns = dur_ns[order]
    op = op[order]
    op_layer = np.asarray(tables.op_layer, np.int32)
    layer = op_layer[op]
    n_layers = len(tables.layer_names)
    lstart = np.full(n_layers, np.inf)
    lend = np.zeros(n_layers)
    if len(layer):  # each layer's first start and last end, over the runs of it on a track (in time order)
        first = np.flatnonzero(np.concatenate(([True], (layer[1:] != layer[:-1]) | (track[1:] != track[:-1]))))
        runs = layer[first]
        layered = runs >= 0  # the host's work beside the engines' is no layer's
        np.minimum.at(lstart, runs[layered], np.minimum.reduceat(start_ns, first)[layered])
        np.maximum.at(lend, runs[layered], np.maximum.reduceat(start_ns + dur_ns, first)[layered])
    lstart[np.isinf(lstart)] = 0.0
    events = {"track": track, "start_ns": start_ns, "dur_ns": dur_ns, "op": op, "layer": layer,
              "flops": _moved(log.flops, np.float64)[order]}
    events["bytes"] = _moved(log.nbytes, np.float64)[order]
    del order
    tracks = tuple(Track(f"NC0 {name}", name, 0) for i, name in enumerate(RESOURCE_NAMES)
                   if i != GPSIMD or dep.chip.gpsimd is not None) + (Track(HOST_TRACK, HOST, 0),)
    remap = np.array([tracks.index(next(t for t in tracks if t.kind == n)) if any(t.kind == n for t in tracks)
                      else -1 for n in (*RESOURCE_NAMES, HOST)], np.int16)
    events["track"] = remap[track]
    meta = _meta(cfg, spec, seq, dep, alone, sched, timeline.spans, loaded, single, served)
    per_layer = {}
    for name in ("throttled", "waited"):
        totals = np.zeros(n_layers)
        per_op = getattr(log, name)
        if per_op:
            ops = np.fromiter(per_op.keys(), np.int64, len(per_op))
            np.add.at(totals, op_layer[ops], np.fromiter(per_op.values(), float, len(per_op)) * 1e9)
        per_layer[f"tensor_{name}_ns"] = totals.tolist()
    meta["layer_stats"] = {**tables.layer_stats, **per_layer}
    return Trace(meta=meta, tracks=tracks,
                 events=events, op_names=tuple(tables.op_names), op_layer=op_layer,
                 layer_names=tuple(tables.layer_names), layer_kinds=tuple(tables.layer_kinds),
                 layer_start_ns=lstart, layer_end_ns=lend, counters=_counters(log, events, tracks, tables))


def _moved(parts: list, dtype) -> np.ndarray:
    """A column of the scheduler's event log, moved out of it: joined, and the log's list of its
    parts emptied, so that the trace's columns never sit beside a copy of the whole log (a 4M-event
    decode held both, and the sorted columns, at once)."""
    out = column(parts, dtype)
    parts.clear()
    return out


def _counters(log, events: dict, tracks: tuple[Track, ...], tables: Tables) -> dict[str, Counter]:
    out = {}
    for name, spans in (("sbuf_bytes", log.sbuf), ("psum_bytes", None)):
        if spans is None:
            continue
        a = sbuf_rows(spans)
        spans.clear()  # moved out of the log, as its event columns are (_moved)
        t, v = _step(a[:, 0] * 1e9, a[:, 1] * 1e9, a[:, 2])
        out[name] = Counter(name, "B", t, v)
    if log.psum:
        s, e, amt = psum_columns(log.psum)
        log.psum.clear()  # moved out of the log too
        s *= 1e9
        e *= 1e9
        t, v = _step(s, e, amt)
        del s, e, amt
    else:
        t, v = np.zeros(1), np.zeros(1)
    out["psum_bytes"] = Counter("psum_bytes", "B", t, v)
    for kind, name in (("dma_read", "hbm_read_bytes_per_s"), ("dma_write", "hbm_write_bytes_per_s")):
        idx = next(i for i, tr in enumerate(tracks) if tr.kind == kind)
        sel = (events["track"] == idx) & (events["dur_ns"] > 0)
        s, d = events["start_ns"][sel], events["dur_ns"][sel]
        rate = events["bytes"][sel] / (d * 1e-9)
        np.add(s, d, out=d)  # the ends, in place of the durations: a million-event queue's copies are 8 MB each
        t, v = _step(s, d, rate) if len(s) else (np.zeros(1), np.zeros(1))
        del s, d, rate
        out[name] = Counter(name, "B/s", t, v)
    # collective traffic while each collective runs: what a chip sends over NeuronLink, and its
    # instance over EFA (kept only for runs whose collectives leave the chip or the instance)
    idx = next((i for i, tr in enumerate(tracks) if tr.kind == "collective"), -1)
    sel = (events["track"] == idx) & (events["dur_ns"] > 0)
    s, d, op = events["start_ns"][sel], events["dur_ns"][sel], events["op"][sel]
    for name, per_op in (("neuronlink_bytes_per_s", tables.op_link_bytes), ("efa_bytes_per_s", tables.op_efa_bytes)):
        sent = np.asarray(per_op, np.float64)[op] if len(op) else np.zeros(0)
        if sent.any():
            t, v = _step(s, s + d, sent / (d * 1e-9))
            out[name] = Counter(name, "B/s", t, v)
    return out


def _times(cfg: RunConfig, phases: list) -> dict[str, float]:
    """Total time of a run's phases, and for decode the prompt's and each further token's (0
    when the prompt's pass makes the only token)."""
    out = {"total_ns": (phases[-1]["end"] - phases[0]["start"]) * 1e9}
    if cfg.mode == "decode":
        encode = [p for p in phases if p["name"].startswith("prefill")]
        prefill_end = encode[-1]["end"]
        out["prefill_ns"] = (prefill_end - phases[0]["start"]) * 1e9
        # the tokens after the first (a speculative step's accepted drafts count, not those past the last)
        tokens = cfg.new_tokens - 1
        out["per_token_ns"] = (phases[-1]["end"] - prefill_end) * 1e9 / tokens if tokens else 0.0
    return out


def _config_record(cfg: RunConfig) -> dict:
    """``cfg`` as the trace's metadata keeps it: lists where it has tuples, as JSON reads them back."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()}


def _meta(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, alone: Deployment, sched: CoreScheduler,
          phases: list, loaded: list | dict | None, single: list | None, served: dict | None) -> dict:
    chip, inst = dep.chip, dep.instance
    prec = run_precision(cfg, chip)
    meta = {
        "simulator_version": __version__, "config": _config_record(cfg) | {"seq": seq},
        "chip": chip.key, "chip_name": chip.name, "core_version": chip.core_version,
        "instance": inst.name, "chips_per_instance": inst.chips, "price_usd_per_hour": inst.price_usd_per_hour,
        "model": spec.name, "model_type": spec.model_type, "family": spec.family, "mode": cfg.mode, "batch": cfg.batch,
        "seq": seq, "dtype": cfg.dtype, "matmul_dtype": prec.matmul_dtype,
        "compiler": chip.compiler, "optlevel": optlevel_of(cfg, chip),
        "cores_per_copy": dep.cores_per_copy, "lnc": dep.lnc, "memory_per_core_bytes": dep.memory_per_core_bytes,
        "copies": dep.copies, "cores_active": alone.active_cores_per_chip,
        "cores_active_under_load": dep.active_cores_per_chip,
        "peak_flops_per_core": chip.tensor.peak_flops(prec.matmul_dtype),
        "hardware": hardware(chip, inst, alone.active_cores_per_chip).record(),
        "weight_refetch_bytes": sched.weight_refetch_bytes, "requests": request_count(cfg),
        "units": {"time": "ns", "bytes": "B", "flops": "FLOP"},
        "phases": [{"name": p["name"], "start_ns": p["start"] * 1e9, "end_ns": p["end"] * 1e9, "repeat": p["repeat"],
                    "stored": p["stored"], **({"same_as": p["same_as"]} if "same_as" in p else {})} for p in phases],
        **_times(cfg, phases),
    }
    if served is not None:  # a serving run: what each request saw, and the server's figures under load
        meta["serving"] = served
        meta["total_ns"] = max(served["finish_ns"])
        meta.update(concurrency=cfg.concurrency or cfg.batch, rate=cfg.rate, new_tokens=cfg.new_tokens)
        if loaded is not None:
            meta["under_load"] = {"total_ns": max(loaded["finish_ns"]), **serving_summary(loaded)}
    elif loaded is not None:  # the copies running at once slow each other down
        meta["under_load"] = _times(cfg, loaded)
    if cfg.mode == "training":
        meta.update(grad_accum=cfg.grad_accum, nodes=dep.nodes, data_parallel=dep.data_parallel,
                    pipeline=dep.pipeline, zero1=cfg.zero1, checkpoint_activations=cfg.checkpoint_activations)
        if cfg.checkpoint_activations:
            meta["checkpoint_granularity"] = cfg.checkpoint_granularity
        if single is not None:
            meta["single_node"] = _times(cfg, single)
    if cfg.kv_cache:
        meta["kv_cache"] = cfg.kv_cache
    if cfg.quant or cfg.sparsity:
        meta["precision"] = {"quant": cfg.quant, "scales": cfg.quant_scales if cfg.quant else None,
                             "sparsity": cfg.sparsity, "weight_bits": prec.weight_bits,
                             "sparse_speedup": prec.sparse_speedup}
    spec_run = speculation(cfg)
    if spec_run is not None:  # what the run took for acceptance, and whether it stated it
        meta["speculation"] = spec_run.record()
    if cfg.mode in GENERATING and spec.family == DECODER and not spec.mla:  # what each core caches and reads
        meta["kv_heads_per_core"] = kv_heads_per_core(spec.heads, spec.kv_heads, dep.shards, cfg.gqa)
    if cfg.mode == "decode":
        meta["new_tokens"] = cfg.new_tokens
        meta["concurrency"] = cfg.batch if cfg.concurrency is None else cfg.concurrency
    return meta
