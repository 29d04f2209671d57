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
    # positions a query attends, per layer (0: all of them): gpt-oss's sliding windows, Llama 4's
    # chunks; ``window_kind`` is "sliding" or "chunked"
    layer_windows: tuple[int, ...] = ()
    window_kind: str = ""
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
        """``layer`` turns its queries and keys by their positions (Llama 4's full-attention layers
        are the ones without positions, NoPE)."""
        return (self.family == DECODER and not self.learned_positions
                and not (self.window_kind == "chunked" and not self.window(layer)))

    def kv_elems_per_position(self, layer: int) -> int:
        """Elements ``layer`` caches per token: keys and values of each KV head, or MLA's latent
        and rotary key (shared by all heads)."""
        if self.mla:
            return self.kv_lora_rank + self.qk_rope_dim
        return 2 * self.kv_heads * self.head_dim

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
                   layer_windows=tuple(chunk if r else 0 for r in rope), window_kind="chunked")


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
    "deepseek_v3": _deepseek_v3, "llama4": _llama4, "llama4_text": _llama4, "vit": _vit, "clip": _clip,
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
    if spec.family not in (CNN, ENCODER_DECODER) and spec.hidden % spec.heads:  # T5's heads have their own width
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
