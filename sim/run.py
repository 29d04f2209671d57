"""``simulate``: from a model, a chip and a configuration to a :class:`Trace`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import partial

import numpy as np

from sim import __version__
from sim.cost.dma import memory_share_bytes_per_s
from sim.deploy import Deployment, MemoryNeed, memory_needed, plan_deployment
from sim.errors import ConfigError
from sim.hardware.chip import DEFAULT_OPT_LEVEL, OPT_LEVELS, Chip, Efficiency, Schedule, get_chip, schedule
from sim.hardware.instances import Instance, get_instance
from sim.host import (
    HOST,
    HOST_TRACK,
    PIPELINE_WAIT,
    HostCost,
    generate_loop,
    inference_copies,
    launch,
    request_handling,
)
from sim.lowering import GPSIMD, RESOURCE_NAMES, CoreContext, LoweredOp, lower
from sim.quant import Precision, dense, precision
from sim.scheduler import CoreScheduler, column, copy_span, log_mark, psum_columns, repeat_tail
from sim.serve import ServeLog, serve, serving_record, serving_summary
from sim.serve import lengths as serve_lengths
from sim.trace import PIPELINE_BUBBLE, Counter, Trace, Track
from sim.workloads import (
    ModelSpec,
    Phase,
    Program,
    build_program,
    get_model,
    parameters,
    speculative_step,
    training_program,
)
from sim.workloads.models import CNN, DECODER, ENCODER, ENCODER_DECODER
from sim.workloads.pipeline import heaviest_stage, stage_program
from sim.workloads.training import CHECKPOINTS, DataParallel, recomputed
from sim.workloads.training import FP32_BYTES as GRADIENT_BYTES
from sim.workloads.transformer import GQA_SHARDINGS, HEADS, REPLICATE_TO_TP, context_encoding_kernel, kv_heads_per_core

MODES = ("inference", "decode", "training", "serve")
GENERATING = ("decode", "serve")  # modes that generate tokens from a prompt
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp32": 4}
# neuronx-cc --auto-cast: an FP32 model has its matmuls cast to BF16 (the compiler's default),
# every operation, or nothing
AUTOCAST = ("matmult", "all", "none")
KV_CACHE_DTYPES = ("fp8",)  # NxD Inference's kv_cache_quant stores the cache in float8_e4m3fn
ATTENTION = ("flash", "compiler")
NKI_KERNELS = ("qkv", "mlp", "attention")  # NxD Inference's qkv_, mlp_ and attn_kernel_enabled
MIN_DECODE_BUCKET = 128  # NxD Inference token-generation buckets: powers of two from 128
# Repeated decode steps are stored as events until the trace holds this many; later steps are
# still simulated (their time counts in every metric) but not kept as events.
MAX_STORED_EVENTS = 4_000_000
MAX_REQUESTS = 100_000  # requests back to back in one run (a stream longer than this is a typo)
MAX_SPEC_K = 16  # draft tokens per speculative step
MAX_SERVED = 10_000  # requests one serving run serves
SPREADS = 3  # a spread request length is drawn within this many spreads of its mean
# a serving run's requests unless told: enough for every user to send several, as benchmarks run
SERVED_PER_USER, MIN_SERVED = 4, 32
# A training step's micro-batches between the first and the last are identical: this many of
# them are stored as events, the others counted like unstored decode steps.
STORED_MIDDLE_MICRO_BATCHES = 2


@dataclass(frozen=True)
class RunConfig:
    """What to simulate. ``seq`` is the sequence length, the prompt length in decode mode, or
    the image size of a vision model; ``None`` takes the model's default."""

    model: str
    chip: str | None = None
    instance: str | None = None
    mode: str = "inference"
    batch: int = 1
    seq: int | None = None
    new_tokens: int = 128
    dtype: str = "bf16"
    autocast: str | None = None  # what of an FP32 model the compiler casts to BF16 (AUTOCAST; None: its default)
    cores: int | None = None
    copies: int | None = None  # model copies running at once; None: every copy the instance holds
    grad_accum: int = 1  # training: micro-batches of ``batch`` whose gradients one optimizer step applies
    nodes: int = 1  # training: instances joined by EFA, the data-parallel copies spread over all of them
    zero1: bool = False  # training: optimizer state sharded over the data-parallel copies (ZeRO-1)
    checkpoint_activations: bool = False  # training: recompute each layer's forward in the backward pass
    # what checkpointing recomputes: "full" every op, "selective" the MLPs and attention's core
    # (NxD Training's activations_checkpoint_granularity)
    checkpoint_granularity: str = "full"
    pipeline: int = 1  # training: pipeline stages a copy's layers are split over (1F1B over the micro-batches)
    # outside attention and the MLP each tensor-parallel core keeps its share of the tokens (Megatron, NxD)
    sequence_parallel: bool = False
    # decode, as a serving stack compiles and runs it: ``batch`` is the batch the graphs are
    # compiled for; ``concurrency`` requests use it (None: static batching, every prompt of the
    # batch encoded together; a number: continuous batching, each prompt encoded alone and every
    # token step paying for the padded batch)
    concurrency: int | None = None
    max_seq: int | None = None  # the compiled sequence length (None: prompt + new tokens)
    bucketing: bool = True  # graphs for powers-of-two lengths from 128 (False: one graph of max_seq)
    # the lengths graphs are compiled for, as NxD Inference takes them (context_encoding_buckets,
    # token_generation_buckets): a prompt is padded to the shortest context-encoding bucket that
    # holds it, a token step's context to the shortest token-generation one (None: the automatic
    # buckets above; the largest token-generation bucket is the compiled sequence length)
    context_buckets: tuple[int, ...] | None = None
    token_buckets: tuple[int, ...] | None = None
    prefill_chunk: int = 0  # encode the prompt in chunks of this many tokens (0: in one pass)
    # attention as NxD Inference runs decoders ("flash": the fused NKI kernel, except for the
    # prompts it encodes with the compiler's ops, kernels.toml) or as the compiler's separate ops,
    # their score matrices spilling when SBUF cannot hold them ("compiler", as torch-neuronx traces
    # and Transformers NeuronX ran); None: flash for decode
    attention: str | None = None
    # how grouped-query attention's KV heads are split over the tensor-parallel cores
    # (sim.workloads.transformer.GQA_SHARDINGS): "replicate-to-tp-degree", NxD Inference's
    # default, or "convert-to-mha", which Transformers NeuronX falls back to whenever the cores do
    # not divide the KV heads (kv_heads_per_core)
    gqa: str = REPLICATE_TO_TP
    # NxD Inference's NKI kernels for the QKV projection and the MLP (qkv_kernel_enabled,
    # mlp_kernel_enabled; NKI_KERNELS): each runs as one kernel, its matmuls pipelined without the
    # compiler's per-instruction waits, its tiles kept in SBUF, its weights loaded in long runs;
    # "attention" (attn_kernel_enabled): the flash kernel also for the prompt buckets it leaves to
    # the compiler's ops by default (one core a logical core: from 512 positions, not 4,096)
    nki_kernels: tuple[str, ...] = ()
    # mixtures of experts: expert-parallel groups among the copy's cores (1: experts split
    # tensor-parallel), and how many times the mean share of routed tokens the busiest group gets
    ep: int = 1
    expert_imbalance: float = 1.0
    # inference: requests run back to back on each copy (a stream, as a server runs them); the
    # latency is one request's, the trace spans all of them. serve: the requests served (None:
    # SERVED_PER_USER per user, at least MIN_SERVED), sent by ``concurrency`` users (default
    # ``batch``) each waiting for its last, or at ``rate`` a second (Poisson, ``seed``)
    requests: int | None = None
    rate: float | None = None
    seed: int = 0
    # serve: each request's prompt and output lengths spread normally around ``seq`` and
    # ``new_tokens`` by this many tokens (within three spreads), as benchmark tools emulate data
    seq_spread: int = 0
    new_tokens_spread: int = 0
    # inference: weight matmuls quantized (sim.quant.QUANTS: weight-only int8/fp8, FP8 matmuls,
    # Trainium3's MX formats) with per-tensor or per-channel scales, and M:N structured sparsity
    # of the weights ("2:4"); None: weights in the matmul dtype, dense
    quant: str | None = None
    quant_scales: str = "channel"
    sparsity: str | None = None
    # decode and serve: the KV cache stored in fp8 (NxD Inference's kv_cache_quant), dequantized
    # on VectorE before attention reads it; None: in the model's dtype
    kv_cache: str | None = None
    # physical cores per logical NeuronCore (Trn2/Trn3: 1 or 2; None: the chip's default, 2);
    # --cores counts logical cores
    lnc: int | None = None
    # neuronx-cc's --optlevel (1, 2 or 3): how far ahead compiled code's loads go (compiler.toml);
    # Inferentia1's neuron-cc has no levels
    optlevel: int = DEFAULT_OPT_LEVEL
    # decode: speculative decoding, a draft model proposing ``spec_k`` tokens that the model
    # verifies in one step, each accepted with probability ``acceptance`` (the draft's agreement)
    draft: str | None = None
    spec_k: int = 0
    acceptance: float = 0.0
    # inference of an encoder: what it returns to the host (sim.workloads.transformer.HEADS):
    # "classifier" its class logits, "none" its hidden states and pooled output (transformers'
    # AutoModel), "mlm" a masked-LM head's logits for every token (AutoModelForMaskedLM)
    head: str = "classifier"
    # decode of an encoder-decoder (T5): beam search keeping this many hypotheses of each of the
    # ``batch`` sequences, its decoder steps running batch x beams rows
    beams: int = 1


