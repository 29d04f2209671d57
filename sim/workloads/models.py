"""Model descriptions read from Hugging Face style ``config.json`` files.

The presets in ``presets/`` are such files (with a ``_source`` key naming where their numbers
come from), so a preset and a user's own ``config.json`` go through the same code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from sim.errors import ConfigError, UnknownNameError
from sim.io.inputs import name_text, open_regular
from sim.workloads.mixers import STATE_DTYPE_BYTES, LinearAttention, SparseAttention

PRESET_DIR = Path(__file__).with_name("presets")
MAX_CONFIG_BYTES = 4 << 20  # a config.json is a few kB; the largest (with tokenizer tables inlined) under 4 MiB
# sizes beyond any model: a hidden size, vocabulary or expert count is at most this, and a model
# has at most MAX_LAYERS blocks in all (the deepest published have under 200: ResNet-152's 50,
# T5-11B's 24 + 24, Llama-3.1-405B's 126), checked before its graph is built
MAX_CONFIG_SIZE = 1 << 24
MAX_LAYERS = 1024

ENCODER, DECODER, VISION_TRANSFORMER, CNN, CLIP = "encoder", "decoder", "vision-transformer", "cnn", "clip"
ENCODER_DECODER = "encoder-decoder"

# transformers' CLIPTextConfig and CLIPVisionConfig defaults, for keys a CLIP config.json leaves out
CLIP_TEXT_DEFAULTS = {"hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 12,
                      "num_attention_heads": 8, "vocab_size": 49408, "max_position_embeddings": 77,
                      "hidden_act": "quick_gelu"}
CLIP_VISION_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                        "num_attention_heads": 12, "image_size": 224, "patch_size": 32, "num_channels": 3,
                        "hidden_act": "quick_gelu"}
# the class prompts a CLIP inference encodes beside its images when its config.json does not say:
# the Neuron benchmark's (aws-neuron-sdk archive/src/benchmark/pytorch/hf-openai-clip_benchmark.py):
# "a photo of a {c}" for each of CIFAR-100's 100 classes, padded to the longest, 9 tokens with
# CLIP's start and end tokens ("a photo of a chimpanzee": chim-pan-zee; "aquarium_fish": 3)
CLIP_PROMPTS, CLIP_PROMPT_TOKENS = 100, 9


@dataclass(frozen=True)
class ModelSpec:
    """Architecture hyper-parameters of one model, whatever its family.

    ``family`` selects the graph builder: ``encoder`` (BERT-like, optionally with an MLP
    tower), ``decoder`` (GPT-2 / Llama), ``encoder-decoder`` (T5), ``vision-transformer`` (ViT),
    ``cnn`` (ResNet, VGG, U-Net) or ``clip`` (a ViT beside a text tower, ``text_tower``).
    ``experts`` > 0 makes the MLP of every block a mixture of that many experts, of which each
    token runs ``experts_per_token`` (Mixtral).
    """

    name: str
    model_type: str
    family: str
    hidden: int = 0
    layers: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    intermediate: int = 0
    vocab: int = 0
    act: str = "gelu"
    gated_mlp: bool = False
    max_positions: int = 0
    embedding_size: int = 0
    image_size: int = 224
    patch_size: int = 16
    channels: int = 3
    num_labels: int = 2
    stage_widths: tuple[int, ...] = ()
    stage_depths: tuple[int, ...] = ()
    bottleneck: bool = True
    stem_width: int = 64
    # VGG: its feature layers in torchvision's notation (a 3x3 convolution's output channels, or 0
    # for a 2x2 max pool) and the widths of its classifier's hidden layers
    conv_plan: tuple[int, ...] = ()
    classifier_widths: tuple[int, ...] = ()
    # U-Net: ``stage_widths`` are its levels' channels (the encoder's double convolutions, the
    # decoder's in reverse); a bilinear one upsamples instead of transposed convolutions
    bilinear: bool = False
    mlp_tower: tuple[int, ...] = ()
    tied_embeddings: bool = False  # the LM head reuses the token embedding matrix
    learned_positions: bool = False  # a learned position table (BERT, GPT-2, OPT); decoders without one are rotary
    position_offset: int = 0  # rows the learned position table holds before position 0 (OPT, RoBERTa: 2)
    rotary_fraction: float = 1.0  # of each head's width that rotary embeddings turn (GPT-J, GPT-NeoX: part)
    qk_norm: bool = False  # each head's queries and keys are RMS-normalised before rotary (Qwen3)
    experts: int = 0
    experts_per_token: int = 0
    # mixtures of experts as today's models lay them out: an expert's MLP width (0: intermediate),
    # which layers have experts (empty: all of them; DeepSeek-V3's first dense layers, Llama 4's
    # interleaved ones), and the experts every token runs besides its routed ones (their count)
    moe_intermediate: int = 0
    moe_layers: tuple[bool, ...] = ()
    shared_experts: int = 0
    shared_intermediate: int = 0  # the shared experts' MLP width when a config gives it (0: theirs x moe width)
    # positions a query attends, per layer (0: all of them): gpt-oss's sliding windows, Llama 4's
    # chunks; ``window_kind`` is "sliding" or "chunked"
    layer_windows: tuple[int, ...] = ()
    window_kind: str = ""
    nope_global: bool = False  # the layers without a window have no positions (Llama 4's, Trinity's NoPE)
    attn_output_gate: bool = False  # attention's output times a sigmoid gate projected per head (Qwen3.5, Trinity)
    # Gated DeltaNet in the ``linear_layers`` (Qwen3.5's linear_attention), softmax attention in the others
    linear_attention: LinearAttention | None = None
    linear_layers: tuple[bool, ...] = ()
    # a lightning indexer choosing the keys of attention (GLM-5's DSA, MiniMax-M3's block-sparse attention)
    sparse_attention: SparseAttention | None = None
    # multi-head latent attention (DeepSeek-V3): queries and keys/values through low-rank
    # projections, the cache holding one compressed latent and one shared rotary key per token
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    shared_layers: bool = False  # every block reuses the first block's weights (ALBERT)
    # dropout in training (transformers' configs): the probability of dropping an element of the
    # embeddings and of each block's output (hidden), and of the attention probabilities
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    # an encoder-decoder (T5): ``layers`` are its encoder's blocks, ``decoder_layers`` its
    # decoder's; ``relative_buckets`` > 0 adds a learned bias per head to every attention score
    # (T5's relative positions, looked up once and shared by the layers)
    decoder_layers: int = 0
    relative_buckets: int = 0
    # CLIP: its text tower (the spec's own fields are its vision tower's), the width both towers
    # project their pooled outputs to, and the padded length of the class prompts (num_labels of
    # them) that every inference encodes beside its images
    text_tower: ModelSpec | None = None
    projection_dim: int = 0
    prompt_tokens: int = 0
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def default_seq(self) -> int:
        """Sequence length (image size for vision models) used when none is given."""
        return self.image_size if self.is_vision else 128

    @property
    def is_vision(self) -> bool:
        """Its runs' sequence length is an image's size (a CLIP model's text side is its prompts)."""
        return self.family in (VISION_TRANSFORMER, CNN, CLIP)

    @property
    def pools(self) -> int:
        """The 2x2 max pools an image passes (VGG's, a U-Net's encoder's; a ResNet's strides do not
        empty a map)."""
        return len(self.stage_widths) - 1 if self.model_type == "unet" else self.conv_plan.count(0)

    def patch_tokens(self, image: int) -> int:
        """Tokens a ViT (or CLIP's vision tower) makes of an ``image`` pixels a side: its patches
        and the CLS token."""
        return (image // self.patch_size) ** 2 + 1

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.experts > 0 and (not self.moe_layers or self.moe_layers[layer])

    def window(self, layer: int) -> int:
        """Positions a query of ``layer`` attends at most (0: all)."""
        return self.layer_windows[layer] if self.layer_windows else 0

    def rotary(self, layer: int) -> bool:
        """``layer`` turns its queries and keys by their positions (Llama 4's and Trinity's
        full-attention layers are the ones without positions, NoPE)."""
        return (self.family == DECODER and not self.learned_positions
                and not (self.nope_global and not self.window(layer)))

    def is_linear_layer(self, layer: int) -> bool:
        """``layer`` mixes tokens by Gated DeltaNet's recurrence, not softmax attention."""
        return bool(self.linear_layers) and self.linear_layers[layer]

    def is_sparse_layer(self, layer: int) -> bool:
        """``layer`` attends the keys a lightning indexer chose."""
        return self.sparse_attention is not None and self.sparse_attention.sparse_layers[layer]

    def runs_indexer(self, layer: int) -> bool:
        """``layer`` runs a lightning indexer of its own (and caches its keys)."""
        return self.is_sparse_layer(layer) and self.sparse_attention.indexer_layers[layer]

    @property
    def shared_expert_width(self) -> int:
        """The MLP width of the shared experts together."""
        return self.shared_intermediate or self.shared_experts * (self.moe_intermediate or self.intermediate)

    def kv_elems_per_position(self, layer: int) -> int:
        """Elements ``layer`` caches per token: keys and values of each KV head, or MLA's latent
        and rotary key (shared by all heads), and an indexer's key; none in a Gated DeltaNet
        layer, whose state does not grow (:meth:`recurrent_state_bytes`)."""
        if self.is_linear_layer(layer):
            return 0
        index = self.sparse_attention.index_dim if self.runs_indexer(layer) else 0
        if self.mla:
            return self.kv_lora_rank + self.qk_rope_dim + index
        return 2 * self.kv_heads * self.head_dim + index

    def recurrent_state_bytes(self, dtype_bytes: int) -> int:
        """Bytes one sequence keeps in its Gated DeltaNet layers, whatever its length (convolution
        windows of ``dtype_bytes`` elements)."""
        if not self.linear_attention:
            return 0
        per_layer = self.linear_attention.state_bytes_per_sequence(dtype_bytes)
        return per_layer * sum(self.linear_layers)

    def kv_cache_elems(self, positions: int, encoder_positions: int = 0) -> int:
        """Elements the KV cache of one sequence of ``positions`` tokens holds over all layers (a
        windowed layer keeps only its window); an encoder-decoder's decoder blocks also keep the
        keys and values of the encoder's ``encoder_positions`` for their cross-attention."""
        if self.family == ENCODER_DECODER:
            return self.decoder_layers * 2 * self.kv_heads * self.head_dim * (positions + encoder_positions)
        return sum(self.kv_elems_per_position(i) * (min(positions, self.window(i)) if self.window(i) else positions)
                   for i in range(self.layers))


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONFIG_SIZE


def _size_list(value: Any) -> bool:
    return isinstance(value, list) and all(_positive_int(x) for x in value)


def _need(cfg: Mapping[str, Any], *keys: str, lists: bool = False) -> list[Any]:
    """The sizes ``keys`` names: positive integers, or with ``lists`` non-empty lists of them (a
    ResNet's stages), checked before any arithmetic on them."""
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ConfigError(f"config.json lacks {', '.join(missing)} for model_type '{cfg.get('model_type')}'")
    for k in keys:
        v = cfg[k]
        if lists and not (_size_list(v) and v):
            raise ConfigError(f"config.json: {k} must be a list of positive integers, got {json.dumps(v)[:60]}")
        if not lists and not _positive_int(v):
            raise ConfigError(f"config.json: {k} must be a positive integer, got {json.dumps(v)[:60]}")
    return [cfg[k] for k in keys]


def _dropout(cfg: Mapping[str, Any], hidden_key: str, attention_key: str, default: float) -> dict[str, float]:
    """The ``hidden_dropout`` and ``attention_dropout`` of a config.json that names them
    ``hidden_key`` and ``attention_key`` ("" for a family without that dropout), ``default`` for a
    key it leaves out (its transformers config class's default)."""
    out = {}
    for field_name, key in (("hidden_dropout", hidden_key), ("attention_dropout", attention_key)):
        value = cfg.get(key, default) if key else 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ConfigError(f"config.json: {key} must be a probability from 0 to below 1, got {json.dumps(value)}")
        out[field_name] = float(value)
    return out


def _optional_sizes(cfg: Mapping[str, Any], key: str) -> tuple[int, ...]:
    value = cfg.get(key, [])
    if not _size_list(value):
        raise ConfigError(f"config.json: {key} must be a list of positive integers, got {json.dumps(value)}")
    return tuple(value)


ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert", "encoder-mlp")  # position table starts 2 rows in


def _bert(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    hidden, layers, heads, inter, vocab = _need(
        cfg, "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    # RoBERTa's position table holds the padding index and one row below the first position:
    # its max_position_embeddings (514) allows 512 tokens
    offset = 2 if cfg["model_type"] in ROBERTA_TYPES else 0
    positions = cfg.get("max_position_embeddings", 512)
    return ModelSpec(
        name=name, model_type=cfg["model_type"], family=ENCODER, hidden=hidden, layers=layers,
        heads=heads, kv_heads=heads, head_dim=hidden // heads, intermediate=inter, vocab=vocab,
        act=cfg.get("hidden_act", "gelu"),
        max_positions=positions - offset if _positive_int(positions) else positions, position_offset=offset,
        embedding_size=cfg.get("embedding_size", hidden), num_labels=cfg.get("num_labels", 2),
        mlp_tower=_optional_sizes(cfg, "mlp_tower_sizes"),
        shared_layers=cfg["model_type"] == "albert" and cfg.get("num_hidden_groups", 1) == 1,
        learned_positions=True,
        # AlbertConfig drops nothing by default, BertConfig and its kin 10%
        **_dropout(cfg, "hidden_dropout_prob", "attention_probs_dropout_prob",
                   0.0 if cfg["model_type"] == "albert" else 0.1),
    )


def _distilbert(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    dim, layers, heads, inter, vocab = _need(cfg, "dim", "n_layers", "n_heads", "hidden_dim", "vocab_size")
    return ModelSpec(
        name=name, model_type="distilbert", family=ENCODER, hidden=dim, layers=layers, heads=heads,
        kv_heads=heads, head_dim=dim // heads, intermediate=inter, vocab=vocab,
        act=cfg.get("activation", "gelu"), max_positions=cfg.get("max_position_embeddings", 512),
        embedding_size=dim, learned_positions=True, **_dropout(cfg, "dropout", "attention_dropout", 0.1),
    )


def _gpt2_keys(name: str, cfg: Mapping[str, Any], *, learned_positions: bool, tied: bool,
               max_positions: int, dropout: float) -> ModelSpec:
    """GPT-2 and GPT-J, which name their sizes ``n_embd``, ``n_layer``, ``n_head``, ``n_inner``
    (``dropout``: their config class's default dropout)."""
    embd, layers, heads, vocab = _need(cfg, "n_embd", "n_layer", "n_head", "vocab_size")
    return ModelSpec(
        name=name, model_type=cfg["model_type"], family=DECODER, hidden=embd, layers=layers, heads=heads,
        kv_heads=heads, head_dim=embd // heads, intermediate=cfg.get("n_inner") or 4 * embd,
        vocab=vocab, act=cfg.get("activation_function", "gelu_new"),
        max_positions=cfg.get("n_positions", max_positions), embedding_size=embd,
        tied_embeddings=cfg.get("tie_word_embeddings", tied), learned_positions=learned_positions,
        **_dropout(cfg, "resid_pdrop", "attn_pdrop", dropout),
    )


def _gpt2(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    return _gpt2_keys(name, cfg, learned_positions=True, tied=True, max_positions=1024, dropout=0.1)


def _gptj(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """GPT-J: GPT-2's keys with rotary positions on the first ``rotary_dim`` of each head's
    width, and an LM head of its own."""
    spec = _gpt2_keys(name, cfg, learned_positions=False, tied=False, max_positions=2048, dropout=0.0)
    rotary = cfg.get("rotary_dim", 64)
    if rotary is None:  # the whole head
        return spec
    if not _positive_int(rotary):
        raise ConfigError(f"config.json: rotary_dim must be a positive integer, got {json.dumps(rotary)}")
    return replace(spec, rotary_fraction=min(1.0, rotary / spec.head_dim))


def _opt(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """OPT: a plain ReLU MLP of ``ffn_dim``, learned positions (their table starts two rows in)
    and tied token embeddings of ``word_embed_proj_dim``, projected to and from the hidden size
    when that differs (OPT-350m)."""
    hidden, layers, heads, inter, vocab = _need(
        cfg, "hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim", "vocab_size")
    return ModelSpec(
        name=name, model_type="opt", family=DECODER, hidden=hidden, layers=layers, heads=heads,
        kv_heads=heads, head_dim=hidden // heads, intermediate=inter, vocab=vocab,
        act=cfg.get("activation_function", "relu"), max_positions=cfg.get("max_position_embeddings", 2048),
        embedding_size=cfg.get("word_embed_proj_dim") or hidden,
        tied_embeddings=cfg.get("tie_word_embeddings", True), learned_positions=True, position_offset=2,
        **_dropout(cfg, "dropout", "attention_dropout", 0.1),
    )


def _rotary_decoder(name: str, cfg: Mapping[str, Any], *, act: str, max_positions: int, gated: bool = True,
                    kv_heads: int | None = None, head_dim: int | None = None, tied: bool = False,
                    experts: int = 0, experts_per_token: int = 0) -> ModelSpec:
    """A decoder with rotary positions and Llama's keys. The keyword arguments are the defaults
    of the family's transformers config class for keys a config.json leaves out (``kv_heads``
    None: one KV head per query head; ``head_dim`` None: hidden size / heads)."""
    hidden, layers, heads, inter, vocab = _need(
        cfg, "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    return ModelSpec(
        name=name, model_type=cfg["model_type"], family=DECODER, hidden=hidden, layers=layers,
        heads=heads, kv_heads=cfg.get("num_key_value_heads", kv_heads) or heads,
        head_dim=cfg.get("head_dim", head_dim) or hidden // heads, intermediate=inter, vocab=vocab,
        act=act, gated_mlp=gated, max_positions=cfg.get("max_position_embeddings", max_positions),
        embedding_size=hidden, tied_embeddings=cfg.get("tie_word_embeddings", tied),
        experts=experts, experts_per_token=experts_per_token, **_dropout(cfg, "", "attention_dropout", 0.0),
    )


def _llama(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    return _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=2048)


def _mistral(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    return _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=4096 * 32, kv_heads=8)


def _qwen2(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Qwen2: Llama's layout; its q/k/v biases (0.01% of the weights) are left out."""
    return _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=32768, kv_heads=32)


def _qwen3(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Qwen3 (dense): Llama's layout, heads of ``head_dim`` (128, wider than hidden / heads for
    the larger models), each head's queries and keys RMS-normalised."""
    spec = _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=40960, kv_heads=8,
                           head_dim=128)
    return replace(spec, qk_norm=True)


def _phi3(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Phi-3: Llama's layout with fused q/k/v and gate/up weights, the same matmuls."""
    return _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=4096)


def _gemma(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Gemma: a gated GELU MLP, heads wider than hidden size / heads, tied embeddings."""
    # Gemma's MLP runs the tanh approximation of GELU whatever hidden_act says (the released
    # configs say "gelu") unless hidden_activation names another
    return _rotary_decoder(name, cfg, act=cfg.get("hidden_activation") or "gelu_pytorch_tanh",
                           max_positions=8192, kv_heads=16, head_dim=256, tied=True)


def _gpt_neox(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """GPT-NeoX (Pythia): a plain GELU MLP, rotary positions on ``rotary_pct`` of each head's
    width, untied embeddings."""
    spec = _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "gelu"), max_positions=2048, gated=False)
    pct = cfg.get("rotary_pct", 0.25)
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 < pct <= 1:
        raise ConfigError(f"config.json: rotary_pct must be a fraction in (0, 1], got {json.dumps(pct)}")
    return replace(spec, rotary_fraction=float(pct))


def _mixtral(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Mixtral: Mistral's attention; each block's MLP a mixture of gated experts."""
    return _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=4096 * 32, kv_heads=8,
                           experts=cfg.get("num_local_experts", 8), experts_per_token=cfg.get("num_experts_per_tok", 2))


def _qwen3_moe(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Qwen3-MoE: Qwen3's attention; experts in every ``decoder_sparse_step``-th layer except the
    ``mlp_only_layers``, each ``moe_intermediate_size`` wide, no shared expert."""
    spec = replace(_qwen3(name, cfg), experts=cfg.get("num_experts", 128), experts_per_token=cfg.get(
        "num_experts_per_tok", 8), moe_intermediate=cfg.get("moe_intermediate_size", 768))
    step, dense = cfg.get("decoder_sparse_step", 1), cfg.get("mlp_only_layers") or []
    if not _positive_int(step) or not isinstance(dense, list):
        raise ConfigError("config.json: decoder_sparse_step must be a positive integer and mlp_only_layers a list")
    return replace(spec, moe_layers=tuple(i not in dense and (i + 1) % step == 0 for i in range(spec.layers)))


def _gpt_oss(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """gpt-oss: grouped-query attention with heads of 64, alternating sliding-window (128) and full
    layers (``layer_types``), attention sinks (one learned logit per head, left out: a column of
    the softmax), and a mixture of ``num_local_experts`` gated experts in every layer."""
    spec = _rotary_decoder(name, cfg, act="silu", max_positions=131072, kv_heads=8, head_dim=64,
                           experts=cfg.get("num_local_experts", 128),
                           experts_per_token=cfg.get("num_experts_per_tok", cfg.get("experts_per_token", 4)))
    layers = spec.layers
    types = cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    window = cfg.get("sliding_window", 128)
    if not _positive_int(window) or len(types) != layers:
        raise ConfigError("config.json: sliding_window must be a positive integer and layer_types one per layer")
    return replace(spec, layer_windows=tuple(window if t == "sliding_attention" else 0 for t in types),
                   window_kind="sliding")


def _deepseek_v3(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """DeepSeek-V3: multi-head latent attention (``q_lora_rank``, ``kv_lora_rank``, rotary and
    non-rotary query/key widths, ``v_head_dim``), dense MLPs in the first
    ``first_k_dense_replace`` layers, then ``n_routed_experts`` experts (top
    ``num_experts_per_tok``) and ``n_shared_experts`` shared ones. The multi-token-prediction
    module (``num_nextn_predict_layers``) is a training and speculation aid, left out."""
    spec = _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=163840,
                           experts=cfg.get("n_routed_experts", 256),
                           experts_per_token=cfg.get("num_experts_per_tok", 8))
    q_lora, kv_lora, rope, nope, v = _need(cfg, "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                           "v_head_dim")
    dense = cfg.get("first_k_dense_replace", 3)
    if not isinstance(dense, int) or dense < 0:
        raise ConfigError("config.json: first_k_dense_replace must be a whole number")
    return replace(spec, kv_heads=spec.heads, head_dim=rope + nope, q_lora_rank=q_lora, kv_lora_rank=kv_lora,
                   qk_rope_dim=rope, v_head_dim=v, moe_intermediate=cfg.get("moe_intermediate_size", 2048),
                   shared_experts=cfg.get("n_shared_experts", 1),
                   moe_layers=tuple(i >= dense for i in range(spec.layers)))


def _llama4(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Llama 4, its text model (the vision encoder is left out): experts (``num_local_experts``,
    ``intermediate_size`` wide, one shared) in the ``moe_layers`` (every
    ``interleave_moe_layer_step``-th), dense MLPs ``intermediate_size_mlp`` wide in the others;
    chunked attention (``attention_chunk_size``) in the rotary layers, full attention in the
    ``no_rope_layers`` (every fourth)."""
    text = cfg.get("text_config", cfg)
    if not isinstance(text, dict):
        raise ConfigError("config.json: text_config must be a JSON object")
    text = {**text, "model_type": "llama4"}
    spec = _rotary_decoder(name, text, act=text.get("hidden_act", "silu"), max_positions=4096 * 32, kv_heads=8,
                           head_dim=128, experts=text.get("num_local_experts", 16),
                           experts_per_token=text.get("num_experts_per_tok", 1))
    layers, step = spec.layers, text.get("interleave_moe_layer_step", 1)
    if not _positive_int(step):
        raise ConfigError("config.json: interleave_moe_layer_step must be a positive integer")
    moe = text.get("moe_layers") or list(range(step - 1, layers, step))
    rope = text.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(layers)]
    chunk = text.get("attention_chunk_size", 8192)
    if not isinstance(moe, list) or len(rope) != layers or not _positive_int(chunk):
        raise ConfigError("config.json: moe_layers, no_rope_layers (one per layer) or attention_chunk_size is invalid")
    return replace(spec, intermediate=text.get("intermediate_size_mlp", 16384),
                   moe_intermediate=text.get("intermediate_size", 8192), shared_experts=1,
                   moe_layers=tuple(i in moe for i in range(layers)), qk_norm=bool(text.get("use_qk_norm", True)),
                   layer_windows=tuple(chunk if r else 0 for r in rope), window_kind="chunked", nope_global=True)


def _text_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The text model of a vision-language checkpoint's config.json (its ``text_config``, the vision
    tower left out), or the config itself, under the checkpoint's ``model_type``."""
    text = cfg.get("text_config", cfg)
    if not isinstance(text, dict):
        raise ConfigError("config.json: text_config must be a JSON object")
    return {**text, "model_type": cfg["model_type"]}


def _layer_flags(cfg: Mapping[str, Any], key: str, value: str, layers: int, default: list[Any]) -> tuple[bool, ...]:
    """Which layers ``cfg[key]`` (one entry a layer; ``default`` when absent) marks ``value``."""
    types = cfg.get(key) or default
    if not isinstance(types, list) or len(types) != layers:
        raise ConfigError(f"config.json: {key} must list one entry per layer ({layers})")
    return tuple(t == value for t in types)


def _qwen3_5(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Qwen3.5 (transformers' Qwen3_5 and Qwen3_5Moe text models; a checkpoint's config nests it in
    ``text_config``): Gated DeltaNet (``linear_*`` sizes) in the ``linear_attention`` layers of
    ``layer_types`` (or all but every ``full_attention_interval``-th), and in the others grouped-query
    attention with per-head query/key norms, rotary positions on ``partial_rotary_factor`` of each
    head and an output gate (``q_proj`` twice as wide). The MoE model's every layer has
    ``num_experts`` experts and a shared one (``shared_expert_intermediate_size``; its one-column
    sigmoid gate is left out); the multi-token-prediction layer is a speculation aid, left out."""
    text = _text_config(cfg)
    moe = cfg["model_type"].startswith("qwen3_5_moe")
    if moe:  # Qwen3_5MoeTextConfig has no dense MLP: every layer's is the experts'
        text["intermediate_size"] = _need(text, "moe_intermediate_size")[0]
    spec = _rotary_decoder(name, text, act=text.get("hidden_act", "silu"), max_positions=262144)
    layers = spec.layers
    kh, vh, kd, vd, kernel = _need(text, "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                   "linear_value_head_dim", "linear_conv_kernel_dim")
    interval = text.get("full_attention_interval")
    if "layer_types" not in text and not _positive_int(interval):
        raise ConfigError("config.json: Qwen3.5 needs layer_types or a positive full_attention_interval")
    default = [] if "layer_types" in text else [
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    state = text.get("mamba_ssm_dtype", "float32")  # the recurrence runs in FP32 (torch_chunk_gated_delta_rule)
    if state not in STATE_DTYPE_BYTES:
        raise ConfigError(f"config.json: mamba_ssm_dtype must be one of {', '.join(STATE_DTYPE_BYTES)}")
    rope = text.get("rope_parameters") or {}
    fraction = rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 1.0)) if isinstance(
        rope, dict) else 1.0
    spec = replace(spec, qk_norm=True, attn_output_gate=True, rotary_fraction=fraction,
                   linear_attention=LinearAttention(kh, vh, kd, vd, kernel, STATE_DTYPE_BYTES[state]),
                   linear_layers=_layer_flags(text, "layer_types", "linear_attention", layers, default))
    if not moe:
        return spec
    shared = _need(text, "shared_expert_intermediate_size")[0]
    return replace(spec, experts=text.get("num_experts", 256), experts_per_token=text.get("num_experts_per_tok", 8),
                   moe_intermediate=spec.intermediate, shared_experts=1, shared_intermediate=shared)


def _glm_moe_dsa(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """GLM-5 (transformers' GlmMoeDsa): DeepSeek-V3's latent attention and experts (dense MLPs in the
    ``dense`` layers of ``mlp_layer_types``) with DeepSeek sparse attention in every layer: a
    lightning indexer of ``index_n_heads`` heads of ``index_head_dim`` chooses the ``index_topk``
    keys of each query, in the ``full`` layers of ``indexer_types`` (IndexShare: the ``shared`` ones
    reuse the last full layer's choice; without the list, every ``index_topk_freq``-th layer after
    ``index_skip_topk_offset``, as GlmMoeDsaConfig derives it). Defaults are GlmMoeDsaConfig's."""
    spec = _deepseek_v3(name, cfg)
    layers = spec.layers
    if "mlp_layer_types" in cfg:
        spec = replace(spec, moe_layers=_layer_flags(cfg, "mlp_layer_types", "sparse", layers, []))
    freq, offset = cfg.get("index_topk_freq", 1), cfg.get("index_skip_topk_offset", 2)
    pattern = cfg.get("index_topk_pattern")
    if isinstance(pattern, str):
        pattern = ["full" if c == "F" else "shared" for c in pattern]
    if not _positive_int(freq) or not isinstance(offset, int):
        raise ConfigError("config.json: index_topk_freq must be a positive integer and index_skip_topk_offset one")
    default = pattern or ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]
    topk, heads, dim = (cfg.get(k, d) for k, d in (("index_topk", 2048), ("index_n_heads", 32),
                                                     ("index_head_dim", 128)))
    if not all(_positive_int(v) for v in (topk, heads, dim)):
        raise ConfigError("config.json: index_topk, index_n_heads and index_head_dim must be positive integers")
    return replace(spec, max_positions=cfg.get("max_position_embeddings", 202752), sparse_attention=SparseAttention(
        heads, dim, topk, 1, (True,) * layers, _layer_flags(cfg, "indexer_types", "full", layers, default)))


def _minimax_m3(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """MiniMax-M3 (transformers' MiniMaxM3VL text model; the checkpoint's ``minimax_m3_vl`` config
    nests it in ``text_config``, NxD Inference's contrib reads it flat as ``minimax_m3``):
    grouped-query attention with per-head query/key norms and ``rotary_dim`` of each head turned;
    dense MLPs ``dense_intermediate_size`` wide in the layers ``moe_layer_freq`` marks 0, and
    elsewhere ``num_local_experts`` experts ``intermediate_size`` wide with one shared expert
    (``shared_intermediate_size``); block-sparse attention in the layers ``sparse_attention_freq``
    marks (``sparse_attention_config``: ``sparse_num_index_heads`` index heads, one per KV head, of
    ``sparse_index_dim`` choose each query's ``sparse_topk_blocks`` blocks of ``sparse_block_size``
    keys, the local block among them). Defaults are MiniMaxM3VLTextConfig's."""
    text = _text_config(cfg)
    spec = _rotary_decoder(name, text, act=text.get("hidden_act", "silu"), max_positions=524288, kv_heads=4,
                           head_dim=128, experts=text.get("num_local_experts", 128),
                           experts_per_token=text.get("num_experts_per_tok", 4))
    layers = spec.layers
    sparse = text.get("sparse_attention_config") or {}
    if not isinstance(sparse, dict):
        raise ConfigError("config.json: sparse_attention_config must be an object")
    # the checkpoint's keys, or the flat ones MiniMaxM3VLTextConfig turns them into
    moe = _minimax_flags(text, "moe_layer_freq", "mlp_layer_types", "sparse", layers, [1] * layers)
    chosen = _minimax_flags(sparse, "sparse_attention_freq", "", "", layers, []) if sparse.get(
        "sparse_attention_freq") else _minimax_flags(text, "", "layer_types", "minimax_m3_sparse", layers, [0] * layers)
    heads, dim, block, top = (sparse.get(legacy, text.get(flat, d)) for legacy, flat, d in (
        ("sparse_num_index_heads", "index_n_heads", 4), ("sparse_index_dim", "index_head_dim", 128),
        ("sparse_block_size", "index_block_size", 128), ("sparse_topk_blocks", "index_topk_blocks", 16)))
    rotary = text.get("rotary_dim", 64)
    if not all(_positive_int(v) for v in (heads, dim, block, top, rotary)):
        raise ConfigError("config.json: the sparse attention's sizes and rotary_dim must be positive integers")
    return replace(spec, intermediate=text.get("dense_intermediate_size", 12288), moe_intermediate=spec.intermediate,
                   moe_layers=moe, shared_experts=1,
                   shared_intermediate=text.get("shared_intermediate_size", 3072), qk_norm=True,
                   rotary_fraction=min(1.0, rotary / spec.head_dim),
                   sparse_attention=SparseAttention(heads, dim, top * block, block, chosen, chosen))


def _minimax_flags(cfg: Mapping[str, Any], freq_key: str, types_key: str, value: str, layers: int,
                   default: list[Any]) -> tuple[bool, ...]:
    """A MiniMax-M3 per-layer pattern: ``cfg[freq_key]``'s 0/1 a layer, else the ``value`` entries of
    ``cfg[types_key]``, else ``default``'s 0/1."""
    if freq_key and freq_key in cfg:
        flags = cfg[freq_key]
        if not isinstance(flags, list) or len(flags) != layers:
            raise ConfigError(f"config.json: {freq_key} must list one entry per layer ({layers})")
        return tuple(bool(f) for f in flags)
    if types_key and types_key in cfg:
        return _layer_flags(cfg, types_key, value, layers, [])
    return tuple(bool(f) for f in default)


def _afmoe(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """Trinity (transformers' Afmoe): grouped-query attention with per-head query/key norms and an
    output gate (``gate_proj``), sliding windows (``sliding_window``) with rotary positions in the
    ``sliding_attention`` layers of ``layer_types`` (or all but every ``global_attn_every_n_layers``-th)
    and full attention without positions in the others; dense MLPs in the first
    ``num_dense_layers``, then ``num_experts`` experts ``moe_intermediate_size`` wide and
    ``num_shared_experts`` shared ones. Its extra norms after attention and the MLP (four RMS norms
    a layer) are left out. Defaults are AfmoeConfig's."""
    spec = _rotary_decoder(name, cfg, act=cfg.get("hidden_act", "silu"), max_positions=16384, head_dim=128,
                           experts=cfg.get("num_experts", 64), experts_per_token=cfg.get("num_experts_per_tok", 6))
    layers, every = spec.layers, cfg.get("global_attn_every_n_layers", 4)
    window, dense = cfg.get("sliding_window", 1024), cfg.get("num_dense_layers", 1)
    if not (_positive_int(every) and _positive_int(window) and isinstance(dense, int)):
        raise ConfigError("config.json: global_attn_every_n_layers and sliding_window must be positive integers, "
                          "num_dense_layers a whole number")
    default = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
    sliding = _layer_flags(cfg, "layer_types", "sliding_attention", layers, default)
    return replace(spec, moe_intermediate=cfg.get("moe_intermediate_size", 1408),
                   shared_experts=cfg.get("num_shared_experts", 2), moe_layers=tuple(i >= dense for i in range(layers)),
                   qk_norm=True, attn_output_gate=True, layer_windows=tuple(window if s else 0 for s in sliding),
                   window_kind="sliding", nope_global=True)


def _vit(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    hidden, layers, heads, inter = _need(
        cfg, "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    return ModelSpec(
        name=name, model_type="vit", family=VISION_TRANSFORMER, hidden=hidden, layers=layers,
        heads=heads, kv_heads=heads, head_dim=hidden // heads, intermediate=inter,
        act=cfg.get("hidden_act", "gelu"), image_size=cfg.get("image_size", 224),
        patch_size=cfg.get("patch_size", 16), channels=cfg.get("num_channels", 3),
        num_labels=cfg.get("num_labels", 1000), embedding_size=hidden, learned_positions=True,
        **_dropout(cfg, "hidden_dropout_prob", "attention_probs_dropout_prob", 0.0),
    )


def _clip(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """transformers' CLIPModel: a ViT (pre-normalised patch embeddings, its pooled CLS token
    normalised again) and a causal text transformer, each projected to ``projection_dim``."""
    towers = []
    for key, defaults in (("text_config", CLIP_TEXT_DEFAULTS), ("vision_config", CLIP_VISION_DEFAULTS)):
        given = cfg.get(key) or {}
        if not isinstance(given, Mapping):
            raise ConfigError(f"config.json: {key} must be an object")
        towers.append({**defaults, **given})
    text, vision = towers
    width, heads = text["hidden_size"], text["num_attention_heads"]
    text_spec = ModelSpec(
        name=f"{name} text", model_type="clip_text_model", family=ENCODER, hidden=width,
        layers=text["num_hidden_layers"], heads=heads, kv_heads=heads, head_dim=width // heads,
        intermediate=text["intermediate_size"], vocab=text["vocab_size"], act=text["hidden_act"],
        max_positions=text["max_position_embeddings"], embedding_size=width, learned_positions=True)
    _check_positive(text_spec)
    width, heads = vision["hidden_size"], vision["num_attention_heads"]
    return ModelSpec(
        name=name, model_type="clip", family=CLIP, hidden=width, layers=vision["num_hidden_layers"], heads=heads,
        kv_heads=heads, head_dim=width // heads, intermediate=vision["intermediate_size"], act=vision["hidden_act"],
        image_size=vision["image_size"], patch_size=vision["patch_size"], channels=vision["num_channels"],
        embedding_size=width, learned_positions=True, text_tower=text_spec,
        projection_dim=cfg.get("projection_dim", 512), num_labels=cfg.get("num_labels", CLIP_PROMPTS),
        prompt_tokens=cfg.get("prompt_tokens", CLIP_PROMPT_TOKENS))


def _resnet(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    widths, depths = _need(cfg, "hidden_sizes", "depths", lists=True)
    if len(widths) != len(depths):
        raise ConfigError("config.json: hidden_sizes and depths must have the same length")
    return ModelSpec(
        name=name, model_type="resnet", family=CNN, stage_widths=tuple(widths),
        stage_depths=tuple(depths), bottleneck=cfg.get("layer_type", "bottleneck") == "bottleneck",
        stem_width=cfg.get("embedding_size", 64), channels=cfg.get("num_channels", 3),
        num_labels=cfg.get("num_labels", 1000), act=cfg.get("hidden_act", "relu"),
        image_size=cfg.get("image_size", 224),
    )


def _vgg(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """torchvision's VGG (``vgg11``: its configuration "A", ``vgg16``: "D"), given as ``layers`` in
    torchvision's notation: a 3x3 convolution's output channels, or "M" for a 2x2 max pool."""
    if "layers" not in cfg:
        raise ConfigError("config.json lacks layers for model_type 'vgg'")
    layers = cfg["layers"]
    if not (isinstance(layers, list) and layers and all(x == "M" or _positive_int(x) for x in layers)):
        raise ConfigError(f"config.json: layers must list convolution widths and 'M' (max pool), "
                          f"got {json.dumps(layers)[:60]}")
    if layers[0] == "M":
        raise ConfigError("config.json: layers must start with a convolution, not a max pool")
    return ModelSpec(
        name=name, model_type="vgg", family=CNN, conv_plan=tuple(0 if x == "M" else x for x in layers),
        classifier_widths=_optional_sizes(cfg, "classifier_widths"), channels=cfg.get("num_channels", 3),
        num_labels=cfg.get("num_labels", 1000), act=cfg.get("hidden_act", "relu"),
        image_size=cfg.get("image_size", 224),
    )


UNET_WIDTHS = (64, 128, 256, 512, 1024)  # milesial/Pytorch-UNet unet/unet_model.py: the channels of its five levels


def _unet(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """milesial/Pytorch-UNet's UNet(n_channels, n_classes, bilinear) (unet/unet_model.py), the
    U-Net of the Neuron benchmarks (torch.hub ``unet_carvana``: 3 channels in, 2 classes, transposed
    convolutions): a double 3x3 convolution at each of five levels, 2x2 max pools down, and back up
    through the levels, each joined with the encoder's map of its size."""
    bilinear = cfg.get("bilinear", False)
    if not isinstance(bilinear, bool):
        raise ConfigError(f"config.json: bilinear must be true or false, got {json.dumps(bilinear)[:60]}")
    return ModelSpec(
        name=name, model_type="unet", family=CNN, stage_widths=UNET_WIDTHS, bilinear=bilinear,
        channels=cfg.get("n_channels", 3), num_labels=cfg.get("n_classes", 2), act="relu",
        image_size=cfg.get("image_size", 224),
    )


def _t5(name: str, cfg: Mapping[str, Any]) -> ModelSpec:
    """T5 (and Flan-T5, T5 v1.1): an encoder and a decoder of ``num_heads`` heads of ``d_kv``
    each (their width need not be ``d_model``), a ReLU MLP or, with ``feed_forward_proj``
    "gated-gelu", a gated one (transformers' T5Config: its GELU is gelu_new), relative position
    buckets instead of positions, and an LM head tied to the token embeddings unless
    ``tie_word_embeddings`` is false."""
    d_model, d_ff, d_kv, heads, layers, vocab = _need(cfg, "d_model", "d_ff", "d_kv", "num_heads", "num_layers",
                                                      "vocab_size")
    proj = cfg.get("feed_forward_proj", "relu")
    if not isinstance(proj, str) or not proj.removeprefix("gated-"):
        raise ConfigError(f"config.json: feed_forward_proj must name an activation (\"relu\", \"gated-gelu\"), "
                          f"got {json.dumps(proj)[:60]}")
    gated = proj.startswith("gated-")
    act = proj.removeprefix("gated-")
    decoder_layers = cfg.get("num_decoder_layers") or layers
    buckets = cfg.get("relative_attention_num_buckets", 32)
    for key, value in (("num_decoder_layers", decoder_layers), ("relative_attention_num_buckets", buckets)):
        if not _positive_int(value):
            raise ConfigError(f"config.json: {key} must be a positive integer, got {json.dumps(value)[:60]}")
    return ModelSpec(
        name=name, model_type="t5", family=ENCODER_DECODER, hidden=d_model, layers=layers,
        decoder_layers=decoder_layers, heads=heads, kv_heads=heads, head_dim=d_kv, intermediate=d_ff, vocab=vocab,
        act="gelu_new" if gated and act == "gelu" else act, gated_mlp=gated,
        max_positions=cfg.get("n_positions", 512), embedding_size=d_model,
        tied_embeddings=cfg.get("tie_word_embeddings", True), relative_buckets=buckets,
    )


PARSERS: Mapping[str, Callable[[str, Mapping[str, Any]], ModelSpec]] = {
    "bert": _bert, "roberta": _bert, "xlm-roberta": _bert, "camembert": _bert, "electra": _bert,
    "albert": _bert, "encoder-mlp": _bert, "distilbert": _distilbert, "gpt2": _gpt2, "gptj": _gptj,
    "opt": _opt, "gpt_neox": _gpt_neox, "llama": _llama, "mistral": _mistral, "qwen2": _qwen2, "qwen3": _qwen3,
    "phi3": _phi3, "gemma": _gemma, "mixtral": _mixtral, "qwen3_moe": _qwen3_moe, "gpt_oss": _gpt_oss,
    "deepseek_v3": _deepseek_v3, "llama4": _llama4, "llama4_text": _llama4, "qwen3_5": _qwen3_5,
    "qwen3_5_text": _qwen3_5, "qwen3_5_moe": _qwen3_5, "qwen3_5_moe_text": _qwen3_5, "glm_moe_dsa": _glm_moe_dsa,
    "minimax_m3": _minimax_m3, "minimax_m3_vl": _minimax_m3, "afmoe": _afmoe, "vit": _vit, "clip": _clip,
    "resnet": _resnet, "vgg": _vgg, "unet": _unet, "t5": _t5,
}


def spec_from_config(name: str, cfg: Mapping[str, Any], source: str = "") -> ModelSpec:
    """Build a :class:`ModelSpec` from a parsed ``config.json``."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or model_type not in PARSERS:
        supported = ", ".join(sorted(PARSERS))
        shown = f"'{model_type[:60]}'" if isinstance(model_type, str) else json.dumps(model_type)[:60]
        raise ConfigError(f"unsupported model_type {shown} in {name}: supported are {supported}")
    try:
        spec = PARSERS[model_type](name, cfg)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, ZeroDivisionError, IndexError) as exc:
        # a field of the wrong type or range that no check above names: still one line, naming it
        raise ConfigError(f"{name}: config.json has a field of the wrong type or range ({type(exc).__name__}: "
                          f"{str(exc)[:80]})") from None
    _check_positive(spec)
    return _with_source(spec, source or cfg.get("_source", ""))


def _with_source(spec: ModelSpec, source: str) -> ModelSpec:
    return ModelSpec(**{**spec.__dict__, "source": source})


def _check_positive(spec: ModelSpec) -> None:
    numbers = {"hidden": spec.hidden, "layers": spec.layers, "heads": spec.heads,
               "intermediate": spec.intermediate, "head_dim": spec.head_dim, "embedding_size": spec.embedding_size}
    if spec.family == CNN and (spec.conv_plan or spec.model_type == "unet"):
        numbers = {}  # VGG's layers are checked as they are read; a U-Net's widths are its code's
    elif spec.family == CNN:
        numbers = {"hidden_sizes": min(spec.stage_widths, default=0), "depths": min(spec.stage_depths, default=0),
                   "embedding_size": spec.stem_width}
    if spec.learned_positions and not spec.is_vision:  # a ViT's positions are its patches
        numbers["max_position_embeddings"] = spec.max_positions
    if spec.family != DECODER:
        numbers["num_labels"] = spec.num_labels
    if spec.is_vision:
        numbers.update(image_size=spec.image_size, num_channels=spec.channels)
        if spec.family != CNN:
            numbers["patch_size"] = spec.patch_size
    if spec.family == CLIP:
        numbers.update(projection_dim=spec.projection_dim, prompt_tokens=spec.prompt_tokens)
    if not spec.is_vision and spec.family != CNN:
        numbers["vocab_size"] = spec.vocab
    bad = [k for k, v in numbers.items() if not _positive_int(v)]
    if bad:
        raise ConfigError(f"{spec.name}: {', '.join(bad)} must be positive integers (at most {MAX_CONFIG_SIZE:,})")
    if spec.text_tower and spec.prompt_tokens > spec.text_tower.max_positions:
        raise ConfigError(f"{spec.name}: prompts of {spec.prompt_tokens} tokens are longer than its text tower's "
                          f"{spec.text_tower.max_positions} positions")
    if not isinstance(spec.act, str):
        raise ConfigError(f"{spec.name}: the activation (hidden_act) must be a name, got {json.dumps(spec.act)[:60]}")
    flags = {"gated_mlp": spec.gated_mlp, "tie_word_embeddings": spec.tied_embeddings}
    bad = [k for k, v in flags.items() if not isinstance(v, bool | int)]
    counts = {"num_experts": spec.experts, "num_experts_per_tok": spec.experts_per_token}
    bad += [k for k, v in counts.items() if not (isinstance(v, int) and 0 <= v <= MAX_CONFIG_SIZE)]
    if bad or not (isinstance(spec.rotary_fraction, int | float) and 0 < spec.rotary_fraction <= 1):
        raise ConfigError(f"{spec.name}: {', '.join(bad) or 'rotary fraction'} has a value of the wrong type or range")
    # a head width derived from a hidden size the heads do not divide (T5's heads, and decoders that
    # give head_dim, as Qwen3.5-27B's 24 of 256 over 5120, have their own width)
    if (spec.family not in (CNN, ENCODER_DECODER) and spec.hidden % spec.heads
            and spec.head_dim == spec.hidden // spec.heads):
        raise ConfigError(f"{spec.name}: hidden size {spec.hidden} is not divisible by {spec.heads} heads")
    if spec.family != CNN and (not isinstance(spec.kv_heads, int) or spec.kv_heads <= 0 or spec.heads % spec.kv_heads):
        raise ConfigError(f"{spec.name}: {spec.heads} attention heads cannot share {spec.kv_heads} key-value heads")
    extra = {"moe_intermediate_size": spec.moe_intermediate, "n_shared_experts": spec.shared_experts,
             "q_lora_rank": spec.q_lora_rank, "qk_rope_head_dim": spec.qk_rope_dim, "v_head_dim": spec.v_head_dim}
    bad = [k for k, v in extra.items() if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0)]
    if bad or any(not (isinstance(w, int) and w >= 0) for w in spec.layer_windows):
        raise ConfigError(f"{spec.name}: {', '.join(bad) or 'attention windows'} must be whole numbers")
    experts, per_token = spec.experts, spec.experts_per_token
    if (experts or per_token) and not (isinstance(experts, int) and isinstance(per_token, int)
                                       and 0 < per_token <= experts):
        raise ConfigError(f"{spec.name}: each token must run between 1 and all of the {experts} experts, "
                          f"not {per_token}")


def depth(spec: ModelSpec) -> int:
    """The blocks a model stacks, which its graph grows with: a transformer's layers (both stacks
    of an encoder-decoder, both towers of CLIP), a ResNet's blocks, a VGG's layers."""
    tower = spec.text_tower.layers if spec.text_tower else 0
    return spec.layers + spec.decoder_layers + tower + sum(spec.stage_depths) + len(spec.conv_plan)


@cache
def preset_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in PRESET_DIR.glob("*.json")))


def load_config_file(path: Path) -> dict[str, Any]:
    """Read a ``config.json`` (a regular file of at most :data:`MAX_CONFIG_BYTES`): a one-line
    :class:`ConfigError` for anything unreadable."""
    try:
        with open_regular(path) as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read model config {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"model config {path} is larger than any config.json ({MAX_CONFIG_BYTES:,} bytes at most)")
    try:
        cfg = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"model config {path} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"model config {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except (RecursionError, ValueError) as exc:  # nested too deeply; an integer of thousands of digits
        raise ConfigError(f"model config {path} is not a model config ({type(exc).__name__})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"model config {path} must hold a JSON object")
    return cfg


@cache
def get_model(name: str) -> ModelSpec:
    """A preset by name (``bert-large``, in any case) or a ``config.json`` path."""
    if name not in preset_names() and name.lower() in preset_names() and not Path(name).exists():
        return get_model(name.lower())
    if name in preset_names():
        path = PRESET_DIR / f"{name}.json"
        return spec_from_config(name, load_config_file(path))
    path = Path(name)
    if path.suffix == ".json" or path.exists():
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            raise ConfigError(f"model config {path} does not exist")
        cfg = load_config_file(path)
        name = cfg.get("_name_or_path")
        spec = spec_from_config(name if isinstance(name, str) and name else name_text(path.parent.name or path.stem),
                                cfg)
        if depth(spec) > MAX_LAYERS:
            raise ConfigError(f"model config {path}: {depth(spec):,} {'blocks' if spec.family == CNN else 'layers'} "
                              f"is more than any model has (at most {MAX_LAYERS:,})")
        return spec
    known = ", ".join(preset_names())
    raise UnknownNameError(f"unknown model '{name}': choose one of {known}, or give a config.json path")
