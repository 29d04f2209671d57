"""The checks of a configuration before anything is simulated: every option within what it takes
and consistent with the others and with the model and the chip, refused in one line that names
the option otherwise (:class:`sim.errors.ConfigError`)."""

from __future__ import annotations

from dataclasses import replace

from sim.config import (
    ATTENTION,
    AUTOCAST,
    DTYPE_BYTES,
    GENERATING,
    KV_CACHE_DTYPES,
    MAX_REQUESTS,
    MAX_SERVED,
    MAX_SPEC_K,
    MODES,
    NKI_KERNELS,
    SPREADS,
    RunConfig,
    compute_dtypes,
    run_precision,
)
from sim.errors import ConfigError
from sim.hardware.chip import OPT_LEVELS, Chip, get_chip
from sim.hardware.instances import Instance, get_instance
from sim.speculation import method_of, proposed_tokens
from sim.stacks import SAMPLINGS, STACKS
from sim.workloads import (
    ModelSpec,
    get_model,
)
from sim.workloads.models import CNN, DECODER, ENCODER, ENCODER_DECODER
from sim.workloads.speculation import DRAFT_MODEL, EAGLE, SPEC_METHODS
from sim.workloads.training import CHECKPOINTS
from sim.workloads.transformer import GQA_SHARDINGS, HEADS


def resolve_chip(cfg: RunConfig) -> tuple[Chip, Instance | None]:
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


def validate(cfg: RunConfig, spec: ModelSpec, chip: Chip) -> int:
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
    if (cfg.draft is not None or cfg.spec_method is not None or cfg.spec_k or cfg.spec_acceptance is not None
            or cfg.fused_speculation):
        _validate_speculation(cfg, spec)
    if not isinstance(cfg.ep, int) or cfg.ep < 1:
        raise ConfigError(f"expert-parallel groups must be a positive integer, got {cfg.ep}")
    if cfg.ep > 1 and not spec.experts:
        raise ConfigError(f"{spec.name} is not a mixture-of-experts model: --ep splits experts")
    if cfg.ep > 1 and spec.experts % cfg.ep:
        raise ConfigError(f"{spec.name} has {spec.experts} experts: they cannot split into {cfg.ep} "
                          "expert-parallel groups")
    if (cfg.capacity_factor is not None or cfg.moe_skip_dma) and not spec.experts:
        raise ConfigError(f"{spec.name} is not a mixture-of-experts model: --capacity-factor and --moe-skip-dma "
                          "set how its experts run")
    if (cfg.capacity_factor is not None or cfg.moe_skip_dma) and cfg.mode not in GENERATING:
        raise ConfigError("--capacity-factor and --moe-skip-dma are NxD Inference's, for decode and serve modes")
    factor = cfg.capacity_factor
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 0):
        raise ConfigError(f"the capacity factor is a positive number of the mean tokens an expert takes, got {factor}")
    imbalance = cfg.expert_imbalance
    if isinstance(imbalance, bool) or not isinstance(imbalance, int | float) or not 1 <= imbalance <= max(1, cfg.ep):
        raise ConfigError(f"expert imbalance is the busiest group's share of the routed tokens over the mean, "
                          f"from 1 to --ep ({cfg.ep}); got {imbalance}")
    if cfg.expert_imbalance != 1 and cfg.mode != "training":
        raise ConfigError("--expert-imbalance is a training step's (its all-to-all); inference's expert-parallel "
                          "groups each run every block their experts could need")
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
        raise ConfigError("the QKV, MLP, attention and MoE kernel settings are NxD Inference's, for decode and "
                          "serve modes")
    if cfg.stack is not None and cfg.stack not in STACKS:
        raise ConfigError(f"unknown serving stack '{cfg.stack}': choose one of {', '.join(STACKS)}")
    if cfg.sampling is not None and cfg.sampling not in SAMPLINGS:
        raise ConfigError(f"unknown sampling '{cfg.sampling}': choose one of {', '.join(SAMPLINGS)}")
    if (cfg.stack or cfg.sampling) and cfg.mode not in GENERATING:
        raise ConfigError("the serving stack and its sampling are settings of decode and serve modes")
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