@dataclass(frozen=True)
class _Phase:
    """A program run ``repeat`` times back to back, of which at most ``max_stored`` are kept as
    events; with ``number_from`` its executions are numbered from there even when not repeated.
    With ``idle_periods`` the core waits instead, for that many times the program's duration.
    Each execution is preceded by the host's costs ``before`` (the runtime's launch, the inputs'
    copy) and followed by those ``after`` (the outputs' copy, the host's loop calling the next)."""

    name: str
    program: Program
    repeat: int = 1
    max_stored: int | None = None
    number_from: int = 0
    idle_periods: float = 0.0  # an idle wait this many times as long as ``program`` takes (a pipeline bubble)
    numbered: bool = True  # False: every execution keeps the layers' own names (requests back to back)
    before: tuple[HostCost, ...] = ()
    after: tuple[HostCost, ...] = ()

    def label(self, execution: int) -> str:
        """The name of the ``execution``-th run (from 0), which prefixes its layers' names."""
        if self.number_from:
            return f"{self.name} {self.number_from + execution}"
        return f"{self.name} #{execution + 1}" if self.repeat > 1 and self.numbered else self.name


def _resolve_chip(cfg: RunConfig) -> tuple[Chip, Instance | None]:
    inst = get_instance(cfg.instance) if cfg.instance else None
    if cfg.chip is None:
        if inst is None:
            raise ConfigError("name a chip (--chips) or an instance (--instance)")
        chip = inst.chip
    else:
        chip = get_chip(cfg.chip)
        if inst is not None and inst.chip.key != chip.key:
            raise ConfigError(f"instance {inst.name} has {inst.chip.name} chips, not {chip.name}")
    if cfg.lnc is None or cfg.lnc == chip.lnc_default:
        return chip, inst
    if cfg.lnc not in chip.lnc_options:
        options = " or ".join(map(str, chip.lnc_options))
        raise ConfigError(f"{chip.name} takes a logical NeuronCore size (LNC) of {options}, not {cfg.lnc}"
                          + ("" if len(chip.lnc_options) > 1 else " (LNC applies to Trainium2 and Trainium3)"))
    # the runtime groups cfg.lnc physical cores into each logical core: the chip as the run sees it
    chip = replace(chip, lnc_default=cfg.lnc)
    return chip, None if inst is None else replace(inst, chip=chip)


