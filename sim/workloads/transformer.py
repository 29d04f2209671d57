"""Transformer graphs (BERT family, GPT-2, OPT, rotary decoders, Mixtral, T5, ViT, CLIP) for one core's shard."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from sim.hardware.chip import kernel_settings
from sim.workloads.builder import ProgramBuilder
from sim.workloads.builder import share as _shard
from sim.workloads.experts import experts_touched, routed_experts
from sim.workloads.mixers import gated_deltanet, indexer
from sim.workloads.models import CLIP, DECODER, ENCODER_DECODER, VISION_TRANSFORMER, ModelSpec

# pretrained with a classifier of sentence pairs besides the masked LM (BERT: is the second
# sentence the next one; ALBERT: are they in order); RoBERTa-family models and DistilBERT are not
SENTENCE_PAIR_MODELS = ("bert", "albert")
SENTENCE_PAIR_LABELS = 2
# transformers' DistilBERT drops its embeddings, attention probabilities and MLP outputs, not its
# attention's output (the others with a hidden dropout drop both sub-blocks' outputs)
ATTENTION_OUTPUT_KEPT = ("distilbert",)
HEADS = ("classifier", "none", "mlm")  # what an encoder's inference returns (Phase.head)
# how grouped-query attention's KV heads are split over tensor-parallel cores (NxD Inference's GQA
# sharding strategies, Phase.gqa): the first is NxD Inference's and optimum-neuron's default, the
# second what Transformers NeuronX does (see kv_heads_per_core)
REPLICATE_TO_TP = "replicate-to-tp-degree"
CONVERT_TO_MHA = "convert-to-mha"
GQA_SHARDINGS = (REPLICATE_TO_TP, CONVERT_TO_MHA)


@dataclass(frozen=True)
class Phase:
    """One execution of a model on a core.

    ``seq`` tokens per sequence enter this execution; attention spans ``context`` positions
    (equal to ``seq`` except in a decode step, where one new token attends to the KV cache).
    ``tp`` is how many cores share the model (tensor-parallel shards).
    """

    batch: int
    seq: int
    context: int
    tp: int = 1
    decode_step: bool = False
    training: bool = False
    flash: bool = False  # attention as one fused kernel (NxD's flash attention): scores never leave SBUF
    # a prompt chunk of optimum-neuron's chunked prefill: one graph for every chunk, whose
    # attention is the token-generation one in the compiler's ops (compute_for_token_gen): the
    # chunk's queries meet every position of the compiled KV cache, the mask hiding those not
    # written yet, and the chunk's own keys; ``context`` is the cache's positions plus ``seq``
    static_chunk: bool = False
    # NxD Inference's NKI kernels for the QKV projection and for a dense MLP (qkv_kernel_enabled,
    # mlp_kernel_enabled): each one kernel (see ProgramBuilder.fused), its weights loaded in
    # tiles of several rows a partition (kernels.toml [nki_projection])
    qkv_kernel: bool = False
    mlp_kernel: bool = False
    # sequence parallelism (Megatron's, NxD's): outside attention and the MLP each of the tp cores
    # keeps 1/tp of the tokens; the all-reduce after a block becomes a reduce-scatter and the
    # tokens are all-gathered before the next block's matmuls (the same bytes, in two halves)
    sequence_parallel: bool = False
    # what an encoder's inference returns (HEADS): "classifier" the class logits of its pooled
    # output, "none" the last hidden state and the pooled output (transformers' AutoModel), "mlm"
    # the masked-LM head's vocabulary logits for every token (AutoModelForMaskedLM)
    head: str = "classifier"

    # mixtures of experts (sim.workloads.experts): ``ep`` expert-parallel groups of the logical
    # cores (NxD Inference's moe_ep_degree), each of ``lnc`` physical cores; in a training step the
    # tokens go to their experts' group and back (all-to-all), the busiest group's share of them
    # ``expert_imbalance`` times the mean (1: uniform). Inference: the capacity factor of a prompt's
    # experts (None: dropless), and whether the blockwise kernel skips the DMA of padded rows and
    # of weights the block before loaded (blockwise_matmul_config skip_dma_token, skip_dma_weight)
    ep: int = 1
    expert_imbalance: float = 1.0
    lnc: int = 1
    capacity_factor: float | None = None
    skip_dma: bool = False
    moe_kernel: bool = False  # a token step's experts in NxD's fused MoE kernel (moe_fused_nki_kernel_enabled)
    # an encoder-decoder (T5): the hypotheses each of the ``batch`` sequences keeps (beam search;
    # a decoder step runs batch x beams rows), the encoder's positions a decoder step's
    # cross-attention meets, and in the encoder's pass the decoder's positions whose caches it fills
    beams: int = 1
    encoder_positions: int = 0
    decoder_positions: int = 0
    gqa: str = REPLICATE_TO_TP  # how the KV heads are split over the tp cores (kv_heads_per_core)

    @property
    def split_tokens(self) -> bool:
        return self.sequence_parallel and self.tp > 1 and not self.decode_step


def attention(b: ProgramBuilder, spec: ModelSpec, ph: Phase, causal: bool, layer: int = 0, qkv_input: int = 0) -> None:
    """Self-attention sub-block: fused QKV projection, scores, softmax, context, output. The QKV
    projection reads ``qkv_input`` features a token, normalised before it (0: the hidden size;
    an EAGLE-3 head's, the token's embedding beside the hidden state, each normalised: twice it).

    A query of a windowed layer (a sliding window, or Llama 4's chunks) attends its window's
    positions at most: the kernels skip the blocks outside it and a decode step reads that much
    of the cache. A sparse layer's query attends the keys its indexer chose
    (:func:`sim.workloads.mixers.indexer`; a decode step reads only those from the cache), and an
    output gate multiplies the context by the sigmoid of a projection of the block input, per
    head. DeepSeek's latent attention has its own projections (:func:`_latent_attention`), and a
    Gated DeltaNet layer mixes tokens by its recurrence instead (:func:`sim.workloads.mixers.gated_deltanet`).
    """
    if spec.is_linear_layer(layer):
        _block_input(b, spec, ph, "attn")
        gated_deltanet(b, spec, ph)
        _block_output(b, spec, ph, "attn")
        return
    if spec.mla:
        _latent_attention(b, spec, ph, layer)
        return
    hd, heads = spec.head_dim, _shard(spec.heads, ph.tp)
    kv = kv_heads_per_core(spec.heads, spec.kv_heads, ph.tp, ph.gqa)
    tokens, window = ph.batch * ph.seq, spec.window(layer)
    ctx = min(ph.context, window) if window else ph.context
    _block_input(b, spec, ph, "attn", qkv_input)
    normalised = b.last
    gate = heads * hd if spec.attn_output_gate else 0
    with b.fused(ph.qkv_kernel):
        qkv = b.matmul("qkv", tokens, qkv_input or spec.hidden, (heads + 2 * kv) * hd + gate,
                       weight_run_rows=_kernel_rows(ph.qkv_kernel))
    chosen, selected = -1, 0
    if spec.is_sparse_layer(layer):
        selected = spec.sparse_attention.selected_keys(ph.seq, ctx, ph.decode_step)
        if ph.decode_step and selected:
            ctx = selected
    # a decode step reads its whole context bucket of keys and values from the cache; a prompt
    # chunk reads those of the chunks before it (a prompt encoded in one pass reads none)
    cached = ctx if ph.decode_step else max(0, ctx - ph.seq)
    cache_elems = ph.batch * kv * cached * hd
    ready = qkv
    if spec.qk_norm:
        ready = b.vector("qk_norm", elems=tokens * (heads + kv) * hd, rows=tokens * (heads + kv), passes=2)
    if spec.family == DECODER:
        if spec.rotary(layer):
            ready = b.vector("rope", elems=round(tokens * (heads + kv) * hd * spec.rotary_fraction), rows=tokens,
                             passes=1)
        b.copy_out("kv_append", elems=2 * tokens * kv * hd, rows=tokens)
    if spec.runs_indexer(layer):  # MiniMax-M3's index heads, one per KV head, split over the cores as they are
        chosen = indexer(b, spec, ph, _shard(spec.sparse_attention.index_heads, ph.tp), (normalised, spec.hidden),
                         normalised, round(hd * spec.rotary_fraction))
    # grouped-query attention: the query heads that share a KV head are stacked on the matmul's
    # free axis against that head's keys and values, which are loaded once, not once per query head
    group = -(-heads // kv)
    # the cache as the serving stack lays it out: NxD Inference (flash attention) and
    # optimum-neuron keep each head's positions together, [batch, kv heads, positions, head_dim]
    # (K_cache_transposed off by default); Transformers NeuronX (the compiler's attention) keeps
    # each position's heads of the whole batch together, [positions, batch, kv heads x head_dim]
    # (cache_layout SBH)
    row = hd if ph.flash or ph.static_chunk else ph.batch * kv * hd
    _scores_softmax_context(b, ph, causal, ph.seq * group, hd, hd, ctx, ph.batch * kv, cache_elems, heads, ready, row,
                            window, spec.window_kind == "chunked", dropout=spec.attention_dropout,
                            selected=0 if ph.decode_step else selected, chosen=chosen)
    if gate:
        context = b.last
        b.scalar("output_gate", elems=tokens * gate, rows=tokens, act="sigmoid", deps=(qkv,))
        b.vector("output_gate_mul", elems=tokens * gate, rows=tokens, deps=(context, b.last))
    b.matmul("out_proj", tokens, heads * hd, spec.hidden)
    _block_output(b, spec, ph, "attn")


def kv_heads_per_core(heads: int, kv_heads: int, tp: int, gqa: str = REPLICATE_TO_TP) -> int:
    """The KV heads each of ``tp`` cores computes and caches, as the serving stacks shard attention.

    The query heads are padded to a multiple of ``tp`` (each core ``ceil(heads / tp)``). KV heads
    that ``tp`` divides are split evenly. Otherwise NxD Inference's default, ``replicate-to-tp-degree``
    (neuronx_distributed_inference/modules/attention/gqa.py, vendored by optimum-neuron), gives
    each core one KV head, replicated, when ``tp`` is a multiple of the KV heads; when it is not,
    or asked for (``convert-to-mha``), the KV heads are replicated to one per query head, and a core
    keeps as many as it has query heads. Transformers NeuronX does the latter whenever ``tp`` does
    not divide the KV heads (transformers-neuronx 0.10, decoder.py: ``shard-over-heads`` falls back
    to ``GQA.REPLICATED_HEADS``, which repeats the K and V weights to ``n_head``): Mistral-7B's 8 KV
    heads on 24 cores are 2 a core, Llama-2-70B's 3, as many as their query heads."""
    if kv_heads % tp == 0:
        return kv_heads // tp
    if gqa == REPLICATE_TO_TP and tp % kv_heads == 0:
        return 1
    return _shard(heads, tp)


def _scores_softmax_context(b: ProgramBuilder, ph: Phase, causal: bool, rows: int, qk_dim: int, v_dim: int,
                            ctx: int, count: int, cache_elems: int, heads: int, ready: int, kv_row: int,
                            window: int = 0, chunked: bool = False, bias: bool = False, dropout: float = 0.0,
                            selected: int = 0, chosen: int = -1) -> None:
    """Scores of ``rows`` queries against the keys they meet (``count`` times), the softmax, and
    the context: as one fused kernel with flash attention. A decode step meets the ``ctx`` keys it
    reads (a windowed layer's window); a prompt meets all ``ph.context`` positions in the
    compiler's ops, which compute the whole square a causal or ``window`` mask then masks, and in a
    causal flash kernel the key tiles it does not skip (:func:`causal_keys`). The ``cache_elems``
    of keys read from the KV cache lie in rows of ``kv_row`` elements per position (values likewise).
    With ``bias`` a bias per head and position pair is added to the scores (T5's relative positions).
    A training step drops the probabilities with probability ``dropout`` (:func:`_dropout`): in the
    compiler's ops, or inside a flash kernel (its ``dropout_p``: each tile of probabilities drawn
    and scaled in SBUF, the NKI kernel's ``nl.dropout`` and ``nl.multiply``).
    A prompt's queries of a sparse layer meet the ``selected`` keys an indexer chose for each (on
    average; 0: not sparse), as a sparse kernel multiplies them, and the scores' reads of the cache
    wait for the op that ``chosen`` them (-1: none)."""
    if ph.decode_step:
        scored = weighed = ctx
    elif selected:
        scored = weighed = selected
    elif ph.flash and causal:
        scored, weighed = causal_keys(ph.seq, ph.context, window, chunked)
    else:
        scored = weighed = ph.context
    with b.fused(ph.flash):
        b.matmul("scores", rows, qk_dim, scored, count=count, weights=False, hbm_elems=cache_elems,
                 deps=(ready, chosen), kv_row_elems=kv_row, read_after=chosen)
        score_elems = ph.batch * heads * ph.seq * weighed
        if bias:
            b.vector("position_bias", elems=score_elems, rows=ph.batch * heads * ph.seq)
        if causal:
            b.gpsimd("causal_mask", elems=score_elems, rows=ph.batch * heads * ph.seq)
        b.vector("softmax_max", elems=score_elems, rows=ph.batch * heads * ph.seq, reduced=ph.batch * heads * ph.seq)
        b.scalar("softmax_exp", elems=score_elems, rows=ph.batch * heads * ph.seq, act="exp")
        b.vector("softmax_norm", elems=score_elems, rows=ph.batch * heads * ph.seq)
        _dropout(b, ph, dropout, "probs_dropout", score_elems, ph.batch * heads * ph.seq)
        # the probabilities come out with queries on partitions; the context matmul contracts over
        # the keys, so they are turned around on the array first (as the NKI attention kernels do)
        b.transpose("probs_transpose", rows, weighed, count=count)
        b.matmul("context", rows, weighed, v_dim, count=count, weights=False, hbm_elems=cache_elems * v_dim // qk_dim,
                 kv_row_elems=kv_row * v_dim // qk_dim)


def context_encoding_kernel(positions: int, lnc: int, enabled: bool = False) -> bool:
    """Whether NxD Inference encodes a prompt bucket of ``positions`` with its flash-attention
    kernel on logical cores of ``lnc`` physical cores, rather than the compiler's ops (kernels.toml);
    ``enabled``: attn_kernel_enabled set, which one core also heeds for shorter buckets."""
    t = kernel_settings("nxdi_context_encoding")
    if lnc > 1:
        if positions >= t["sharded_min_positions"]:
            return positions % t["sharded_multiple"] == 0
        return positions % t["sharded_short_multiple"] == 0
    return positions >= (t["unsharded_enabled_min_positions"] if enabled else t["unsharded_min_positions"])


def causal_keys(seq: int, ctx: int, window: int = 0, chunked: bool = False) -> tuple[int, int]:
    """The keys a query of a causal NKI flash-attention kernel is multiplied by, on average, when
    ``seq`` queries are the last of ``ctx`` positions: in the scores matmul, and in the softmax
    and the context matmul. A tile of queries runs the key tiles that start at or before its
    first position (kernels.toml): score-sized ones for the scores, large ones for the rest. With
    a ``window`` a query attends the ``window`` positions up to its own (or, ``chunked``, those of
    its chunk of ``window`` positions), and the tiles that end before the earliest key a tile's
    first query attends are skipped too."""
    t = kernel_settings("flash_attention")
    q_tile, score_tile, key_tile = t["query_tile"], t["score_tile"], min(t["key_tile"], ctx)
    starts = np.arange(0, seq, q_tile)
    rows = np.minimum(q_tile, seq - starts)  # the last tile may be partial
    first = ctx - seq + starts  # each tile's first position
    if not window:
        earliest = np.zeros_like(first)
    elif chunked:
        earliest = first // window * window
    else:
        earliest = np.maximum(0, first - window + 1)

    def keys(tile: int) -> np.ndarray:
        return np.minimum(ctx, (first // tile - earliest // tile + 1) * tile)

    return round(float(rows @ keys(score_tile)) / seq), round(float(rows @ keys(key_tile)) / seq)


def _latent_attention(b: ProgramBuilder, spec: ModelSpec, ph: Phase, layer: int) -> None:
    """DeepSeek's multi-head latent attention.

    Queries go through a low-rank projection (``q_lora_rank``); keys and values are compressed
    into one latent of ``kv_lora_rank`` per token plus a rotary key of ``qk_rope_dim`` shared by
    the heads, which is all the cache holds. A prompt decompresses the latents into per-head
    keys and values and attends as multi-head attention; a decode step absorbs the key and value
    up-projections into the query and the output (as DeepSeek's inference does), attending over
    the latents directly, one shared "head" of ``kv_lora_rank + qk_rope_dim`` for all query heads.
    The low-rank down-projections are replicated on every tensor-parallel core; the
    up-projections and the output are split by heads. The cache is replicated likewise.

    With DeepSeek sparse attention (GLM-5) a query attends only the keys the indexer chose: a
    decode step reads only those latents from the cache, a prompt's query meets only those.
    """
    heads, tokens = _shard(spec.heads, ph.tp), ph.batch * ph.seq
    rope, lora, nope, v = spec.qk_rope_dim, spec.kv_lora_rank, spec.head_dim - spec.qk_rope_dim, spec.v_head_dim
    latent = lora + rope
    selected = spec.sparse_attention.selected_keys(ph.seq, ph.context, ph.decode_step) if spec.is_sparse_layer(
        layer) else 0
    attended = selected if ph.decode_step and selected else ph.context
    cached = attended if ph.decode_step else max(0, ph.context - ph.seq)
    cache_elems = ph.batch * cached * latent
    _block_input(b, spec, ph, "attn")
    normalised = b.last
    b.matmul("q_down", tokens, spec.hidden, spec.q_lora_rank)
    q_latent = b.vector("q_norm", elems=tokens * spec.q_lora_rank, rows=tokens, passes=2)
    b.matmul("q_up", tokens, spec.q_lora_rank, heads * spec.head_dim)
    b.matmul("kv_down", tokens, spec.hidden, latent, deps=(normalised,))
    b.vector("kv_norm", elems=tokens * lora, rows=tokens, passes=2)
    ready = b.vector("rope", elems=tokens * (heads + 1) * rope, rows=tokens, passes=1)
    appended = b.copy_out("kv_append", elems=tokens * latent, rows=tokens)
    chosen = -1
    if spec.runs_indexer(layer):  # DeepSeek sparse attention's indexer, whole on every core (as vLLM runs it)
        chosen = indexer(b, spec, ph, spec.sparse_attention.index_heads, (q_latent, spec.q_lora_rank), normalised,
                         rope)
    if ph.decode_step:
        # W_uk folded into the query: each head's non-rotary query turned into the latent space;
        # the up-projections' weights are the kv_up parameters of the prompt's form
        b.matmul("q_absorb", tokens, nope, lora, count=heads, params=0, deps=(ready,))
        _scores_softmax_context(b, ph, True, ph.seq * heads, latent, lora, attended, ph.batch, cache_elems, heads,
                                b.last, latent, chosen=chosen)
        b.matmul("v_absorb", tokens, lora, v, count=heads, params=0)
    else:
        positions = ph.context  # the prompt's latents (and the chunks' before it) decompressed
        b.matmul("kv_up", ph.batch * positions, lora, heads * (nope + v), hbm_elems=lora * heads * (nope + v),
                 deps=(appended,))
        _scores_softmax_context(b, ph, True, ph.seq, spec.head_dim, v, ph.context, ph.batch * heads,
                                ph.batch * cached * lora if cached else 0, heads, b.last, lora, selected=selected,
                                chosen=chosen)
    b.matmul("out_proj", tokens, heads * v, spec.hidden)
    _block_output(b, spec, ph, "attn")


def _block_input(b: ProgramBuilder, spec: ModelSpec, ph: Phase, name: str, width: int = 0) -> None:
    """The normalisation of ``width`` features a token (0: the hidden size) before a block's
    matmuls: of this core's share of the tokens, gathered from the others, with sequence parallelism."""
    tokens = ph.batch * ph.seq
    _normalise(b, _shard(tokens, ph.tp) if ph.split_tokens else tokens, width or spec.hidden)
    if ph.split_tokens:
        b.collective(f"{name}_allgather", elems=tokens * spec.hidden, ranks=ph.tp, kind="all_gather")


def _block_output(b: ProgramBuilder, spec: ModelSpec, ph: Phase, name: str) -> None:
    """The cores' partial sums of a block's output, summed (and with sequence parallelism
    scattered by tokens), its dropout in training, then the residual connection."""
    tokens = ph.batch * ph.seq
    if ph.split_tokens:
        b.collective(f"{name}_reducescatter", elems=tokens * spec.hidden, ranks=ph.tp, kind="reduce_scatter")
        tokens = _shard(tokens, ph.tp)
    else:
        b.collective(f"{name}_allreduce", elems=tokens * spec.hidden, ranks=ph.tp)
    if not (name == "attn" and spec.model_type in ATTENTION_OUTPUT_KEPT):
        _dropout(b, ph, spec.hidden_dropout, "dropout", tokens * spec.hidden, tokens)
    b.vector("residual", elems=tokens * spec.hidden, rows=tokens)


def _dropout(b: ProgramBuilder, ph: Phase, p: float, name: str, elems: int, rows: int) -> None:
    """Dropout of ``elems`` elements with probability ``p`` in a training step (none at inference).

    As torch-xla lowers ``nn.functional.dropout``: a mask drawn from the random number generator
    (NeuronCore-v2's is the Vector Engine's, nki.isa.rng and nki.isa.dropout), then the input
    times the mask and ``1/(1-p)``: two Vector passes, the mask kept for the backward pass, whose
    gradient is the incoming one times the mask, one pass. Inside a flash-attention kernel the
    same two passes run on each tile, and its backward kernel draws the mask again from the seed
    (:func:`sim.workloads.training._flash_backward`)."""
    if ph.training and p > 0:
        b.vector(name, elems=elems, rows=rows, passes=2, grad_passes=1, random=True)


def _normalise(b: ProgramBuilder, tokens: int, hidden: int, name: str = "layernorm") -> None:
    """Layer (or RMS) normalisation over each token's ``hidden`` features, then the transpose of
    its output for the matmul that follows.

    Normalisation reduces along the free axis, so it runs with tokens on partitions; the next
    matmul contracts over the features, which must lie on partitions: the compiler turns the
    normalised activations around on the TensorE. (Matmul outputs can be produced in either
    layout at no cost, so the other matmuls of a block need no transpose.)
    """
    b.vector(name, elems=tokens * hidden, rows=tokens, passes=2)
    b.transpose(f"{name}_transpose", tokens, hidden)


def mlp(b: ProgramBuilder, spec: ModelSpec, ph: Phase, layer: int = 0) -> None:
    """Feed-forward sub-block; gated (SwiGLU) for Llama-style models, a mixture of experts in the
    layers that have them (with the shared experts every token runs)."""
    tokens = ph.batch * ph.seq
    _block_input(b, spec, ph, "mlp")
    if spec.is_moe_layer(layer):
        width = spec.moe_intermediate or spec.intermediate
        b.matmul("router", tokens, spec.hidden, spec.experts)
        # which experts' weights to read is known once the router has chosen them: not earlier, as
        # the weights of a dense MLP stream in during the attention before it
        chosen = b.vector("router_topk", elems=tokens * spec.experts, rows=tokens)
        if ph.training:
            _trained_experts(b, spec, ph, tokens, width, chosen)
        else:
            routed_experts(b, spec, ph, tokens, width, chosen)
        if spec.shared_experts:
            _gated(b, "shared_", tokens, spec.hidden, _shard(spec.shared_expert_width, ph.tp), spec.act)
    else:
        rows = _kernel_rows(ph.mlp_kernel)
        with b.fused(ph.mlp_kernel):
            if spec.gated_mlp:
                _gated(b, "", tokens, spec.hidden, _shard(spec.intermediate, ph.tp), spec.act, rows)
            else:
                inter = _shard(spec.intermediate, ph.tp)
                b.matmul("up", tokens, spec.hidden, inter, act=spec.act, weight_run_rows=rows)
                b.matmul("down", tokens, inter, spec.hidden, weight_run_rows=rows)
    _block_output(b, spec, ph, "mlp")


def _kernel_rows(kernel: bool) -> int:
    """Rows of a weight matrix one partition reads in one run: an NKI projection kernel's tile of
    rows (kernels.toml), or one row as the compiler's descriptors load them."""
    return kernel_settings("nki_projection")["weight_rows_per_partition"] if kernel else 1


def _gated(b: ProgramBuilder, prefix: str, tokens: int, hidden: int, inter: int, act: str, rows: int = 1) -> None:
    b.matmul(f"{prefix}gate_up", tokens, hidden, 2 * inter, act=act, weight_run_rows=rows)
    b.vector(f"{prefix}gate_mul", elems=tokens * inter, rows=tokens)
    b.matmul(f"{prefix}down", tokens, inter, hidden, weight_run_rows=rows)


def _trained_experts(b: ProgramBuilder, spec: ModelSpec, ph: Phase, tokens: int, width: int, chosen: int) -> None:
    """A training step's routed experts, after the router's op ``chosen``: each token's gated MLP
    in each of its top-k experts.

    Without expert parallelism each expert's MLP is sharded tensor-parallel like a dense one (its
    ``width`` split over the cores), and the router runs on every core. The tokens' k x T
    (expert, token) pairs are spread as evenly as they can be over the experts they touch
    (:func:`experts_touched`): FLOPs are T x k x one expert's MLP, and only the touched experts'
    weights are read, while every expert's weights count as parameters of the model.

    With ``ep`` groups, a core holds E / ep experts, each split over tp / ep cores; every core
    sends its share of the pairs' activations to the groups holding their experts (an all-to-all
    of ``pairs / ep`` rows each) and gets the results back the same way. It runs the pairs of its
    group, the busiest group's ``expert_imbalance`` times the mean, on the experts of its group
    they touch.
    """
    pairs = tokens * spec.experts_per_token
    ep = ph.ep
    experts, local_pairs, inter = spec.experts // ep, pairs, _shard(width, ph.tp // ep)
    if ep > 1:
        b.collective("moe_dispatch", elems=-(-pairs // ep) * spec.hidden, ranks=ep, kind="all_to_all")
        local_pairs = min(pairs, math.ceil(pairs / ep * ph.expert_imbalance))
    touched = experts_touched(spec.experts, spec.experts_per_token, tokens, experts)
    _expert_matmuls(b, "experts_gate_up", experts, local_pairs, touched, spec.hidden, 2 * inter, chosen, spec.act)
    b.vector("gate_mul", elems=local_pairs * inter, rows=local_pairs)
    _expert_matmuls(b, "experts_down", experts, local_pairs, touched, inter, spec.hidden, chosen)
    if ep > 1:
        b.collective("moe_combine", elems=-(-pairs // ep) * spec.hidden, ranks=ep, kind="all_to_all")
    b.vector("experts_combine", elems=pairs * spec.hidden, rows=tokens)


def _expert_matmuls(b: ProgramBuilder, name: str, experts: int, pairs: int, touched: int, k: int, n: int,
                    chosen: int, act: str = "") -> None:
    """One ``[rows,k] @ [k,n]`` per touched expert, each expert's rows its share of ``pairs``.

    When ``pairs`` do not split evenly, a second op holds the experts that take one row more.
    The first op also owns the weights of the experts no token runs.
    """
    rows, busier = divmod(pairs, touched)
    b.matmul(name, rows, k, n, count=touched - busier, act=act, params=(experts - busier) * k * n,
             read_after=chosen)
    if busier:
        b.matmul(f"{name}.busier", rows + 1, k, n, count=busier, act=act, read_after=chosen)


def _blocks(b: ProgramBuilder, spec: ModelSpec, ph: Phase, causal: bool) -> None:
    for i in range(spec.layers):
        b.shared_weights = spec.shared_layers and i > 0
        with b.layer(f"layer{i}.attention", "attention"):
            attention(b, spec, ph, causal, i)
        with b.layer(f"layer{i}.mlp", "moe" if spec.is_moe_layer(i) else "mlp"):
            mlp(b, spec, ph, i)
    b.shared_weights = False


def _token_embedding(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """Token lookup, learned positions, and the projection of narrower token embeddings to the
    hidden size: after the positions in encoders (ALBERT), before them in decoders (OPT-350m)."""
    tokens = ph.batch * ph.seq
    positions_in_hidden = spec.family == DECODER
    with b.layer("embedding", "embedding"):
        b.gpsimd("token_index", elems=tokens, rows=tokens)
        b.gather("token_gather", rows=tokens, row_elems=spec.embedding_size, table_rows=_shard(spec.vocab, ph.tp))
        if positions_in_hidden:
            _projection(b, "projection", tokens, spec.embedding_size, spec.hidden)
        if spec.learned_positions:
            width = spec.hidden if positions_in_hidden else spec.embedding_size
            b.gather("position_gather", rows=tokens, row_elems=width,
                     table_rows=spec.max_positions + spec.position_offset, deps=())
            b.vector("position_add", elems=tokens * width, rows=tokens, deps=(b.last - 1, b.last))
        if not positions_in_hidden:
            _projection(b, "projection", tokens, spec.embedding_size, spec.hidden)
        _dropout(b, ph, spec.hidden_dropout, "dropout", tokens * spec.hidden, tokens)


def _projection(b: ProgramBuilder, name: str, tokens: int, width_in: int, width_out: int) -> None:
    if width_in != width_out:
        b.matmul(name, tokens, width_in, width_out)


def encoder_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """BERT-family encoder with a classification head, or an MLP tower on the pooled output; or
    returning its hidden states and pooled output, or a masked-LM head's logits (``ph.head``).

    Training an encoder without a tower is pretraining it: its pretraining heads replace the
    classification head (:func:`_pretraining_heads`).
    """
    _token_embedding(b, spec, ph)
    _blocks(b, spec, ph, causal=False)
    if ph.training and not spec.mlp_tower:
        _pretraining_heads(b, spec, ph)
        return
    if ph.head == "mlm":
        _mlm_head(b, spec, ph)
        return
    with b.layer("head", "head"):
        b.matmul("pooler", ph.batch, spec.hidden, spec.hidden, act="tanh")
        if ph.head == "none":
            return
        width = spec.hidden
        for i, size in enumerate(spec.mlp_tower):
            b.matmul(f"tower{i}", ph.batch, width, size, act="relu")
            width = size
        b.matmul("classifier", ph.batch, width, spec.num_labels)
        if ph.training:
            b.cross_entropy(ph.batch, spec.num_labels)


def _pretraining_heads(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """BertForPreTraining's heads: the masked-LM head over every token (a dense layer to the
    embedding width with the model's activation, a layer norm, and a decoder to the vocabulary
    tied to the token embeddings), then, for models pretrained on sentence pairs, a two-way
    classifier on the pooled CLS token (BERT's next sentence, ALBERT's sentence order).

    Over ``tp`` shards each shard transforms its share of the tokens, reading the dense weights
    whole; the shards gather the transformed tokens (an all-reduce of zero-padded shares, twice
    the bytes of a ring all-gather), and each shard's decoder computes the logits of the share
    of the vocabulary whose embedding rows it holds. Each head's loss follows its logits
    (:meth:`ProgramBuilder.cross_entropy`): transformers' BertForPreTraining scores every token's
    logits, the labels marking the masked ones (the others ignored after the softmax).
    """
    encoded = b.last
    _mlm_head(b, spec, ph)
    if spec.model_type in SENTENCE_PAIR_MODELS:
        with b.layer("sentence_pair_head", "head"):
            b.matmul("pooler", ph.batch, spec.hidden, spec.hidden, act="tanh", deps=(encoded,))
            b.matmul("sentence_pair_classifier", ph.batch, spec.hidden, SENTENCE_PAIR_LABELS)
            b.cross_entropy(ph.batch, SENTENCE_PAIR_LABELS)


def _mlm_head(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """The masked-LM head over every token (see :func:`_pretraining_heads`)."""
    tokens, width = ph.batch * ph.seq, spec.embedding_size
    rows = _shard(tokens, ph.tp)
    with b.layer("mlm_head", "head"):
        b.matmul("mlm_transform", rows, spec.hidden, width, act=spec.act, weight_replicas=ph.tp)
        b.vector("mlm_layernorm", elems=rows * width, rows=rows, passes=2)
        b.collective("mlm_gather", elems=tokens * width, ranks=ph.tp)
        b.matmul("mlm_decoder", tokens, width, _shard(spec.vocab, ph.tp), shared_weights=True)
        if ph.training:
            b.cross_entropy(tokens, _shard(spec.vocab, ph.tp), ph.tp)


def decoder_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """GPT-style decoder: causal blocks, final norm, LM head on the last token, sampling; in
    training the LM head over every position and the loss instead of sampling."""
    _token_embedding(b, spec, ph)
    _blocks(b, spec, ph, causal=True)
    with b.layer("lm_head", "head"):
        # training and a speculative step's verification need every position's logits; a prompt its last
        logits_rows = ph.batch * ph.seq if ph.training or ph.decode_step else ph.batch
        vocab = _shard(spec.vocab, ph.tp)
        split = ph.split_tokens and ph.training  # the last block left each core its share of the tokens
        _normalise(b, _shard(logits_rows, ph.tp) if split else logits_rows, spec.hidden, "final_norm")
        if split:
            b.collective("final_allgather", elems=logits_rows * spec.hidden, ranks=ph.tp, kind="all_gather")
        _projection(b, "projection_out", logits_rows, spec.hidden, spec.embedding_size)
        b.matmul("lm_head", logits_rows, spec.embedding_size, vocab, shared_weights=spec.tied_embeddings)
        if ph.training:
            b.cross_entropy(logits_rows, vocab, ph.tp)
        else:
            b.gpsimd("sample", elems=logits_rows * vocab, rows=logits_rows)


def t5_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """T5 as the Neuron T5 tutorial runs it (aws-neuron-sdk src/examples/pytorch/neuronx_distributed/
    t5-inference: t5_model_layers.py, wrapper.py): the decoder's attentions and MLPs are
    tensor-parallel (column-parallel q, k, v and MLP inputs, row-parallel outputs) while the encoder,
    the token embeddings and the LM head run whole on every core.

    A prompt is the encoder's pass (:func:`_t5_encoder_pass`); every generated token, the first
    included, is a decoder step (:func:`_t5_decoder_step`)."""
    if ph.decode_step:
        _t5_decoder_step(b, spec, ph)
    else:
        _t5_encoder_pass(b, spec, ph)


def _t5_attention(b: ProgramBuilder, spec: ModelSpec, ph: Phase, kind: str) -> None:
    """A T5 attention sub-block: "self" (the encoder's over its prompt, a decoder step's over the
    cache of the tokens before it, masked) or "cross" (a decoder step's queries over the encoder's
    keys and values, which the encoder's pass cached). Self-attention adds the relative position
    bias to its scores. The tutorial's caches are ``[rows, heads, positions, d_kv]``, each head's
    positions together."""
    hd, heads, tokens = spec.head_dim, _shard(spec.heads, ph.tp), ph.batch * ph.seq
    _block_input(b, spec, ph, kind)
    if kind == "cross":
        ready = b.matmul("q", tokens, spec.hidden, heads * hd)
        ctx = ph.encoder_positions
        cached = ctx
    else:
        ready = b.matmul("qkv", tokens, spec.hidden, 3 * heads * hd)
        ctx = ph.context
        cached = ctx if ph.decode_step else 0
        if ph.decode_step:
            b.copy_out("kv_append", elems=2 * tokens * heads * hd, rows=tokens)
    _scores_softmax_context(b, ph, kind == "self" and ph.decode_step, ph.seq, hd, hd, ctx, ph.batch * heads,
                            ph.batch * heads * cached * hd, heads, ready, hd, bias=kind == "self")
    b.matmul("out_proj", tokens, heads * hd, spec.hidden)
    _block_output(b, spec, ph, kind)


def _t5_cache_elems(spec: ModelSpec, ph: Phase, rows: int, positions: int) -> int:
    """Elements one core's share of a T5 decoder's caches of ``positions`` holds for ``rows``
    sequences, keys and values of every decoder block."""
    return spec.decoder_layers * 2 * rows * _shard(spec.heads, ph.tp) * positions * spec.head_dim


def _t5_encoder_pass(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """The tutorial's encoder graph: the encoder over the ``batch`` prompts (whole on every core),
    its output repeated for each of the ``beams`` hypotheses, each decoder block's cross-attention
    keys and values computed from it (the block's column-parallel k and v) and written to the
    cache, and the self-attention cache of ``decoder_positions`` cleared."""
    enc = replace(ph, tp=1, context=ph.seq)
    tokens, rows = ph.batch * ph.seq, ph.batch * ph.beams
    with b.layer("encoder.embedding", "embedding"):
        b.gpsimd("token_index", elems=tokens, rows=tokens)
        b.gather("token_gather", rows=tokens, row_elems=spec.hidden, table_rows=spec.vocab)
        b.gather("relative_bias", rows=ph.seq * ph.seq, row_elems=spec.heads, table_rows=spec.relative_buckets,
                 deps=())
    for i in range(spec.layers):
        with b.layer(f"encoder.layer{i}.attention", "attention"):
            _t5_attention(b, spec, enc, "self")
        with b.layer(f"encoder.layer{i}.mlp", "mlp"):
            mlp(b, spec, enc)
    with b.layer("decoder.cross_kv", "attention"):
        b.vector("final_norm", elems=tokens * spec.hidden, rows=tokens, passes=2)
        encoded = b.transpose("final_norm_transpose", tokens, spec.hidden)
        kv = 2 * _shard(spec.heads, ph.tp) * spec.head_dim
        for i in range(spec.decoder_layers):
            b.matmul(f"cross_kv{i}", rows * ph.seq, spec.hidden, kv, deps=(encoded,))
        b.copy_out("cross_cache", elems=_t5_cache_elems(spec, ph, rows, ph.seq), rows=rows * ph.seq)
        b.copy_out("self_cache_clear", elems=_t5_cache_elems(spec, ph, rows, max(0, ph.decoder_positions - 1)),
                   rows=rows, deps=())


def _t5_decoder_step(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """The tutorial's decoder graph, one token of each of ``batch x beams`` rows: with beam search
    every cache first reordered by the hypotheses the last step kept (``index_select``, read and
    written whole), the decoder blocks (self-attention over the ``context`` positions of its
    cache, cross-attention over the encoder's ``encoder_positions``, the MLP), the self-attention
    cache shifted by one position and written back whole (``update_past``), and the LM head
    (whole on every core) with the log-softmax and top-k of beam search on the device."""
    rows = ph.batch * ph.beams
    step = replace(ph, batch=rows, seq=1)
    caches = _t5_cache_elems(spec, ph, rows, ph.context) + _t5_cache_elems(spec, ph, rows, ph.encoder_positions)
    if ph.beams > 1:
        with b.layer("beam_reorder", "attention"):
            b.copy_in("cache_read", elems=caches, rows=rows)
            b.copy_out("cache_write", elems=caches, rows=rows)
    with b.layer("decoder.embedding", "embedding"):
        b.gather("token_gather", rows=rows, row_elems=spec.hidden, table_rows=spec.vocab, shared=True)
        b.gather("relative_bias", rows=ph.context, row_elems=_shard(spec.heads, ph.tp),
                 table_rows=spec.relative_buckets, deps=())
    for i in range(spec.decoder_layers):
        with b.layer(f"decoder.layer{i}.self_attention", "attention"):
            _t5_attention(b, spec, step, "self")
        with b.layer(f"decoder.layer{i}.cross_attention", "attention"):
            _t5_attention(b, spec, step, "cross")
        with b.layer(f"decoder.layer{i}.mlp", "mlp"):
            mlp(b, spec, step)
    with b.layer("decoder.cache_update", "attention"):
        self_cache = _t5_cache_elems(spec, ph, rows, ph.context)
        b.copy_in("self_cache_read", elems=self_cache, rows=rows)
        b.copy_out("self_cache_write", elems=self_cache, rows=rows)
    with b.layer("lm_head", "head"):
        _normalise(b, rows, spec.hidden, "final_norm")
        b.matmul("lm_head", rows, spec.hidden, spec.vocab, shared_weights=spec.tied_embeddings)
        b.vector("log_softmax", elems=rows * spec.vocab, rows=rows, passes=3)
        b.gpsimd("beam_topk" if ph.beams > 1 else "sample", elems=rows * spec.vocab, rows=rows)


def vit_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """ViT: patch embedding as a matmul, encoder blocks, classifier on the CLS token.

    Over ``tp`` shards the classifier is split like the blocks' output projections (row-parallel,
    :func:`_vit_tower`): each shard normalises its share of the CLS features (the two statistics
    per row they share are left out) and multiplies them by its rows of the classifier, and an
    all-reduce sums the logits.
    """
    _vit_tower(b, spec, ph)
    with b.layer("head", "head"):
        b.vector("final_norm", elems=_shard(ph.batch * spec.hidden, ph.tp), rows=ph.batch, passes=2)
        b.matmul("classifier", ph.batch, _shard(spec.hidden, ph.tp), spec.num_labels)
        b.collective("logits_allreduce", elems=ph.batch * spec.num_labels, ranks=ph.tp)
        if ph.training:
            b.cross_entropy(ph.batch, spec.num_labels)


def _vit_tower(b: ProgramBuilder, spec: ModelSpec, ph: Phase, pre_norm: bool = False) -> None:
    """A ViT's patch embedding and blocks over ``ph.batch`` images of ``ph.seq`` pixels a side
    (with ``pre_norm``, CLIP's layer norm of the embeddings before the first block).

    Over ``tp`` shards the patch embedding is split like the blocks' output projections
    (row-parallel): each shard reads its share of the pixels and multiplies them by its rows of
    the patch weights, adds the positions to its share of the elements, and an all-reduce sums
    the shards' partial embeddings.
    """
    per_image = spec.patch_tokens(ph.seq)
    patches = ph.batch * (per_image - 1)
    tokens = Phase(ph.batch, per_image, per_image, ph.tp, training=ph.training, flash=ph.flash,
                   sequence_parallel=ph.sequence_parallel)
    with b.layer("patch_embedding", "embedding"):
        b.copy_in("image", elems=_shard(ph.batch * spec.channels * ph.seq * ph.seq, ph.tp),
                  rows=ph.batch * spec.channels)
        b.matmul("patch_proj", patches, _shard(spec.channels * spec.patch_size ** 2, ph.tp), spec.hidden)
        b.vector("position_add", elems=_shard(patches * spec.hidden, ph.tp), rows=patches)
        b.collective("patch_allreduce", elems=patches * spec.hidden, ranks=ph.tp)
        if pre_norm:
            rows = tokens.batch * tokens.seq
            b.vector("pre_layernorm", elems=rows * spec.hidden, rows=rows, passes=2)
    _blocks(b, spec, tokens, causal=False)


def clip_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """CLIP (transformers' CLIPModel) as zero-shot classification calls it: the vision tower over
    the ``ph.batch`` images and, on a path of its own, the text tower over the model's
    ``num_labels`` class prompts of ``prompt_tokens`` tokens (causal), which every call encodes
    again; each tower's pooled output (the CLS token normalised again; the prompts' end tokens
    after the text tower's final norm) projected to ``projection_dim``, both normalised, and the
    scaled cosine similarity of every image with every prompt, one matmul whose transpose is the
    other way's logits.

    Over ``tp`` shards both towers split as a ViT's and an encoder's blocks do and the projections
    row-parallel, as :func:`vit_program`'s classifier; the similarities, a few thousand elements,
    are computed whole on every shard.
    """
    text = spec.text_tower
    prompts = Phase(spec.num_labels, spec.prompt_tokens, spec.prompt_tokens, ph.tp, training=ph.training,
                    flash=ph.flash, sequence_parallel=ph.sequence_parallel)
    width = spec.projection_dim
    b.prefix = "vision/"
    _vit_tower(b, spec, ph, pre_norm=True)
    with b.layer("projection", "head"):
        b.vector("post_layernorm", elems=_shard(ph.batch * spec.hidden, ph.tp), rows=ph.batch, passes=2)
        b.matmul("visual_projection", ph.batch, _shard(spec.hidden, ph.tp), width)
        image = b.collective("projection_allreduce", elems=ph.batch * width, ranks=ph.tp)
    b.prefix = "text/"
    b.branch()
    _token_embedding(b, text, prompts)
    _blocks(b, text, prompts, causal=True)
    with b.layer("projection", "head"):
        rows = prompts.batch * prompts.seq
        b.vector("final_layernorm", elems=rows * text.hidden, rows=rows, passes=2)
        b.matmul("text_projection", prompts.batch, _shard(text.hidden, ph.tp), width)
        words = b.collective("projection_allreduce", elems=prompts.batch * width, ranks=ph.tp)
    b.prefix = ""
    with b.layer("similarity", "head"):
        b.vector("normalise", elems=(ph.batch + prompts.batch) * width, rows=ph.batch + prompts.batch, passes=2,
                 deps=(image, words))
        b.matmul("logits_per_text", prompts.batch, width, ph.batch, weights=False)
        b.transpose("logits_per_image", prompts.batch, ph.batch)


def transformer_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    if spec.family == DECODER:
        decoder_program(b, spec, ph)
    elif spec.family == ENCODER_DECODER:
        t5_program(b, spec, ph)
    elif spec.family == VISION_TRANSFORMER:
        vit_program(b, spec, ph)
    elif spec.family == CLIP:
        clip_program(b, spec, ph)
    else:
        encoder_program(b, spec, ph)
