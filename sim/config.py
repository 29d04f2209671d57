"""What a run is: :class:`RunConfig`, its options' values, and what follows from it alone (the
data types it computes in, the graphs it compiles, the requests it serves)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from sim.hardware.chip import DEFAULT_OPT_LEVEL, Chip
from sim.quant import Precision, dense, precision
from sim.workloads.transformer import REPLICATE_TO_TP

MODES = ("inference", "decode", "training", "serve")


GENERATING = ("decode", "serve")  # modes that generate tokens from a prompt


DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp32": 4}


# neuronx-cc --auto-cast: an FP32 model has its matmuls cast to BF16 (the compiler's default),
# every operation, or nothing
AUTOCAST = ("matmult", "all", "none")


KV_CACHE_DTYPES = ("fp8",)  # NxD Inference's kv_cache_quant stores the cache in float8_e4m3fn


ATTENTION = ("flash", "compiler")


NKI_KERNELS = ("qkv", "mlp", "attention", "moe")  # NxD Inference's qkv_, mlp_, attn_ and moe_fused_nki_kernel_enabled


MIN_DECODE_BUCKET = 128  # NxD Inference token-generation buckets: powers of two from 128


MAX_REQUESTS = 100_000  # requests back to back in one run (a stream longer than this is a typo)


MAX_SPEC_K = 16  # draft tokens per speculative step


MAX_SERVED = 10_000  # requests one serving run serves


SPREADS = 3  # a spread request length is drawn within this many spreads of its mean


# a serving run's requests unless told: enough for every user to send several, as benchmarks run
SERVED_PER_USER, MIN_SERVED = 4, 32


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
    # the compiler's ops by default (one core a logical core: from 512 positions, not 4,096); "moe"
    # (moe_fused_nki_kernel_enabled): a token step's experts as the fused MoE kernel runs them
    # (sim.workloads.experts), as vLLM Neuron's own models always do
    nki_kernels: tuple[str, ...] = ()
    # mixtures of experts: expert-parallel groups among the copy's logical cores (NxD Inference's
    # moe_ep_degree; 1: experts split tensor-parallel); in training, how many times the mean share
    # of routed tokens the busiest group gets; in inference, a prompt's capacity factor (None:
    # dropless, NxD's default) and whether the blockwise kernel skips the DMA of padded token rows
    # and of repeated experts' weights (blockwise_matmul_config skip_dma_token, skip_dma_weight)
    ep: int = 1
    expert_imbalance: float = 1.0
    capacity_factor: float | None = None
    moe_skip_dma: bool = False
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
    # decode and serve: the software stack serving the generation (sim.stacks: a server receiving
    # each request or none, where each step's next token is sampled; None: vllm), and where its steps
    # sample (sim.stacks.SAMPLINGS; None: as the stack does)
    stack: str | None = None
    sampling: str | None = None
    # decode and serve: speculative decoding (sim.speculation). ``spec_method`` is vLLM's method
    # (draft_model, eagle, eagle3; None: draft_model when ``draft`` names a draft model), ``spec_k``
    # its num_speculative_tokens (with ``fused_speculation``, the draft and the target compiled
    # into one graph by NxD Inference, its speculation_length), ``spec_acceptance`` the acceptance
    # the run takes, one mean rate or a rate per draft position, cumulative as vLLM reports them
    # (None: the published default of sim/hardware/data/speculation.toml)
    draft: str | None = None
    spec_method: str | None = None
    spec_k: int = 0
    spec_acceptance: tuple[float, ...] | None = None
    fused_speculation: bool = False
    # inference of an encoder: what it returns to the host (sim.workloads.transformer.HEADS):
    # "classifier" its class logits, "none" its hidden states and pooled output (transformers'
    # AutoModel), "mlm" a masked-LM head's logits for every token (AutoModelForMaskedLM)
    head: str = "classifier"
    # decode of an encoder-decoder (T5): beam search keeping this many hypotheses of each of the
    # ``batch`` sequences, its decoder steps running batch x beams rows
    beams: int = 1


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


def flash_attention(cfg: RunConfig) -> bool:
    return (cfg.attention or ("flash" if cfg.mode in GENERATING else "compiler")) == "flash"


def encoder_decoder_lengths(cfg: RunConfig, seq: int) -> tuple[list[int], list[int]]:
    """An encoder-decoder's graph lengths: its encoder's for the prompt and its decoder's for
    the tokens it generates, as asked, else the automatic buckets up to the compiled length
    (``max_seq``, else the longer of the prompt and the new tokens)."""
    length = cfg.max_seq or max(cfg.token_buckets or [max(seq, cfg.new_tokens)])
    auto = graph_lengths(length, cfg.bucketing)
    return (sorted(cfg.context_buckets) if cfg.context_buckets else auto,
            sorted(cfg.token_buckets) if cfg.token_buckets else auto)


def request_count(cfg: RunConfig) -> int:
    """The requests a run serves: as asked, else 1, or for a serving run enough for every user
    to send several."""
    if cfg.requests is not None:
        return cfg.requests
    if cfg.mode != "serve":
        return 1
    return max(MIN_SERVED, SERVED_PER_USER * (cfg.concurrency or cfg.batch))


def compiled_length(cfg: RunConfig, seq: int) -> int:
    """The sequence length a generating run's graphs are compiled for: as asked (or the largest
    token-generation bucket), else the longest prompt and output its requests may have."""
    if cfg.max_seq:
        return cfg.max_seq
    if cfg.token_buckets:
        return max(cfg.token_buckets)
    return seq + cfg.new_tokens + SPREADS * (cfg.seq_spread + cfg.new_tokens_spread)


def checkpointing(cfg: RunConfig) -> str:
    """The activation checkpointing granularity of a training run, "" for none."""
    return cfg.checkpoint_granularity if cfg.checkpoint_activations else ""


def optlevel_of(cfg: RunConfig, chip: Chip) -> int | None:
    """The optimization level the run's code is compiled at; None for a compiler without levels."""
    return cfg.optlevel if chip.compiler == "neuronx-cc" else None


def config_from_record(record: dict[str, Any]) -> RunConfig:
    """The RunConfig a trace's metadata keeps (``meta["config"]``): lists back to tuples, fields a
    later simulator added at their defaults. An older simulator's ``acceptance`` was each of the
    ``spec_k`` draft tokens' probability of acceptance while the ones before it were accepted:
    the cumulative per-position rates its powers."""
    known = {f.name for f in fields(RunConfig)}
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items() if k in known}
    if record.get("draft") and "acceptance" in record and "spec_acceptance" not in record:
        p, k = record["acceptance"], min(int(record.get("spec_k", 0)), MAX_SPEC_K)
        kwargs["spec_acceptance"] = tuple(p ** i for i in range(1, k + 1)) or None
    return RunConfig(**kwargs)