def _validate(cfg: RunConfig, spec: ModelSpec, chip: Chip) -> int:
    if cfg.mode not in MODES:
        raise ConfigError(f"unknown mode '{cfg.mode}': choose one of {', '.join(MODES)}")
    if cfg.mode in GENERATING and spec.family not in (DECODER, ENCODER_DECODER):
        raise ConfigError(f"{cfg.mode} mode needs a GPT-style decoder; {spec.name} is {_a(spec.family)} model")
    if spec.family == ENCODER_DECODER:
        _validate_encoder_decoder(cfg, spec)
    if not isinstance(cfg.beams, int) or isinstance(cfg.beams, bool) or cfg.beams < 1:
        raise ConfigError(f"beams must be a positive integer, got {cfg.beams}")
    if cfg.beams > 1 and spec.family != ENCODER_DECODER:
        raise ConfigError(f"beam search (--beams) is modelled for encoder-decoders (T5); {spec.name} is a "
                          f"{spec.family} model")
    for name, value in (("batch", cfg.batch), ("new tokens", cfg.new_tokens), ("cores", cfg.cores or 1),
                        ("copies", 1 if cfg.copies is None else cfg.copies), ("grad_accum", cfg.grad_accum)):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value}")
    if cfg.optlevel not in OPT_LEVELS:
        raise ConfigError(f"compiler optimization level must be one of {', '.join(map(str, OPT_LEVELS))} "
                          f"(neuronx-cc --optlevel), got {cfg.optlevel}")
    most = MAX_SERVED if cfg.mode == "serve" else MAX_REQUESTS
    if cfg.requests is not None and (not isinstance(cfg.requests, int) or not 1 <= cfg.requests <= most):
        raise ConfigError(f"requests must be a whole number from 1 to {most:,}, got {cfg.requests}")
    if (cfg.requests or 1) > 1 and cfg.mode not in ("inference", "serve"):
        raise ConfigError(f"requests back to back are for inference and serve modes; in {cfg.mode} mode use "
                          "--new-tokens or --grad-accum")
    if cfg.grad_accum > 1 and cfg.mode != "training":
        raise ConfigError(f"gradient accumulation is for training; {cfg.mode} mode has no optimizer step")
    if not isinstance(cfg.nodes, int) or cfg.nodes < 1:
        raise ConfigError(f"nodes must be a positive integer, got {cfg.nodes}")
    if not isinstance(cfg.pipeline, int) or cfg.pipeline < 1:
        raise ConfigError(f"pipeline stages must be a positive integer, got {cfg.pipeline}")
    training_only = [name for name, on in (("--nodes", cfg.nodes > 1), ("--zero 1", cfg.zero1),
                                           ("--checkpoint-activations", cfg.checkpoint_activations),
                                           ("--pipeline", cfg.pipeline > 1)) if on]
    if cfg.head not in HEADS:
        raise ConfigError(f"unknown head '{cfg.head}': choose one of {', '.join(HEADS)}")
    if cfg.head != "classifier" and (spec.family != ENCODER or cfg.mode != "inference"):
        raise ConfigError(f"--head {cfg.head} is an encoder's inference output; {spec.name} in {cfg.mode} mode "
                          "has its own")
    if cfg.checkpoint_granularity not in CHECKPOINTS:
        raise ConfigError(f"unknown activation checkpointing '{cfg.checkpoint_granularity}': choose one of "
                          f"{', '.join(CHECKPOINTS)}")
    if training_only and cfg.mode != "training":
        raise ConfigError(f"{training_only[0]} is for training; {cfg.mode} mode has no training step")
    _validate_serving(cfg)
    if cfg.draft is not None or cfg.spec_k or cfg.acceptance:
        _validate_speculation(cfg, spec)
    if not isinstance(cfg.ep, int) or cfg.ep < 1:
        raise ConfigError(f"expert-parallel groups must be a positive integer, got {cfg.ep}")
    if cfg.ep > 1 and not spec.experts:
        raise ConfigError(f"{spec.name} is not a mixture-of-experts model: --ep splits experts")
    if cfg.ep > 1 and spec.experts % cfg.ep:
        raise ConfigError(f"{spec.name} has {spec.experts} experts: they cannot split into {cfg.ep} "
                          "expert-parallel groups")
    imbalance = cfg.expert_imbalance
    if isinstance(imbalance, bool) or not isinstance(imbalance, int | float) or not 1 <= imbalance <= max(1, cfg.ep):
        raise ConfigError(f"expert imbalance is the busiest group's share of the routed tokens over the mean, "
                          f"from 1 to --ep ({cfg.ep}); got {imbalance}")
    if cfg.pipeline > 1 and spec.is_vision:
        raise ConfigError(f"pipeline stages are for text transformers; split {spec.name} with --cores or --copies")
    if cfg.pipeline > max(1, spec.layers):
        raise ConfigError(f"{spec.name} has {spec.layers} blocks to split into {cfg.pipeline} pipeline stages")
    if spec.family == CNN and (cfg.cores or 1) > 1:
        raise ConfigError(f"{spec.name} cannot span {cfg.cores} NeuronCores: the Neuron SDK has no tensor-parallel "
                          "CNNs (one copy per core); use --copies for more copies running at once")
    seq = spec.default_seq if cfg.seq is None else cfg.seq
    if not isinstance(seq, int) or seq < 1:
        raise ConfigError(f"sequence length must be a positive integer, got {seq}")
    # learned position tables end at max_positions; rotary embeddings (Llama, Mistral) have no
    # table, and Neuron deployments run them past their trained context
    limit = spec.max_positions if spec.learned_positions else 0
    spread = SPREADS * (cfg.seq_spread + cfg.new_tokens_spread)
    total = seq + (cfg.new_tokens if cfg.mode in GENERATING else 0) + spread
    if spec.family == ENCODER_DECODER:  # the prompt is the encoder's, the new tokens the decoder's
        total = max(seq, cfg.new_tokens)
    if cfg.max_seq is not None and total > cfg.max_seq:
        longest = " (the longest of their spread lengths)" if spread else ""
        raise ConfigError(f"a prompt of {seq} and {cfg.new_tokens} new tokens{longest} need {total} positions; "
                          f"the graphs are compiled for {cfg.max_seq}")
    if cfg.mode in GENERATING:
        _validate_buckets(cfg, seq + SPREADS * cfg.seq_spread, total)
    if limit and not spec.is_vision and total > limit:
        raise ConfigError(f"{spec.name} handles at most {limit} positions; asked for {total}")
    if spec.is_vision and seq % (spec.patch_size if spec.family != CNN else 1):
        raise ConfigError(f"image size {seq} must be a multiple of the patch size {spec.patch_size}")
    pools = spec.pools
    if seq >> pools < 1:  # a 2x2 max pool of a 1 x 1 map leaves nothing (torchvision refuses it too)
        raise ConfigError(f"{spec.name}'s {pools} max pools need an image of at least {1 << pools} pixels; got {seq}")
    if cfg.attention not in (None, *ATTENTION):
        raise ConfigError(f"unknown attention '{cfg.attention}': choose one of {', '.join(ATTENTION)}")
    if cfg.gqa not in GQA_SHARDINGS:
        raise ConfigError(f"unknown GQA sharding '{cfg.gqa}': choose one of {', '.join(GQA_SHARDINGS)}")
    if not isinstance(cfg.nki_kernels, tuple | list):
        raise ConfigError(f"NKI kernels are a list of names, got {cfg.nki_kernels!r}")
    unknown = [k for k in cfg.nki_kernels if k not in NKI_KERNELS]
    if unknown:
        raise ConfigError(f"unknown NKI kernel '{unknown[0]}': choose from {', '.join(NKI_KERNELS)}")
    if cfg.nki_kernels and cfg.mode not in GENERATING:
        raise ConfigError("the QKV, MLP and attention kernel settings are NxD Inference's, for decode and serve "
                          "modes")
    if cfg.autocast is not None and cfg.autocast not in AUTOCAST:
        raise ConfigError(f"unknown autocast '{cfg.autocast}': choose one of {', '.join(AUTOCAST)}")
    act, matmul = compute_dtypes(cfg, chip)
    if cfg.dtype not in DTYPE_BYTES or matmul not in chip.dtypes:
        fp32 = " (an FP32 model needs --autocast matmult or all)" if cfg.dtype == "fp32" else ""
        raise ConfigError(f"{chip.name} does not run {cfg.dtype} matmuls{fp32}: choose one of "
                          f"{', '.join(chip.dtypes)}")
    if (cfg.quant or cfg.sparsity) and cfg.mode == "training":
        raise ConfigError("--quant and --sparsity are for inference; a training run keeps its weights in --dtype")
    run_precision(cfg, chip)  # refuses formats the chip lacks
    if cfg.kv_cache is not None:
        if cfg.kv_cache not in KV_CACHE_DTYPES:
            raise ConfigError(f"unknown KV cache format '{cfg.kv_cache}': choose {', '.join(KV_CACHE_DTYPES)}")
        if cfg.mode not in GENERATING:
            raise ConfigError("a quantized KV cache is for decode and serve modes")
        if cfg.kv_cache not in chip.vector.elems_per_cycle:
            raise ConfigError(f"{chip.name}'s engines do not read {cfg.kv_cache}: its KV cache cannot be quantized")
    return seq


def run_precision(cfg: RunConfig, chip: Chip) -> Precision:
    """How ``cfg``'s weight matmuls store and multiply their weights on ``chip`` (:mod:`sim.quant`).

    The compiler casts an FP32 model's weights to the matmuls' BF16 ahead of time when they are
    constants (inference). A training step's weights are its parameters, which the optimizer
    updates: they stay FP32 in device memory and are cast in the step (PyTorch autocast's
    ``linear`` casts its weight; the compiler's auto-cast likewise), a VectorE pass as weight-only
    quantization's dequantization is, by each matmul that reads them: the forward's and the input
    gradient's. (Keeping the forward's BF16 copy for the backward pass instead, which autograd
    allows, moves as many bytes, 2 written and 2 read for 4 read, and saves one pass.)"""
    act, matmul = compute_dtypes(cfg, chip)
    if cfg.mode == "training" and act == "fp32" and matmul != "fp32":
        return Precision(8.0 * DTYPE_BYTES["fp32"], matmul, dequantize_weights=True, stored="fp32")
    return precision(chip, dense(matmul, DTYPE_BYTES[matmul]), cfg.quant, cfg.quant_scales, cfg.sparsity)


