"""One declaration of each run option: its field of :class:`sim.config.RunConfig`, type, bounds,
default, help and the modes that use it. The CLI's ``simulate`` flags, the app's Run panel and
the sweep axes are all built from :data:`OPTIONS`, so they cannot drift apart, and an error
about an option can name it as the user set it (:func:`in_terms_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.config import (
    ATTENTION,
    AUTOCAST,
    DTYPE_BYTES,
    GENERATING,
    KV_CACHE_DTYPES,
    MAX_SPEC_K,
    MODES,
    NKI_KERNELS,
    RunConfig,
)
from sim.hardware.chip import DEFAULT_OPT_LEVEL, OPT_LEVELS
from sim.hardware.instances import all_instances
from sim.quant import QUANTS, SCALES
from sim.stacks import DEFAULT_STACK, SAMPLINGS, STACKS
from sim.workloads import preset_names
from sim.workloads.speculation import SPEC_METHODS
from sim.workloads.training import CHECKPOINTS
from sim.workloads.transformer import GQA_SHARDINGS, HEADS

TEXT, CHOICE, INT, FLOAT, SWITCH, LENGTHS, SET = "text", "choice", "int", "float", "switch", "lengths", "set"
RATES = "rates"  # one or more rates from 0 to 1
GENERAL, TRAINING, MOE, GENERATION = "general", "training at scale", "mixtures of experts", "decode and serve"
ALL = tuple(MODES)
MAX_INT = 1 << 30  # bounds the form's number boxes where nothing smaller is a limit


@dataclass(frozen=True)
class Option:
    """One setting of a run. ``none`` names what leaving it unset means (its default is then None);
    ``to_config`` / ``from_config`` map its value to :class:`RunConfig`'s fields and back when it
    is not one field of the same name."""

    name: str  # the field of RunConfig it sets, or its own name when to_config says how
    flag: str  # the CLI's
    label: str  # the Run panel's
    kind: str
    help: str
    default: Any = None
    choices: tuple = ()
    lo: float | None = None
    hi: float | None = None
    modes: tuple[str, ...] = ALL
    group: str = GENERAL
    none: str | None = None
    sweep: bool = False  # a sweep may take a list of its values
    flags: tuple[str, ...] = ()  # SET: a CLI switch for each choice, and its help
    flag_help: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # other CLI spellings
    cli_values: tuple = ()  # SWITCH: the CLI takes one of these (off, on) instead of a bare flag
    const: Any = None  # CHOICE: what the CLI flag given without a value means
    to_config: Callable[[Any], dict] | None = None
    from_config: Callable[[RunConfig], Any] | None = None

    def config_fields(self, value: Any) -> dict:
        """The RunConfig fields this option's ``value`` sets."""
        return self.to_config(value) if self.to_config else {self.name: value}

    def value_of(self, cfg: RunConfig) -> Any:
        """This option's value in ``cfg`` (what the panel shows for a run it edits again)."""
        return self.from_config(cfg) if self.from_config else getattr(cfg, self.name)

    def check(self, value: Any) -> Any:
        """``value`` if this option takes it, else a :class:`ValueError` saying what it takes."""
        if value is None:
            return value
        if self.kind == CHOICE and value not in self.choices:
            raise ValueError(f"choose one of {', '.join(map(str, self.choices))}")
        if self.kind in (INT, FLOAT) and not self.lo <= value <= self.hi:
            if self.kind == INT:
                raise ValueError(f"must be a whole number from {self.lo:,} to {self.hi:,}, got {value:,}")
            raise ValueError(f"must be a number from {self.lo:g} to {self.hi:g}, got {value:g}")
        if self.kind == LENGTHS and any(v < 1 for v in value):
            raise ValueError(f"must be positive whole numbers of positions, got {' '.join(map(str, value))}")
        if self.kind == RATES and not (value and all(0 <= v <= 1 for v in value)):
            raise ValueError(f"must be rates from 0 to 1, got {','.join(f'{v:g}' for v in value) or 'none'}")
        return value


def _checkpoint(value: str | None) -> dict:
    return {"checkpoint_activations": value is not None, "checkpoint_granularity": value or "full"}


def _buckets(value: tuple[int, ...] | None) -> tuple[int, ...] | None:
    return tuple(value) if value else None


