"""The memory plan: what device memory one copy of a configuration needs (weights, the widest
activation, a decoder's KV cache, a training step's activations and optimizer state), and the
deployment that holds it (:func:`plan`)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from sim.checks import resolve_chip, validate
from sim.config import (
    DTYPE_BYTES,
    GENERATING,
    RunConfig,
    checkpointing,
    compiled_length,
    compute_dtypes,
    encoder_decoder_lengths,
    flash_attention,
    run_precision,
)
from sim.deploy import Deployment, MemoryNeed, memory_needed, plan_deployment
from sim.errors import ConfigError
from sim.hardware.chip import Chip
from sim.speculation import drafter_of
from sim.workloads import (
    ModelSpec,
    Phase,
    build_program,
    get_model,
    parameters,
)
from sim.workloads.models import ENCODER_DECODER
from sim.workloads.speculation import drafter_parameters
from sim.workloads.training import recomputed
from sim.workloads.transformer import kv_heads_per_core


def _one_latent_cache(shards: int) -> int:
    """What each of ``shards`` cores keeps of an MLA model's latent cache: all of it, once."""
    return 1


def memory_need(cfg: RunConfig, spec: ModelSpec, chip: Chip, seq: int, dt: int) -> MemoryNeed:
    if spec.family == ENCODER_DECODER:  # its encoder's pass, and the weights of that and of a decoder step
        encoded, decoded = (lengths[-1] for lengths in encoder_decoder_lengths(cfg, seq))
        probe = build_program(spec, Phase(cfg.batch, encoded, encoded, beams=cfg.beams, decoder_positions=decoded), dt)
        params = parameters(spec)
    else:
        probe = build_program(spec, Phase(cfg.batch, seq, seq, training=cfg.mode == "training",
                                          flash=flash_attention(cfg), head=cfg.head), dt)
        params = sum(op.params for op in probe.ops)
    drafting = drafter_of(cfg, spec)
    if drafting is not None:  # the draft model's or the head's weights sit beside the model's
        params += drafter_parameters(drafting, dt)
    weight_bytes = run_precision(cfg, chip).weight_bits / 8
    # the activations of the widest op live somewhere: its input and output, spilled to device memory
    # when SBUF cannot hold them (what makes a batch no chip could hold refused, not simulated)
    state = 2.0 * max((op.out_elems for op in probe.ops if not op.fused), default=0) * dt
    if spec.family == ENCODER_DECODER:
        state += float(spec.kv_cache_elems(decoded, encoded)) * cfg.batch * cfg.beams * dt
    elif cfg.mode in GENERATING:  # the KV cache, which the shards split by KV heads
        positions = compiled_length(cfg, seq)
        kv_bytes = DTYPE_BYTES[cfg.kv_cache] if cfg.kv_cache else dt
        cache = float(spec.kv_cache_elems(positions)) * cfg.batch * kv_bytes
        # Gated DeltaNet layers keep a state of their own instead, split by heads like the layer
        state += float(spec.recurrent_state_bytes(dt)) * cfg.batch
        if spec.mla:  # the latent cache, shared by the heads, is whole on every core
            head_bytes, heads_of = cache, _one_latent_cache
        else:
            head_bytes, heads_of = cache / spec.kv_heads, partial(kv_heads_per_core, spec.heads, spec.kv_heads,
                                                                  gqa=cfg.gqa)
        return replace(memory_needed(params * weight_bytes, state, False, params), kv_head_bytes=head_bytes,
                       kv_heads_per_core=heads_of)
    elif cfg.mode == "training":
        outputs = [sum(op.out_elems for op in probe.ops[la.first_op:la.first_op + la.n_ops] if not op.fused)
                   for la in probe.layers]  # a fused attention kernel keeps none of its tiles
        if cfg.checkpoint_activations:  # what is kept, and one layer's recomputed activations
            kept = again = 0
            for la in probe.layers:
                last = la.first_op + la.n_ops - 1
                ops = [(i, op) for i, op in enumerate(probe.ops[la.first_op:last + 1], la.first_op) if not op.fused]
                redo = [recomputed(op, la, checkpointing(cfg)) for _, op in ops]
                kept += sum(op.out_elems for (i, op), r in zip(ops, redo, strict=True) if i == last or not r)
                again = max(again, sum(op.out_elems for (_, op), r in zip(ops, redo, strict=True) if r))
            state = float(kept + again) * dt
        else:
            state = float(sum(outputs)) * dt
        # 1F1B: the first stage holds the activations of up to one micro-batch per stage at once
        state *= min(cfg.pipeline, cfg.grad_accum)
    return memory_needed(params * weight_bytes, state, cfg.mode == "training", params, cfg.zero1)


def deployment(cfg: RunConfig) -> Deployment:
    """Where ``cfg`` would run (instance, cores per copy, copies) without simulating it."""
    return plan(cfg)[3]


def plan(cfg: RunConfig) -> tuple[ModelSpec, int, int, Deployment]:
    spec = get_model(cfg.model)
    chip, inst = resolve_chip(cfg)
    seq = validate(cfg, spec, chip)
    dt = DTYPE_BYTES[compute_dtypes(cfg, chip)[0]]
    dep = plan_deployment(chip, inst, memory_need(cfg, spec, chip, seq, dt), cfg.cores, spec.name, cfg.copies,
                          cfg.nodes, cfg.pipeline)
    if cfg.ep > 1 and dep.cores_per_copy % cfg.ep:
        raise ConfigError(f"{cfg.ep} expert-parallel groups cannot split the {dep.cores_per_copy} cores of a copy: "
                          "choose --ep dividing --cores")
    if cfg.nodes > 1 and not dep.instance.topology.efa_bytes_per_s:
        raise ConfigError(f"{dep.instance.name} has no published EFA bandwidth to join {cfg.nodes} nodes: choose an "
                          "instance with EFA (trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge...)")
    return spec, seq, dt, dep