def _validate_encoder_decoder(cfg: RunConfig, spec: ModelSpec) -> None:
    """What an encoder-decoder runs: generation (decode mode) with the prompt encoded in one pass."""
    if cfg.mode != "decode":
        raise ConfigError(f"{spec.name} is an encoder-decoder: simulate it generating (--mode decode); "
                          f"{cfg.mode} mode is not modelled for it")
    other = [name for name, on in (("--draft", cfg.draft), ("--prefill-chunk", cfg.prefill_chunk),
                                   ("--concurrency", cfg.concurrency is not None), ("--kv-cache", cfg.kv_cache),
                                   ("NxD Inference's NKI kernels", cfg.nki_kernels)) if on]
    if other:
        raise ConfigError(f"{other[0]} is not modelled for encoder-decoders such as {spec.name}")


def _validate_speculation(cfg: RunConfig, spec: ModelSpec) -> None:
    if cfg.mode not in GENERATING:
        raise ConfigError("speculative decoding (--draft) is for decode and serve modes")
    if not cfg.draft:
        raise ConfigError("--spec-k and --acceptance go with --draft MODEL, the model that proposes the tokens")
    draft = get_model(cfg.draft)
    if draft.family != DECODER:
        raise ConfigError(f"the draft {draft.name} must be a GPT-style decoder, not {_a(draft.family)} model")
    if not isinstance(cfg.spec_k, int) or not 1 <= cfg.spec_k <= MAX_SPEC_K:
        raise ConfigError(f"--spec-k is the tokens the draft proposes per step, 1 to {MAX_SPEC_K}; got {cfg.spec_k}")
    p = cfg.acceptance
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
        raise ConfigError(f"--acceptance is a probability from 0 to 1, got {p}")


def _validate_buckets(cfg: RunConfig, prompt: int, total: int) -> None:
    """Bucket lists NxD Inference would compile: positive lengths within the compiled sequence
    length, a context-encoding one for the longest ``prompt`` (unless prompts go in chunks) and a
    token-generation one for all ``total`` positions."""
    for name, buckets in (("context-encoding", cfg.context_buckets), ("token-generation", cfg.token_buckets)):
        if buckets is None:
            continue
        if (not isinstance(buckets, tuple | list) or not buckets
                or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in buckets)):
            raise ConfigError(f"{name} buckets must be positive whole numbers of positions, got {buckets!r}")
        if not cfg.bucketing:
            raise ConfigError(f"{name} buckets and one graph of the compiled length (--no-buckets) exclude each "
                              "other")
        if cfg.max_seq is not None and max(buckets) > cfg.max_seq:
            raise ConfigError(f"the {name} bucket of {max(buckets)} positions is longer than the compiled "
                              f"sequence length, {cfg.max_seq}")
    if cfg.context_buckets and not cfg.prefill_chunk and prompt > max(cfg.context_buckets):
        raise ConfigError(f"a prompt of {prompt} tokens fits no context-encoding bucket: the largest is "
                          f"{max(cfg.context_buckets)}")
    if cfg.token_buckets and total > max(cfg.token_buckets):
        raise ConfigError(f"the prompt and new tokens need {total} positions: the largest token-generation "
                          f"bucket is {max(cfg.token_buckets)}")


def _validate_serving(cfg: RunConfig) -> None:
    serving = (cfg.concurrency is not None or cfg.max_seq is not None or not cfg.bucketing or cfg.prefill_chunk
               or cfg.context_buckets is not None or cfg.token_buckets is not None)
    if serving and cfg.mode not in GENERATING:
        raise ConfigError("concurrency, compiled sequence length, buckets and prefill chunks are for decode and "
                          "serve modes")
    if (cfg.rate is not None or cfg.seed) and cfg.mode != "serve":
        raise ConfigError("a request rate (and its seed) is for serve mode")
    if cfg.rate is not None and (isinstance(cfg.rate, bool) or not isinstance(cfg.rate, int | float)
                                 or not 0 < cfg.rate < float("inf")):
        raise ConfigError(f"the request rate is requests a second, a positive number; got {cfg.rate}")
    if not isinstance(cfg.seed, int) or cfg.seed < 0:
        raise ConfigError(f"the seed must be a whole number from 0, got {cfg.seed}")
    for name, value in (("prompt length spread", cfg.seq_spread), ("output length spread", cfg.new_tokens_spread)):
        if not isinstance(value, int) or value < 0:
            raise ConfigError(f"the {name} is a whole number of tokens from 0, got {value}")
        if value and cfg.mode != "serve":
            raise ConfigError(f"a {name} is for serve mode, where every request draws its own")
    for name, value in (("concurrency", cfg.concurrency), ("max_seq", cfg.max_seq)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ConfigError(f"{name} must be a positive integer, got {value}")
    if not isinstance(cfg.prefill_chunk, int) or cfg.prefill_chunk < 0:
        raise ConfigError(f"prefill chunk must be a whole number of tokens, got {cfg.prefill_chunk}")
    if cfg.mode == "decode" and cfg.concurrency is not None and cfg.concurrency > cfg.batch:
        raise ConfigError(f"{cfg.concurrency} requests cannot run on a graph compiled for batch {cfg.batch}")


def compute_dtypes(cfg: RunConfig, chip: Chip) -> tuple[str, str]:
    """The data types of a run's activations and of its matmuls (and weights) on ``chip``, whose
    compiler casts FP32 models as ``cfg.autocast`` says (its own default when None)."""
    autocast = cfg.autocast or chip.autocast_default
    if cfg.dtype != "fp32" or autocast == "none":
        return cfg.dtype, cfg.dtype
    return ("bf16", "bf16") if autocast == "all" else ("fp32", "bf16")


def graph_lengths(max_seq: int, bucketing: bool) -> list[int]:
    """The sequence lengths graphs are compiled for: NxD Inference's automatic buckets, powers of
    two from 128 below ``max_seq`` and ``max_seq`` itself, or ``max_seq`` alone."""
    if not bucketing:
        return [max_seq]
    return sorted({*(b for b in (MIN_DECODE_BUCKET << i for i in range(32)) if b < max_seq), max_seq})


def bucket_lengths(cfg: RunConfig, seq: int) -> tuple[list[int], list[int]]:
    """The prompt lengths a generating run's context-encoding graphs are compiled for, and the
    context lengths of its token-generation graphs: as given, else the automatic buckets."""
    auto = graph_lengths(compiled_length(cfg, seq), cfg.bucketing)
    return (sorted(cfg.context_buckets) if cfg.context_buckets else auto,
            sorted(cfg.token_buckets) if cfg.token_buckets else auto)


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


def flash_attention(cfg: RunConfig) -> bool:
    return (cfg.attention or ("flash" if cfg.mode in GENERATING else "compiler")) == "flash"


def _kernels(cfg: RunConfig, prompt: int = 0, lnc: int = 1) -> dict:
    """How a run's programs are built: its attention kernel (for a whole prompt of ``prompt``
    positions on logical cores of ``lnc``, the one NxD Inference picks), its QKV and MLP kernels,
    whether tokens are split, and how experts are spread."""
    asked = "attention" in cfg.nki_kernels
    flash = flash_attention(cfg) and (not prompt or context_encoding_kernel(prompt, lnc, asked))
    return {"flash": flash, "sequence_parallel": cfg.sequence_parallel, "ep": cfg.ep, "gqa": cfg.gqa,
            "expert_imbalance": float(cfg.expert_imbalance), "head": cfg.head,
            "qkv_kernel": "qkv" in cfg.nki_kernels, "mlp_kernel": "mlp" in cfg.nki_kernels}


def _prefill_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int, lengths: list[int]
                    ) -> list[_Phase]:
    """The prompt's encoding: one graph of the bucket that holds it (the padding is computed
    too), or chunks of ``prefill_chunk`` tokens (:func:`static_chunks`)."""
    batch = cfg.batch if cfg.concurrency is None else 1  # continuous batching encodes one prompt at a time
    tp, start = dep.shards, launch(dep.chip)
    if not cfg.prefill_chunk:
        ce = _bucket(seq, lengths)
        return [_Phase("prefill", build_program(spec, Phase(batch, ce, ce, tp, **_kernels(cfg, ce, dep.lnc)), dt),
                       before=start)]
    chunks = -(-seq // cfg.prefill_chunk)
    if static_chunks(cfg):  # one graph for every chunk, run back to back
        return [_Phase("prefill chunk", _chunk_program(cfg, spec, 0, batch, seq, tp, dt), chunks, number_from=1,
                       before=start)]
    return [_Phase(f"prefill chunk {i + 1}", _chunk_program(cfg, spec, i, batch, seq, tp, dt), before=start)
            for i in range(chunks)]


def static_chunks(cfg: RunConfig) -> bool:
    """Whether a run's prompt chunks are optimum-neuron's chunked prefill (NxD Inference's vLLM
    does not chunk prefills): one graph for every chunk, the token-generation attention in the
    compiler's ops over the whole compiled cache and the chunk's own keys, the chunk padded to
    its size. With ``--attention flash`` asked for, each chunk is a kernel that meets the chunks
    before it instead."""
    return cfg.attention != "flash"


def _chunk_program(cfg: RunConfig, spec: ModelSpec, n: int, batch: int, seq: int, tp: int, dt: int) -> Program:
    """The program of chunk ``n`` of a prompt (:func:`static_chunks`)."""
    chunk = cfg.prefill_chunk
    if static_chunks(cfg):
        phase = Phase(batch, chunk, compiled_length(cfg, seq) + chunk, tp, static_chunk=True,
                      **{**_kernels(cfg), "flash": False})
    else:
        phase = Phase(batch, chunk, (n + 1) * chunk, tp, **_kernels(cfg))
    return build_program(spec, phase, dt)


def _phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int) -> list[_Phase]:
    tp = dep.shards
    if spec.family == ENCODER_DECODER:
        return _encoder_decoder_phases(cfg, spec, seq, dep, dt)
    if cfg.mode == "training":
        return _training_phases(cfg, spec, seq, dep, dt)
    start = launch(dep.chip)
    if cfg.mode == "inference":
        phase = Phase(cfg.batch, seq, seq, tp, **_kernels(cfg))
        # the traced model's inputs and outputs in its own dtype: the compiler's auto-cast is inside the graph
        copy_in, copy_out = inference_copies(spec, phase, DTYPE_BYTES[cfg.dtype], dep.chip)
        return [_Phase("inference", build_program(spec, phase, dt), repeat=request_count(cfg), numbered=False,
                       before=copy_in + start, after=copy_out)]
    prompts, contexts = bucket_lengths(cfg, seq)
    out = _prefill_phases(cfg, spec, seq, dep, dt, prompts)
    per_step = tokens_per_step(cfg)
    for bucket, steps in _decode_buckets(seq, cfg.new_tokens, contexts):
        out.append(_Phase(f"decode ctx {bucket}", _token_step(cfg, spec, bucket, tp, dt),
                          max(1, round(steps / per_step)) if cfg.draft else steps, before=start))
    return out