def _validate_encoder_decoder(cfg: RunConfig, spec: ModelSpec) -> None:
    """What an encoder-decoder runs: generation (decode mode) with the prompt encoded in one pass."""
    if cfg.mode != "decode":
        raise ConfigError(f"{spec.name} is an encoder-decoder: simulate it generating (--mode decode); "
                          f"{cfg.mode} mode is not modelled for it")
    other = [name for name, on in (("--draft", cfg.draft), ("--spec-method", cfg.spec_method),
                                   ("--prefill-chunk", cfg.prefill_chunk),
                                   ("--concurrency", cfg.concurrency is not None), ("--kv-cache", cfg.kv_cache),
                                   ("NxD Inference's NKI kernels", cfg.nki_kernels), ("--stack", cfg.stack),
                                   ("--sampling", cfg.sampling)) if on]
    if other:
        raise ConfigError(f"{other[0]} is not modelled for encoder-decoders such as {spec.name}")


def _validate_speculation(cfg: RunConfig, spec: ModelSpec) -> None:
    if cfg.mode not in GENERATING:
        raise ConfigError("speculative decoding (--draft, --spec-method) is for decode and serve modes")
    if cfg.spec_method is not None and cfg.spec_method not in SPEC_METHODS:
        raise ConfigError(f"unknown speculation method '{cfg.spec_method}': choose one of {', '.join(SPEC_METHODS)}")
    method = method_of(cfg)
    if method is None:
        raise ConfigError("--spec-k, --spec-acceptance and --enable-fused-speculation go with --draft MODEL, the model "
                          "that proposes the tokens, or --spec-method eagle|eagle3, a head on the model")
    if method == DRAFT_MODEL:
        if not cfg.draft:
            raise ConfigError("--spec-method draft_model goes with --draft MODEL, the model that proposes the tokens")
        draft = get_model(cfg.draft)
        if draft.family != DECODER:
            raise ConfigError(f"the draft {draft.name} must be a GPT-style decoder, not {_a(draft.family)} model")
    else:
        _validate_head(cfg, spec, method)
    fewest = 2 if cfg.fused_speculation else 1  # a fused graph's length counts the model's own token
    if isinstance(cfg.spec_k, bool) or not isinstance(cfg.spec_k, int) or not fewest <= cfg.spec_k <= MAX_SPEC_K:
        counted = " (with fused speculation, NxD Inference's speculation_length: the model's token and the drafts)"
        raise ConfigError(f"--spec-k is the tokens the draft proposes per step, {fewest} to {MAX_SPEC_K}"
                          f"{counted if cfg.fused_speculation else ''}; got {cfg.spec_k}")
    if cfg.spec_acceptance is not None:
        _validate_acceptance(cfg.spec_acceptance, proposed_tokens(cfg))
    if cfg.prefill_chunk:
        raise ConfigError("speculative decoding with prompt chunks (--prefill-chunk) is not modelled: the drafter's "
                          "pass over each chunk is not")


def _validate_head(cfg: RunConfig, spec: ModelSpec, method: str) -> None:
    """An EAGLE or EAGLE-3 head: built from the model's own dimensions, on a decoder with softmax
    attention; EAGLE only as NxD Inference runs it, fused (vLLM Neuron's own speculation is EAGLE-3)."""
    if cfg.draft:
        raise ConfigError(f"an {method} draft is a head on {spec.name}'s hidden states, of its dimensions: --draft "
                          "names a draft model of its own (--spec-method draft_model)")
    if spec.family != DECODER or spec.mla or spec.linear_attention is not None:
        raise ConfigError(f"an {method} head is a decoder layer with softmax attention on the model's hidden states; "
                          f"one for {spec.name} is not modelled")
    if method == EAGLE and not cfg.fused_speculation:
        raise ConfigError("NxD Inference runs EAGLE heads fused with the model (--enable-fused-speculation); vLLM "
                          "Neuron's own speculation runs eagle3")


def _validate_acceptance(rates: tuple[float, ...], positions: int) -> None:
    """One mean rate, or cumulative per-position rates for at most the ``positions`` a step drafts."""
    if (not isinstance(rates, tuple | list) or not rates
            or any(isinstance(r, bool) or not isinstance(r, int | float) or not 0 <= r <= 1 for r in rates)):
        raise ConfigError(f"--spec-acceptance is one mean rate or a rate per draft position, each from 0 to 1; got "
                          f"{rates!r}")
    if len(rates) > 1 and len(rates) > positions:
        raise ConfigError(f"--spec-acceptance gives {len(rates)} per-position rates for the {positions} draft tokens "
                          "a step proposes")
    if any(b > a for a, b in zip(rates, rates[1:], strict=False)):
        raise ConfigError("--spec-acceptance's per-position rates are cumulative, as vLLM reports them (the share of "
                          "steps whose draft tokens up to each position were all accepted): they cannot rise from "
                          f"one position to the next; got {','.join(f'{r:g}' for r in rates)}")


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


def _a(word: str) -> str:
    """``word`` with its indefinite article."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"
