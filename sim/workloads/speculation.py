"""The programs of speculative decoding as the serving stacks compile them: what proposes the
tokens (a draft model's decode steps, or an EAGLE or EAGLE-3 head's passes on the model's hidden
states), the model verifying them, and the prompt's encoding that fills both caches; in one graph
(NxD Inference's fused speculation, neuronx_distributed_inference models/model_base.py
NeuronFusedSpecModel) or in graphs of their own, each launched after the one before it ends (vLLM
Neuron's EAGLE-3, vllm-neuron/docs/design/speculation/speculative_decoding_design.md; a draft model
driven by the host, NxD Inference's assisted decoding).

An EAGLE head (NxD Inference feature-guide.rst, EAGLE Speculative Decoding) is one decoder layer of
the model's dimensions on its hidden states: each pass embeds its input tokens, projects the
embedding beside the hidden state back to the hidden size (fc, 2 x hidden in: the model's last
hidden state in a pass that follows the model, the head's own after that), runs the layer and
samples the model's vocabulary with a copy of its LM head. An EAGLE-3 head fuses the hidden states
of three of the model's layers (low, middle, high) through fc when it follows the model, takes
its own hidden state as it is in the passes after, feeds its layer's QKV projection the embedding
beside the hidden state (2 x hidden, each normalised) and predicts a reduced vocabulary
(``speculation.toml`` [eagle]). The head's MLP is dense, of the model's intermediate width (for a
mixture of experts, one expert's), as EAGLE checkpoints copy their target's configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

from sim.hardware.chip import load_toml, sourced
from sim.workloads.builder import ProgramBuilder
from sim.workloads.builder import share as _shard
from sim.workloads.graph import Program
from sim.workloads.models import DECODER, ModelSpec
from sim.workloads.transformer import Phase, _normalise, attention, mlp, transformer_program

DRAFT_MODEL, EAGLE, EAGLE3 = "draft_model", "eagle", "eagle3"  # vLLM's speculative_config methods
SPEC_METHODS = (DRAFT_MODEL, EAGLE, EAGLE3)
HEADS = (EAGLE, EAGLE3)  # methods whose draft is a head on the model, not a model of its own


@cache
def speculation_data() -> dict:
    """``sim/hardware/data/speculation.toml``."""
    return load_toml("speculation.toml")


def eagle_setting(key: str) -> int:
    """A size of EAGLE heads (``speculation.toml`` [eagle])."""
    return int(sourced(speculation_data()["eagle"], key, "speculation.toml [eagle]"))


@dataclass(frozen=True)
class Drafter:
    """What proposes a speculative step's tokens: a draft model of its own, or an EAGLE head on
    the model (``model`` is then the head as a one-layer model, ``lm_vocab`` its LM head's
    vocabulary and ``target_width`` the model's hidden-state features a token it fuses). ``fused``:
    compiled into the model's graphs by NxD Inference, whose head's fc is split over the cores and
    its output gathered (WeightGatheredColumnParallel); vLLM Neuron's is whole on every core
    (nn.Linear)."""

    method: str
    model: ModelSpec
    fused: bool
    lm_vocab: int = 0
    target_width: int = 0


def drafter(target: ModelSpec, method: str, draft: ModelSpec | None, fused: bool) -> Drafter:
    """The drafter of ``method``: ``draft`` for a draft model, else an EAGLE head of ``target``'s
    dimensions (``speculation.toml`` [eagle])."""
    if method == DRAFT_MODEL:
        return Drafter(method, draft, fused)
    head = ModelSpec(name=f"{target.name} {method} head", model_type="llama", family=DECODER, hidden=target.hidden,
                     layers=eagle_setting("head_layers"), heads=target.heads, kv_heads=target.kv_heads,
                     head_dim=target.head_dim, intermediate=target.moe_intermediate or target.intermediate,
                     vocab=target.vocab, act="silu", gated_mlp=True, max_positions=target.max_positions,
                     embedding_size=target.hidden)
    if method == EAGLE3:
        vocab = min(target.vocab, eagle_setting("eagle3_draft_vocab"))
        return Drafter(method, head, fused, vocab, eagle_setting("eagle3_target_layers") * target.hidden)
    return Drafter(method, head, fused, target.vocab, target.hidden)


def drafter_parameters(d: Drafter, dt: int) -> int:
    """The weights the drafter keeps beside the model's: a draft model's, or a head's (its token
    embedding, fc, layer and LM head)."""
    b, ph = ProgramBuilder(dt), Phase(1, 1, 1)
    if d.method in HEADS:
        head_pass(b, d, ph, d.target_width, 1)
    else:
        transformer_program(b, d.model, ph)
    return sum(op.params for op in b.program.ops)


def head_pass(b: ProgramBuilder, d: Drafter, ph: Phase, target_width: int, logits_rows: int) -> None:
    """One pass of an EAGLE head over ``ph.seq`` positions of each sequence: fusing ``target_width``
    features a token of the model's hidden states, read from device memory (0: its own hidden state
    of the pass before), and sampling ``logits_rows`` rows of its LM head. NxD Inference compiles
    its EAGLE heads without sequence parallelism (draft_neuron_config.sequence_parallel_enabled =
    False, feature-guide.rst's fused speculation example)."""
    if d.fused:
        ph = replace(ph, sequence_parallel=False)
    head, tokens, tp = d.model, ph.batch * ph.seq, ph.tp
    width = head.hidden
    with b.layer("embedding", "embedding"):
        b.gpsimd("token_index", elems=tokens, rows=tokens)
        embedded = b.gather("token_gather", rows=tokens, row_elems=width, table_rows=_shard(head.vocab, tp))
        if target_width or d.method == EAGLE:
            deps = (embedded,)
            if target_width:
                deps += (b.copy_in("target_hidden", elems=tokens * target_width, rows=tokens, deps=()),)
            fuse = target_width if d.method == EAGLE3 else width + (target_width or width)
            b.matmul("fc", tokens, fuse, _shard(width, tp) if d.fused else width, deps=deps)
            if d.fused:
                b.collective("fc_allgather", elems=tokens * width, ranks=tp, kind="all_gather")
    for i in range(head.layers):
        with b.layer(f"layer{i}.attention", "attention"):
            attention(b, head, ph, True, i, qkv_input=2 * width if d.method == EAGLE3 and i == 0 else 0)
        with b.layer(f"layer{i}.mlp", "mlp"):
            mlp(b, head, ph, i)
    with b.layer("lm_head", "head"):
        vocab = _shard(d.lm_vocab, tp)
        _normalise(b, logits_rows, width, "final_norm")
        b.matmul("lm_head", logits_rows, width, vocab)
        b.gpsimd("sample", elems=logits_rows * vocab, rows=logits_rows)


def _target(b: ProgramBuilder, target: ModelSpec, d: Drafter, ph: Phase) -> None:
    """The model's pass, writing the hidden states an EAGLE head reads to device memory."""
    transformer_program(b, target, ph)
    if d.target_width:
        with b.layer("hidden_states", "head"):
            tokens = ph.batch * ph.seq
            b.copy_out("hidden_states", elems=tokens * d.target_width, rows=tokens)


def _draft(b: ProgramBuilder, d: Drafter, ph: Phase, after_target: bool) -> None:
    """One pass of the drafter over ``ph``, sampling each sequence's last position: a draft model's
    own, or a head's (fusing the model's hidden states when it follows the model)."""
    if d.method in HEADS:
        head_pass(b, d, ph, d.target_width if after_target else 0, ph.batch)
    else:
        transformer_program(b, d.model, ph)


def _graph(dt: int, ph: Phase, prefix: str, build: Callable[[ProgramBuilder], None]) -> Program:
    """A graph of its own, its layers named from ``prefix``."""
    b = ProgramBuilder(dt)
    b.items, b.prefix = ph.batch, prefix
    build(b)
    return b.program


def prefill_graphs(target: ModelSpec, d: Drafter, proposed: int, ph: Phase, dt: int) -> tuple[Program, ...]:
    """The prompt's encoding (``ph``) with speculation: the model's pass, then the drafter's over
    the same positions, which fills its cache (NxD Inference runs both in one graph:
    _context_encoding_forward, _eagle_context_encoding_forward). vLLM Neuron's EAGLE-3 head also
    proposes the first step's tokens before the first token returns: its first pass over the
    prompt, each of the ``proposed - 1`` others over one position, in graphs of their own."""
    if d.fused:
        b = ProgramBuilder(dt)
        b.items = ph.batch
        _target(b, target, d, ph)
        b.prefix = "draft/"
        _draft(b, d, ph, after_target=True)
        return (b.program,)
    graphs = [_graph(dt, ph, "", lambda b: _target(b, target, d, ph)),
              _graph(dt, ph, "draft 1/", lambda b: _draft(b, d, ph, after_target=True))]
    if d.method in HEADS:
        step = replace(ph, seq=1, decode_step=True)
        graphs += [_graph(dt, ph, f"draft {i + 1}/", lambda b: _draft(b, d, step, after_target=False))
                   for i in range(1, proposed)]
    return tuple(graphs)


def step_graphs(target: ModelSpec, d: Drafter, proposed: int, ph: Phase, dt: int) -> tuple[Program, ...]:
    """One speculative step over contexts of ``ph.context`` positions (``ph``: a token step):
    ``proposed`` draft tokens and the model's verification of them and of its own next token, in
    one pass over ``proposed + 1`` positions (its logits at every position, to compare).

    Fused (NxD Inference's NeuronFusedSpecModel): one graph, the draft model's ``proposed + 1``
    decode steps (the last only fills its KV cache), or a head's ``proposed`` one-token passes, the
    first fusing the model's hidden states of the step before, then the model's verification, then
    for a head a pass over every verified position fusing the model's new hidden states (its KV
    cache refilled, _eagle_token_gen_forward). Apart: the draft model's ``proposed`` decode steps and
    the verification, each a graph (assisted decoding); vLLM Neuron's EAGLE-3: the verification,
    then the head's first pass over the verified positions, fusing the hidden states the model
    wrote for each, and its ``proposed - 1`` one-position passes, each a graph
    (speculative_decoding_design.md, "Step N: Verification + Proposal")."""
    verify = replace(ph, seq=proposed + 1)
    if d.fused:
        b = ProgramBuilder(dt)
        b.items = ph.batch
        passes = proposed + 1 if d.method == DRAFT_MODEL else proposed
        for i in range(passes):
            b.prefix = f"draft {i + 1}/"
            _draft(b, d, ph, after_target=i == 0)
        b.prefix = "verify/"
        _target(b, target, d, verify)
        if d.method in HEADS:
            b.prefix = f"draft {passes + 1}/"
            head_pass(b, d, verify, d.target_width, verify.batch * verify.seq)
        return (b.program,)
    checked = _graph(dt, ph, "verify/", lambda b: _target(b, target, d, verify))
    if d.method == DRAFT_MODEL:
        return (*(_graph(dt, ph, f"draft {i + 1}/", lambda b: _draft(b, d, ph, after_target=False))
                  for i in range(proposed)), checked)
    first = _graph(dt, ph, "draft 1/", lambda b: head_pass(b, d, verify, d.target_width, ph.batch))
    return (checked, first, *(_graph(dt, ph, f"draft {i + 1}/", lambda b: _draft(b, d, ph, after_target=False))
                              for i in range(1, proposed)))