def encoder_decoder_lengths(cfg: RunConfig, seq: int) -> tuple[list[int], list[int]]:
    """An encoder-decoder's graph lengths: its encoder's for the prompt and its decoder's for
    the tokens it generates, as asked, else the automatic buckets up to the compiled length
    (``max_seq``, else the longer of the prompt and the new tokens)."""
    length = cfg.max_seq or max(cfg.token_buckets or [max(seq, cfg.new_tokens)])
    auto = graph_lengths(length, cfg.bucketing)
    return (sorted(cfg.context_buckets) if cfg.context_buckets else auto,
            sorted(cfg.token_buckets) if cfg.token_buckets else auto)


def _encoder_decoder_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int) -> list[_Phase]:
    """An encoder-decoder generating: the encoder's pass over the prompt's bucket (which fills the
    decoder's caches), then a decoder step per new token, the first of them part of the time to
    first token. A step's self-attention spans the bucket that holds the tokens so far, its
    cross-attention the encoder's positions. Attention is the compiler's ops unless ``--attention
    flash`` asks for the kernel (the Neuron T5 tutorial runs transformers' attention). After each
    step the core waits for transformers' generate loop on the host to call the next."""
    prompts, contexts = encoder_decoder_lengths(cfg, seq)
    encoded, tp, start, host = _bucket(seq, prompts), dep.shards, launch(dep.chip), generate_loop(dep.chip)
    kernels = {**_kernels(cfg), "flash": cfg.attention == "flash"}

    def step(positions: int) -> Program:
        return build_program(spec, Phase(cfg.batch, 1, positions, tp, decode_step=True, beams=cfg.beams,
                                         encoder_positions=encoded, **kernels), dt)

    encoder = Phase(cfg.batch, encoded, encoded, tp, beams=cfg.beams, decoder_positions=contexts[-1], **kernels)
    out = [_Phase("prefill encoder", build_program(spec, encoder, dt), before=start),
           _Phase("prefill first token", step(_bucket(1, contexts)), before=start, after=host)]
    out += [_Phase(f"decode ctx {bucket}", step(bucket), steps, before=start, after=host) for bucket, steps in
            _decode_buckets(1, cfg.new_tokens, contexts)]
    return out


def _token_step(cfg: RunConfig, spec: ModelSpec, bucket: int, tp: int, dt: int) -> Program:
    """One token step of the graph compiled for ``cfg.batch`` over contexts of ``bucket``
    positions: the model's, or the draft's proposals and the model's verification."""
    phase = Phase(cfg.batch, 1, bucket, tp, decode_step=True, **_kernels(cfg))
    if not cfg.draft:
        return build_program(spec, phase, dt)
    return speculative_step(spec, get_model(cfg.draft), cfg.spec_k, phase, dt)