INSTANCES = tuple(all_instances())
OPTIONS: tuple[Option, ...] = (
    Option("model", "--model", "Model", TEXT, "preset name (see `neuronviz models`) or a config.json path",
           default="bert-large", choices=preset_names(), sweep=True),
    Option("instance", "--instance", "Instance", TEXT, "instance type, e.g. inf2.48xlarge (its chip is implied)",
           choices=INSTANCES, none="default for each chip", sweep=True),
    Option("mode", "--mode", "Mode", CHOICE, "inference, decode (a generation), serve (a stream of requests) or "
           "training", default="inference", choices=ALL, sweep=True),
    Option("batch", "--batch", "Batch", INT, "sequences (images) a request, a micro-batch or the compiled batch",
           default=1, lo=1, hi=MAX_INT, sweep=True),
    Option("seq", "--seq", "Sequence / image", INT, "sequence length, prompt length (decode) or image size",
           lo=1, hi=1 << 21, none="model default", sweep=True),
    Option("new_tokens", "--new-tokens", "New tokens", INT, "tokens to generate in decode and serve modes",
           default=128, lo=1, hi=1 << 20, modes=GENERATING, sweep=True),
    Option("beams", "--beams", "Beams (T5)", INT, "decode of an encoder-decoder (T5): beam search keeping N "
           "hypotheses of each sequence, every cache reordered by them each step (default 1: greedy)",
           default=1, lo=1, hi=64, modes=("decode",)),
    Option("dtype", "--dtype", "Data type", CHOICE, "what the model runs in (fp8: all of it, activations too; see "
           "--quant for FP8 weights)", default="bf16", choices=tuple(sorted(DTYPE_BYTES)), sweep=True),
    Option("quant", "--quant", "Quantization", CHOICE, "weight matmuls quantized: int8-weights/fp8-weights "
           "(weight-only, dequantized on VectorE), fp8 (FP8 weights and matmul inputs), mxfp8/mxfp4 (Trainium3's "
           "MX matmuls)", choices=QUANTS, none="none (weights in the data type)", modes=("inference", *GENERATING),
           sweep=True),
    Option("quant_scales", "--quant-scales", "Quantization scales", CHOICE, "per-tensor or per-channel "
           "quantization scales (default channel)", default="channel", choices=SCALES,
           modes=("inference", *GENERATING)),
    Option("kv_cache", "--kv-cache", "KV cache", CHOICE, "decode/serve: the KV cache stored in fp8 (NxD "
           "kv_cache_quant), dequantized before use", choices=KV_CACHE_DTYPES, none="in the data type",
           modes=GENERATING),
    Option("sparsity", "--sparsity", "Sparsity (M:N)", TEXT, "M:N structured sparsity of the weights, e.g. 2:4 or "
           "4:16 (Trainium2, Trainium3)", none="dense", modes=("inference", *GENERATING)),
    Option("autocast", "--autocast", "Autocast (fp32)", CHOICE, "what of an fp32 model the compiler casts to bf16 "
           "(default: the chip's compiler's: none for neuronx-cc since Neuron 2.27, all for Inferentia1's "
           "neuron-cc)", choices=AUTOCAST, none="compiler default"),
    Option("cores", "--cores", "Cores per copy", INT, "NeuronCores one model copy spans (tensor parallel)",
           lo=1, hi=4096, none="SDK default", sweep=True),
    Option("lnc", "--lnc", "Logical core size", CHOICE, "physical cores per logical NeuronCore on Trn2/Trn3 "
           "(default 2; --cores counts logical ones)", choices=(1, 2), none="chip default"),
    Option("optlevel", "--optlevel", "Compiler level", CHOICE, "neuronx-cc's optimization level (default 2): at 1 "
           "compiled code loads one op ahead at most and its loads queue behind earlier stores; 3 runs as 2 "
           "(Inferentia1's neuron-cc has no levels)", default=DEFAULT_OPT_LEVEL, choices=OPT_LEVELS, aliases=("-O",)),
    Option("copies", "--copies", "Copies running", INT, "model copies running at once (default: every copy the "
           "instance holds; 1: one request alone)", lo=1, hi=MAX_INT, none="all"),
    Option("requests", "--requests", "Requests", INT, "inference: requests run back to back on every copy, a "
           "stream as a server runs them (the latency stays one request's; default 1); serve: the requests served "
           "(default: 4 per user, at least 32)", lo=1, hi=100_000, none="default", modes=("inference", "serve")),
    Option("attention", "--attention", "Attention", CHOICE, "attention as one fused flash kernel or as the "
           "compiler's separate ops (default: flash for decode, as NxD Inference runs it; the compiler's ops "
           "otherwise)", choices=ATTENTION, none="serving stack default"),
    Option("gqa", "--gqa", "KV heads", CHOICE, "how the KV heads of grouped-query attention are split over a "
           "copy's cores when the cores do not divide them: one replicated KV head a core when the cores are a "
           "multiple of the KV heads (NxD Inference's default), or converted to multi-head attention, a KV head "
           "for every query head (what Transformers NeuronX does)", default=GQA_SHARDINGS[0], choices=GQA_SHARDINGS),
    Option("head", "--head", "Encoder output", CHOICE, "what an encoder's inference returns to the host, whose "
           "copy counts in its latency: its class logits (default), 'none' its hidden states and pooled output "
           "(transformers' AutoModel), 'mlm' a masked-LM head's vocabulary logits for every token",
           default="classifier", choices=HEADS, modes=("inference",)),
    Option("sequence_parallel", "--sequence-parallel", "Sequence parallel", SWITCH, "with --cores > 1, each core "
           "keeps its share of the tokens outside attention and the MLP (Megatron/NxD sequence parallelism)",
           default=False),
    Option("grad_accum", "--grad-accum", "Micro-batches per step", INT, "N micro-batches of --batch per step, "
           "their gradients summed before one all-reduce and optimizer update (default 1)", default=1, lo=1,
           hi=1 << 16, modes=("training",), group=TRAINING),
    Option("nodes", "--nodes", "Instances", INT, "instances joined by EFA, each running as many data-parallel "
           "copies (default 1)", default=1, lo=1, hi=4096, modes=("training",), group=TRAINING, sweep=True),
    Option("zero1", "--zero", "ZeRO-1", SWITCH, "1: shard the optimizer state over the data-parallel copies "
           "(ZeRO-1)", default=False, modes=("training",), group=TRAINING, cli_values=(0, 1)),
    Option("checkpoint", "--checkpoint-activations", "Activation checkpointing", CHOICE, "recompute the forward "
           "pass in the backward pass instead of keeping its activations: every layer's (full, the default) or "
           "only the MLPs and attention's core (selective, as NxD Training's recipes do)", choices=CHECKPOINTS,
           none="off", modes=("training",), group=TRAINING, to_config=_checkpoint, const="full",
           from_config=lambda cfg: cfg.checkpoint_granularity if cfg.checkpoint_activations else None),
    Option("pipeline", "--pipeline", "Pipeline stages", INT, "split each copy's layers into N pipeline stages of "
           "--cores cores each (1F1B over the --grad-accum micro-batches; default 1)", default=1, lo=1, hi=512,
           modes=("training",), group=TRAINING),
    Option("ep", "--ep", "Expert-parallel groups", INT, "expert-parallel groups among a copy's logical cores (NxD "
           "Inference's moe_ep_degree): each holds 1/N of the experts, each split over --cores/N cores "
           "(moe_tp_degree); inference: every group sees every token, the block's all-reduce sums the groups' "
           "outputs; training: tokens go to their experts' group and back (all-to-all); default 1: experts split "
           "like MLPs", default=1, lo=1, hi=4096, group=MOE),
    Option("expert_imbalance", "--expert-imbalance", "Expert imbalance", FLOAT, "training with --ep: the busiest "
           "group's share of the routed tokens over the mean (default 1: uniform routing; at most --ep)",
           default=1.0, lo=1.0, hi=4096.0, modes=("training",), group=MOE),
    Option("capacity_factor", "--capacity-factor", "Capacity factor", FLOAT, "a prompt's experts each take at most "
           "this many times the mean tokens an expert gets, the rest dropped (NxD's capacity_factor; default: "
           "dropless, the blockwise kernel)", lo=1e-3, hi=4096.0, none="dropless", modes=GENERATING, group=MOE),
    Option("moe_skip_dma", "--moe-skip-dma", "Blockwise DMA skipping", SWITCH, "the prompt's blockwise kernel "
           "skips the DMA of padded token rows and of weights the block before loaded (NxD's blockwise_matmul_config "
           "skip_dma_token and skip_dma_weight; off by default)", default=False, modes=GENERATING, group=MOE),
    Option("stack", "--stack", "Serving stack", CHOICE, "the software serving the generation: a server (vllm, "
           "optimum-neuron) receives, tokenises and schedules each request before its prompt is encoded; "
           "transformers-neuronx samples each token on the host; nxd-inference runs offline (default: vllm, a "
           "decode one request of it)", choices=STACKS, none=f"{DEFAULT_STACK} (default)", modes=GENERATING,
           group=GENERATION),
    Option("sampling", "--sampling", "Sampling", CHOICE, "where each step's next token is sampled: on the device, "
           "inside the compiled graph, or on the host, its logits copied back first (default: as the stack does)",
           choices=SAMPLINGS, none="stack default", modes=GENERATING, group=GENERATION),
    Option("spec_method", "--spec-method", "Speculation", CHOICE, "speculative decoding as vLLM's speculative_config "
           "method names it: draft_model (a model of its own, --draft, proposing each token in a decode step of "
           "it), eagle or eagle3 (a head on the model's hidden states: one decoder layer of its dimensions and an LM "
           "head; eagle3 fuses three of its layers' hidden states and predicts a reduced vocabulary); default "
           "draft_model with --draft", choices=SPEC_METHODS, none="none (draft_model with --draft)", modes=GENERATING,
           group=GENERATION),
    Option("draft", "--draft", "Draft model", TEXT, "speculative decoding with a draft model (preset or config.json) "
           "proposing the tokens", none="none", choices=preset_names(), modes=GENERATING, group=GENERATION),
    Option("spec_k", "--spec-k", "Draft tokens", INT, "num_speculative_tokens: the tokens the draft proposes per step "
           "(with --enable-fused-speculation NxD Inference's speculation_length, which counts the model's own token: "
           "one fewer drafted)", default=0, lo=0, hi=MAX_SPEC_K, modes=GENERATING, group=GENERATION),
    Option("spec_acceptance", "--spec-acceptance", "Acceptance", RATES, "the draft's acceptance as vLLM's benchmark "
           "reports it, a property of the draft, the model and the data, not of the chip: one mean rate (the share "
           "of draft tokens accepted, e.g. 0.74) or a rate per draft position (the share of steps whose tokens up to "
           "it were all accepted, e.g. 0.865,0.725,0.635; past the last, its conditional rate); default: the "
           "published figure of sim/hardware/data/speculation.toml (vLLM Neuron's EAGLE3 tutorial for "
           "Llama-3.1-8B)", none="published default", aliases=("--acceptance",), modes=GENERATING, group=GENERATION,
           to_config=lambda v: {"spec_acceptance": tuple(v) if v else None}),
    Option("fused_speculation", "--enable-fused-speculation", "Fused speculation", SWITCH, "NxD Inference's fused "
           "speculation (enable_fused_speculation): the draft and the model compiled into one graph, run without "
           "the host between them; --spec-k is then its speculation_length", default=False,
           aliases=("--fused-speculation",), modes=GENERATING, group=GENERATION),
    Option("concurrency", "--concurrency", "Concurrency / users", INT, "requests in flight on the graph compiled "
           "for --batch, each prompt encoded alone and every token step paying for the padded batch (decode "
           "default: static batching); serve: users each sending a request when their last is done, or with "
           "--rate the most in flight (default --batch; more than --batch wait for a slot)", lo=1, hi=100_000,
           none="batch", modes=GENERATING, group=GENERATION),
    Option("rate", "--rate", "Request rate /s", FLOAT, "serve: requests arrive at R a second (Poisson) instead of "
           "users waiting for their last", lo=1e-9, hi=1e9, none="closed loop", modes=("serve",), group=GENERATION),
    Option("seq_spread", "--seq-spread", "Prompt spread", INT, "serve: each prompt's length drawn around --seq with "
           "this spread in tokens (default 0)", default=0, lo=0, hi=1 << 20, modes=("serve",), group=GENERATION),
    Option("new_tokens_spread", "--new-tokens-spread", "Output spread", INT, "serve: each output's length drawn "
           "around --new-tokens with this spread (default 0)", default=0, lo=0, hi=1 << 20, modes=("serve",),
           group=GENERATION),
    Option("seed", "--seed", "Seed", INT, "serve: seed of the arrivals and of the draft tokens accepted (default 0)",
           default=0, lo=0, hi=MAX_INT, modes=("serve",), group=GENERATION),
    Option("max_seq", "--max-seq", "Compiled length", INT, "sequence length the graphs are compiled for (default: "
           "prompt + new tokens)", lo=1, hi=1 << 22, none="prompt + new tokens", modes=GENERATING, group=GENERATION),
    Option("one_graph", "--no-buckets", "One graph (no buckets)", SWITCH, "one graph of --max-seq tokens instead of "
           "NxD's powers-of-two buckets", default=False, modes=GENERATING, group=GENERATION,
           to_config=lambda one_graph: {"bucketing": not one_graph}, from_config=lambda cfg: not cfg.bucketing),
    Option("prefill_chunk", "--prefill-chunk", "Prefill chunk", INT, "encode the prompt in chunks of N tokens, as "
           "optimum-neuron's chunked prefill does (each chunk's attention over the whole compiled cache in the "
           "compiler's ops; a flash kernel over the chunks before it with --attention flash)", default=0, lo=0,
           hi=1 << 22, modes=GENERATING, group=GENERATION),
    Option("context_buckets", "--context-encoding-buckets", "Context buckets", LENGTHS, "the prompt lengths "
           "context-encoding graphs are compiled for, as NxD Inference takes them (default: powers of two from 128 "
           "and --max-seq)", none="automatic", modes=GENERATING, group=GENERATION, to_config=lambda v: {
               "context_buckets": _buckets(v)}),
    Option("token_buckets", "--token-generation-buckets", "Token buckets", LENGTHS, "the context lengths "
           "token-generation graphs are compiled for; the largest is the compiled sequence length (default: as "
           "the context-encoding ones)", none="automatic", modes=GENERATING, group=GENERATION,
           to_config=lambda v: {"token_buckets": _buckets(v)}),
    Option("nki_kernels", "--nki-kernels", "NKI kernels", SET, "NxD Inference's NKI kernels: the QKV projection "
           "(qkv_kernel_enabled), the MLP (mlp_kernel_enabled), the flash-attention kernel for prompts of every "
           "bucket it can take (attn_kernel_enabled; on one core a logical core from 512 positions, not 4,096) and "
           "a token step's experts in one fused kernel (moe_fused_nki_kernel_enabled; vLLM Neuron's own models)",
           default=(), choices=NKI_KERNELS, modes=GENERATING, group=GENERATION,
           flags=("--qkv-kernel-enabled", "--mlp-kernel-enabled", "--attn-kernel-enabled", "--moe-kernel-enabled"),
           flag_help=("NxD Inference's NKI kernel for the QKV projection (qkv_kernel_enabled)",
                      "NxD Inference's NKI kernel for the MLP (mlp_kernel_enabled)",
                      "NxD Inference's flash-attention kernel for prompts of every bucket it can take "
                      "(attn_kernel_enabled; on one core a logical core from 512 positions, not 4,096)",
                      "NxD Inference's fused MoE kernel for a token step's experts (moe_fused_nki_kernel_enabled; "
                      "what vLLM Neuron's own models run)")),
)
BY_NAME = {o.name: o for o in OPTIONS}


def config(values: dict[str, Any], **targets: Any) -> RunConfig:
    """The RunConfig of option ``values`` (by option name; missing ones take their defaults) and
    the ``targets`` the options do not declare (``chip``)."""
    unknown = set(values) - set(BY_NAME)
    if unknown:
        raise KeyError(f"not a run option: {sorted(unknown)[0]}")
    kwargs: dict[str, Any] = dict(targets)
    for option in OPTIONS:
        kwargs.update(option.config_fields(values.get(option.name, option.default)))
    return RunConfig(**kwargs)


def values_of(cfg: RunConfig) -> dict[str, Any]:
    """Every option's value in ``cfg``: what the Run panel shows to edit a run again."""
    return {option.name: option.value_of(cfg) for option in OPTIONS}


def in_terms_of(message: str, name_of: Callable[[Option], str]) -> str:
    """``message`` (the simulator's, which names options by their CLI flags) naming each option as
    ``name_of`` does instead: the Run panel's labels."""
    for option in sorted(OPTIONS, key=lambda o: -len(o.flag)):  # --seq-spread before --seq
        message = message.replace(option.flag, name_of(option))
    return message