def _a(word: str) -> str:
    """``word`` with its indefinite article."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def request_count(cfg: RunConfig) -> int:
    """The requests a run serves: as asked, else 1, or for a serving run enough for every user
    to send several."""
    if cfg.requests is not None:
        return cfg.requests
    if cfg.mode != "serve":
        return 1
    return max(MIN_SERVED, SERVED_PER_USER * (cfg.concurrency or cfg.batch))


def _run_serving(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int, max_events: int
                 ) -> tuple[_Timeline, ServeLog]:
    """Serve ``cfg``'s requests on one copy of ``dep`` (:func:`sim.serve.serve`), each step a
    program on the core's timeline after the runtime's launch of it, and each request's handling
    by the server on the host track from when it was sent."""
    timeline = _timeline(cfg, dep, max_events)
    prompts, contexts = bucket_lengths(cfg, seq)
    steps: dict[tuple[str, int], _Phase] = {}
    start, tp, chunk = launch(dep.chip), dep.shards, cfg.prefill_chunk

    def run(key: tuple[str, int], t: float) -> float:
        if key not in steps:
            kind, n = key
            if kind == "decode":
                steps[key] = _Phase(f"decode ctx {n}", _token_step(cfg, spec, n, tp, dt), before=start)
            elif kind == "chunk":  # chunk n of a prompt (any chunk: one graph for all, :func:`static_chunks`)
                name = "prefill chunk" if static_chunks(cfg) else f"prefill chunk {n + 1}"
                steps[key] = _Phase(name, _chunk_program(cfg, spec, n, 1, seq, tp, dt), before=start)
            else:  # a whole prompt, padded to its bucket
                steps[key] = _Phase(f"prefill ctx {n}",
                                    build_program(spec, Phase(1, n, n, tp, **_kernels(cfg, n, dep.lnc)), dt),
                                    before=start)
        return timeline.run(steps[key], t)

    def prefill(t: float, prompt: int, i: int) -> float:
        if chunk:
            return run(("chunk", 0 if static_chunks(cfg) else i), t)
        return run(("prefill", _bucket(prompt, prompts)), t)

    rng = np.random.default_rng(cfg.seed + 2)
    n = request_count(cfg)
    handling = request_handling(dep.chip)
    log = serve(prompts=serve_lengths(seq, cfg.seq_spread, n, rng),
                outputs=serve_lengths(cfg.new_tokens, cfg.new_tokens_spread, n, rng),
                concurrency=cfg.concurrency, rate=cfg.rate, seed=cfg.seed, batch=cfg.batch, chunk=chunk,
                handling_s=sum(c.dur_s for c in handling), prefill=prefill,
                decode=lambda t, context: run(("decode", _bucket(context, contexts)), t),
                speculation=(cfg.spec_k, cfg.acceptance) if cfg.draft else None)
    for sent in log.sent:  # beside the engine's steps for the requests already in flight: no layer's
        timeline.beside(handling, sent)
    return timeline, log


def compiled_length(cfg: RunConfig, seq: int) -> int:
    """The sequence length a generating run's graphs are compiled for: as asked (or the largest
    token-generation bucket), else the longest prompt and output its requests may have."""
    if cfg.max_seq:
        return cfg.max_seq
    if cfg.token_buckets:
        return max(cfg.token_buckets)
    return seq + cfg.new_tokens + SPREADS * (cfg.seq_spread + cfg.new_tokens_spread)


def tokens_per_step(cfg: RunConfig) -> float:
    """Tokens one decode step yields: 1, or with speculation the expected accepted draft tokens and
    the model's own next one, (1 - p^(k+1)) / (1 - p) for k drafts each accepted with probability
    p while the ones before it were (Leviathan et al., 2023)."""
    if not cfg.draft:
        return 1.0
    p, k = cfg.acceptance, cfg.spec_k
    return float(k + 1) if p >= 1 else (1 - p ** (k + 1)) / (1 - p)


def _training_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int) -> list[_Phase]:
    """One training step: ``grad_accum`` micro-batches' forward and backward passes, the later
    ones adding to the gradients of the earlier ones; the gradient reductions overlap only the
    last backward pass, and the optimizer update follows it once. A pipelined copy is simulated
    on its slowest stage, which then waits for the others to fill and drain the pipeline."""
    fwd = build_program(spec, Phase(cfg.batch, seq, seq, dep.shards, training=True, **_kernels(cfg)), dt)
    if dep.pipeline > 1:
        share = -(-cfg.batch * seq * spec.hidden // dep.shards)  # a rank's share of the activation between stages
        fwd = stage_program(fwd, dep.pipeline, heaviest_stage(fwd, dep.pipeline), share)
    params, n = fwd.params_per_layer(), cfg.grad_accum
    eff = dep.chip.efficiency
    dp = DataParallel(dep.data_parallel, int(eff.grad_bucket_bytes // GRADIENT_BYTES), cfg.zero1)

    def step(**kw) -> Program:
        return training_program(fwd, params, dp, checkpoint=_checkpoint(cfg), **kw)

    start = launch(dep.chip)  # one execution of the step's graph
    if n == 1:
        out = [_Phase("training step", step(), before=start)]
    else:
        out = [_Phase("micro-batch", step(update=False), number_from=1, before=start)]
        if n > 2:
            out.append(_Phase("micro-batch", step(accumulate=True, update=False), n - 2,
                              STORED_MIDDLE_MICRO_BATCHES, number_from=2))
        out.append(_Phase("micro-batch", step(accumulate=True), number_from=n))
    if dep.pipeline > 1:  # 1F1B: the other stages' first forwards and last backwards
        out.append(_Phase(PIPELINE_BUBBLE, step(update=False), idle_periods=dep.pipeline - 1))
    return out


def _checkpoint(cfg: RunConfig) -> str:
    """The activation checkpointing granularity of a training run, "" for none."""
    return cfg.checkpoint_granularity if cfg.checkpoint_activations else ""


def _one_latent_cache(shards: int) -> int:
    """What each of ``shards`` cores keeps of an MLA model's latent cache: all of it, once."""
    return 1


def _memory_need(cfg: RunConfig, spec: ModelSpec, chip: Chip, seq: int, dt: int) -> MemoryNeed:
    if spec.family == ENCODER_DECODER:  # its encoder's pass, and the weights of that and of a decoder step
        encoded, decoded = (lengths[-1] for lengths in encoder_decoder_lengths(cfg, seq))
        probe = build_program(spec, Phase(cfg.batch, encoded, encoded, beams=cfg.beams, decoder_positions=decoded), dt)
        params = parameters(spec)
    else:
        probe = build_program(spec, Phase(cfg.batch, seq, seq, training=cfg.mode == "training",
                                          flash=flash_attention(cfg), head=cfg.head), dt)
        params = sum(op.params for op in probe.ops)
    if cfg.draft:  # the draft model's weights sit beside the model's
        draft = get_model(cfg.draft)
        params += sum(op.params for op in build_program(draft, Phase(1, 8, 8), dt).ops)
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
                redo = [recomputed(op, la, _checkpoint(cfg)) for _, op in ops]
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
    return _plan(cfg)[3]


def _plan(cfg: RunConfig) -> tuple[ModelSpec, int, int, Deployment]:
    spec = get_model(cfg.model)
    chip, inst = _resolve_chip(cfg)
    seq = _validate(cfg, spec, chip)
    dt = DTYPE_BYTES[compute_dtypes(cfg, chip)[0]]
    dep = plan_deployment(chip, inst, _memory_need(cfg, spec, chip, seq, dt), cfg.cores, spec.name, cfg.copies,
                          cfg.nodes, cfg.pipeline)
    if cfg.ep > 1 and dep.shards % cfg.ep:
        raise ConfigError(f"{cfg.ep} expert-parallel groups cannot split the {dep.shards} cores of a copy: "
                          "choose --ep dividing --cores")
    if cfg.nodes > 1 and not dep.instance.topology.efa_bytes_per_s:
        raise ConfigError(f"{dep.instance.name} has no published EFA bandwidth to join {cfg.nodes} nodes: choose an "
                          "instance with EFA (trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge...)")
    return spec, seq, dt, dep


def simulate(cfg: RunConfig, *, max_events: int = MAX_STORED_EVENTS, efficiency: Efficiency | None = None) -> Trace:
    """Simulate ``cfg`` and return its trace. Raises :class:`sim.errors.SimError` on bad input.

    The trace is one request served by one model copy with the chip otherwise idle, as published
    latencies are measured. When the copies the deployment runs at once (``cfg.copies``, all by
    default) share memory bandwidth, the loaded run is simulated too; its times (under load, in
    the metadata) give the throughput. A training step always runs every data-parallel copy.
    ``max_events`` bounds the events kept (later repeated steps are counted, not stored);
    ``efficiency`` replaces the chip's calibrated residuals (for fitting them).
    """
    spec, seq, dt, dep = _plan(cfg)
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


class _Timeline:
    """One core's schedule, program after program from the times given, keeping at most
    ``max_events`` events, with the host's costs around each execution on the host track. A
    program run before (with the same host costs) is not scheduled again: its first execution's
    events are copied to the new time (what the core does for it is the same), and a run right
    after the same program's extends that phase (one more of its executions)."""

    def __init__(self, ctx: CoreContext, max_events: int, plan: Schedule) -> None:
        self.ctx, self.max_events, self.plan = ctx, max_events, plan
        self.sched = CoreScheduler(ctx.chip.sbuf_bytes, ctx.chip.tensor.throttle, plan)
        self.tables = _Tables()
        self.spans: list[dict] = []  # per phase: name, start, end (s), repeat, stored, same_as
        # per program and host costs: its first execution's log marks, first op id, start, period,
        # phase index, lowered ops and events
        self._seen: dict[tuple, tuple] = {}
        self._last: tuple[tuple, float] | None = None  # the execution of the last phase, and when it ended
        self._stored = self._counted = 0  # events the log holds, over its first _counted blocks

    def _room(self, per_step: int) -> int:
        """How many more executions of ``per_step`` events the log has room for. The log only
        grows: its new blocks are counted on top of the last count (counting all of them on every
        phase made a long serving run quadratic in its steps)."""
        starts = self.sched.log.start
        self._stored += sum(len(a) for a in starts[self._counted:])
        self._counted = len(starts)
        return max(0, self.max_events - self._stored) // max(per_step, 1)

    def _host(self, items: tuple[HostCost, ...], t: float, first_op: int) -> float:
        """Log ``items`` one after another from ``t`` on the host track, as ops from ``first_op``;
        return when the last ends."""
        for k, cost in enumerate(items):
            self.sched.log.add_span(HOST_RESOURCE, t, t + cost.dur_s, first_op + k, cost.nbytes)
            t += cost.dur_s
        return t

    def host_phase(self, name: str, items: tuple[HostCost, ...], t0: float) -> float:
        """The host alone at work from ``t0`` (the server handling a request before the engine
        may take it), a phase of its own; return when it ends."""
        if not items:
            return t0
        self.tables.add_host("", items)
        end = self._host(items, t0, len(self.tables.op_names) - len(items))
        self.spans.append({"name": name, "start": t0, "end": end, "repeat": 1, "stored": 1})
        self.sched.free[:] = end
        self._last = None
        return end

    def beside(self, items: tuple[HostCost, ...], t0: float) -> None:
        """The host at work from ``t0`` beside the engine's (a server handling a request while the
        engine runs others'): events of no layer, no phase, the core's clocks untouched."""
        if items:
            self.tables.add_host("", items, layered=False)
            self._host(items, t0, len(self.tables.op_names) - len(items))

    def idle(self, name: str, program: Program, t0: float, periods: float) -> float:
        """The core waits ``periods`` times as long as ``program`` takes (measured on a scheduler
        of its own: nothing of it is logged), drawn as a wait on the host track; return when the
        wait ends."""
        scratch = CoreScheduler(self.ctx.chip.sbuf_bytes, self.ctx.chip.tensor.throttle, self.plan)
        scratch.run(program, [lower(self.ctx, op) for op in program.ops], 0, 0.0)
        end = t0 + periods * float(scratch.free.max())
        wait = (HostCost(PIPELINE_WAIT, end - t0),)
        self.tables.add_host(name, wait)
        self._host(wait, t0, len(self.tables.op_names) - 1)
        self.spans.append({"name": name, "start": t0, "end": end, "repeat": 1, "stored": 1})
        self.sched.free[:] = end
        self._last = None
        return end

    def run(self, phase: _Phase, t0: float) -> float:
        """Run ``phase`` from ``t0``, each execution between the host's costs ``phase.before`` and
        ``phase.after`` (a program run before keeps its first run's); return when it ends."""
        prog, repeat, sched, tables = phase.program, phase.repeat, self.sched, self.tables
        key = (id(prog), phase.before, phase.after)
        stride = len(phase.before) + len(prog.ops) + len(phase.after)  # ops of one execution
        seen = self._seen.get(key)
        if seen is None:
            mark, first_op = log_mark(sched.log), len(tables.op_names)
            lowered = [lower(self.ctx, op) for op in prog.ops]
            t = self._host(phase.before, t0, first_op)
            sched.run(prog, lowered, first_op + len(phase.before), t)
            t = self._host(phase.after, max(sched.free.max(), t), first_op + len(phase.before) + len(prog.ops))
            period = t - t0
            per_step = sum(len(a) for a in sched.log.start[mark[0]:])
            stored = max(1, min(repeat, phase.max_stored or repeat, self._room(per_step) + 1))
            for r in range(stored):
                tables.add_execution(prog, phase.label(r), lowered, phase.before, phase.after)
            self._seen[key] = ((mark, log_mark(sched.log)), first_op, t0, period, len(self.spans), lowered, per_step)
            repeat_tail(sched.log, mark, stored - 1, period, stride)
            self.spans.append({"name": phase.label(0) if phase.number_from else phase.name, "start": t0,
                               "end": t0 + period * repeat, "repeat": repeat, "stored": stored})
        else:
            marks, first_op, first_t, period, index, lowered, per_step = seen
            extend = self._last is not None and self._last[0] == key and abs(self._last[1] - t0) < 1e-12
            stored = min(repeat, phase.max_stored or repeat, self._room(per_step))
            reps = np.arange(stored)
            copy_span(sched.log, *marks, t0 - first_t + reps * period, len(tables.op_names) - first_op + reps * stride)
            for r in range(stored):
                tables.add_execution(prog, phase.label(r), lowered, phase.before, phase.after)
            if extend:
                span = self.spans[-1]
                span.update(end=t0 + period * repeat, repeat=span["repeat"] + repeat, stored=span["stored"] + stored)
            else:
                self.spans.append({"name": phase.name, "start": t0, "end": t0 + period * repeat, "repeat": repeat,
                                   "stored": stored, **({} if stored else {"same_as": index})})
        end = t0 + period * repeat
        sched.free[:] = end
        self._last = (key, end)
        return end


def _timeline(cfg: RunConfig, dep: Deployment, max_events: int) -> _Timeline:
    chip = dep.chip
    plan = schedule(_optlevel(cfg, chip) or DEFAULT_OPT_LEVEL)
    ctx = CoreContext(chip, *compute_dtypes(cfg, chip), dep.active_cores_per_chip, dep.ranks_per_chip,
                      dep.copies_per_chip, dep.instance.topology, min(dep.nodes, dep.data_parallel), dep.shards,
                      dep.node_cores, run_precision(cfg, chip), cfg.kv_cache, plan.tiles_samples)
    return _Timeline(ctx, max_events, plan)


def _optlevel(cfg: RunConfig, chip: Chip) -> int | None:
    """The optimization level the run's code is compiled at; None for a compiler without levels."""
    return cfg.optlevel if chip.compiler == "neuronx-cc" else None


def _run_phases(cfg: RunConfig, spec: ModelSpec, seq: int, dep: Deployment, dt: int, max_events: int) -> _Timeline:
    """Schedule every phase of ``cfg`` on one core of ``dep`` (a generation request handled by
    the serving stack first); keep at most ``max_events`` events."""
    timeline = _timeline(cfg, dep, max_events)
    t0 = timeline.host_phase(REQUEST_PHASE, request_handling(dep.chip), 0.0) if cfg.mode == "decode" else 0.0
    for phase in _phases(cfg, spec, seq, dep, dt):
        if phase.idle_periods:
            t0 = timeline.idle(phase.name, phase.program, t0, phase.idle_periods)
        else:
            t0 = timeline.run(phase, t0)
    return timeline


# what each layer's ops add up to, kept in the trace's metadata (``layer_stats``) for the analysis
LAYER_STATS = ("spill_save_bytes", "spill_reload_bytes", "transpose_flops", "dma_transfers")
HOST_RESOURCE = len(RESOURCE_NAMES)  # the host track's index among the scheduler's log tracks
REQUEST_PHASE = "request"  # the phase of a generation request's handling, before its prompt is encoded


def _layer_name(label: str, name: str) -> str:
    """The name of layer ``name`` of the execution ``label`` (none for a request's inference)."""
    return name if label in ("", "inference") else f"{label}/{name}"


class _Tables:
    """Op and layer tables, grown program by program."""

    def __init__(self) -> None:
        self.op_names: list[str] = []
        self.op_layer: list[int] = []
        self.layer_names: list[str] = []
        self.layer_kinds: list[str] = []
        self.op_link_bytes: list[float] = []  # what a collective op sends over NeuronLink (per chip)
        self.op_efa_bytes: list[float] = []  # and over EFA (per instance)
        self.layer_stats: dict[str, list[float]] = {k: [] for k in LAYER_STATS}  # per layer, summed over its ops
        self._program_stats: dict[int, dict[str, list[float]]] = {}

    def add_execution(self, prog: Program, label: str, lowered: list[LoweredOp], before: tuple[HostCost, ...],
                      after: tuple[HostCost, ...]) -> None:
        """The ops and layers of one execution of ``prog``, the host's costs around it included."""
        self.add_host(label, before)
        self.add_program(prog, label, lowered)
        self.add_host(label, after)

    def add_host(self, label: str, items: tuple[HostCost, ...], layered: bool = True) -> None:
        """An op for each of the host's costs ``items``, each in a layer of its own (kind
        :data:`sim.host.HOST`), or in none when it runs beside the engines' layers."""
        for cost in items:
            self.op_names.append(cost.name)
            self.op_link_bytes.append(0.0)
            self.op_efa_bytes.append(0.0)
            self.op_layer.append(len(self.layer_names) if layered else -1)
            if layered:
                self.layer_names.append(_layer_name(label, cost.name))
                self.layer_kinds.append(HOST)
                for key in LAYER_STATS:
                    self.layer_stats[key].append(0.0)

    def add_program(self, prog: Program, phase: str, lowered: list[LoweredOp]) -> None:
        base = len(self.layer_names)
        layer_of = prog.layer_of_op()
        self.op_names.extend(op.name for op in prog.ops)
        self.op_link_bytes.extend(lo.link_bytes for lo in lowered)
        self.op_efa_bytes.extend(lo.efa_bytes for lo in lowered)
        self.op_layer.extend(base + li for li in layer_of)
        self.layer_names.extend(_layer_name(phase, la.name) for la in prog.layers)
        self.layer_kinds.extend(la.kind for la in prog.layers)
        stats = self._program_stats.get(id(prog))
        if stats is None:  # a phase's stored executions share one program: summed once
            stats = {key: [0.0] * len(prog.layers) for key in LAYER_STATS}
            for li, lo in zip(layer_of, lowered, strict=True):
                for key in LAYER_STATS:
                    stats[key][li] += getattr(lo, key)
            self._program_stats[id(prog)] = stats
        for key in LAYER_STATS:
            self.layer_stats[key].extend(stats[key])


def _step(starts: np.ndarray, ends: np.ndarray, amounts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step function from spans that each add ``amount`` while open."""
    if not len(starts):
        return np.zeros(1), np.zeros(1)
    # round to picoseconds so a span ending where the next begins does not count twice
    t = np.round(np.concatenate([starts, ends]), 3)
    d = np.concatenate([amounts, -amounts])
    order = np.argsort(t, kind="stable")
    t, v = t[order], np.cumsum(d[order])
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
                 timeline: _Timeline, loaded: list | dict | None, single: list | None,
                 served: dict | None = None) -> Trace:
    sched, tables = timeline.sched, timeline.tables
    log = sched.log
    track = column(log.track, np.int16)
    start_ns = np.concatenate(log.start) * 1e9
    dur_ns = np.concatenate(log.dur) * 1e9
    op = column(log.op, np.int32)
    order = np.lexsort((start_ns, track))
    track, start_ns, dur_ns, op = track[order], start_ns[order], dur_ns[order], op[order]
    op_layer = np.asarray(tables.op_layer, np.int32)
    layer = op_layer[op]
    n_layers = len(tables.layer_names)
    lstart = np.full(n_layers, np.inf)
    lend = np.zeros(n_layers)
    layered = layer >= 0  # the host's work beside the engines' is no layer's
    np.minimum.at(lstart, layer[layered], start_ns[layered])
    np.maximum.at(lend, layer[layered], (start_ns + dur_ns)[layered])
    lstart[np.isinf(lstart)] = 0.0
    events = {"track": track, "start_ns": start_ns, "dur_ns": dur_ns, "op": op, "layer": layer,
              "flops": column(log.flops, np.float64)[order], "bytes": column(log.nbytes, np.float64)[order]}
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


def _counters(log, events: dict, tracks: tuple[Track, ...], tables: _Tables) -> dict[str, Counter]:
    out = {}
    for name, spans in (("sbuf_bytes", log.sbuf), ("psum_bytes", None)):
        if spans is None:
            continue
        a = np.array(spans, dtype=np.float64).reshape(-1, 3)
        t, v = _step(a[:, 0] * 1e9, a[:, 1] * 1e9, a[:, 2])
        out[name] = Counter(name, "B", t, v)
    if log.psum:
        s, e, amt = psum_columns(log.psum)
        t, v = _step(s * 1e9, e * 1e9, amt)
    else:
        t, v = np.zeros(1), np.zeros(1)
    out["psum_bytes"] = Counter("psum_bytes", "B", t, v)
    for kind, name in (("dma_read", "hbm_read_bytes_per_s"), ("dma_write", "hbm_write_bytes_per_s")):
        idx = next(i for i, tr in enumerate(tracks) if tr.kind == kind)
        sel = (events["track"] == idx) & (events["dur_ns"] > 0)
        s, d, b = events["start_ns"][sel], events["dur_ns"][sel], events["bytes"][sel]
        t, v = _step(s, s + d, b / (d * 1e-9)) if len(s) else (np.zeros(1), np.zeros(1))
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
        "compiler": chip.compiler, "optlevel": _optlevel(cfg, chip),
        "cores_per_copy": dep.cores_per_copy, "lnc": dep.lnc, "memory_per_core_bytes": dep.memory_per_core_bytes,
        "copies": dep.copies, "cores_active": alone.active_cores_per_chip,
        "cores_active_under_load": dep.active_cores_per_chip,
        "peak_flops_per_core": chip.tensor.peak_flops(prec.matmul_dtype),
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
    if cfg.draft:
        meta["speculation"] = {"draft": cfg.draft, "k": cfg.spec_k, "acceptance": cfg.acceptance,
                               "tokens_per_step": tokens_per_step(cfg)}
    if cfg.mode in GENERATING and spec.family == DECODER and not spec.mla:  # what each core caches and reads
        meta["kv_heads_per_core"] = kv_heads_per_core(spec.heads, spec.kv_heads, dep.shards, cfg.gqa)
    if cfg.mode == "decode":
        meta["new_tokens"] = cfg.new_tokens
        meta["concurrency"] = cfg.batch if cfg.concurrency is None else cfg.concurrency
    return meta
