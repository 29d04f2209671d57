"""Token mixers other than softmax attention over every position, for one core's shard: Gated
DeltaNet's linear attention (Qwen3.5's ``linear_attention`` layers) and the lightning indexers that
make attention sparse (GLM-5's DeepSeek sparse attention, MiniMax-M3's block-sparse attention).

Each follows its ``transformers`` modeling file (``models/qwen3_5/modeling_qwen3_5.py``,
``models/glm_moe_dsa/modular_glm_moe_dsa.py``, ``models/minimax_m3_vl/modular_minimax_m3_vl.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.workloads.builder import ProgramBuilder, share
from sim.workloads.graph import OpKind

if TYPE_CHECKING:
    from sim.workloads.models import ModelSpec
    from sim.workloads.transformer import Phase

# the positions Gated DeltaNet's chunked form takes together: torch_chunk_gated_delta_rule's
# chunk_size (transformers models/qwen3_5/modeling_qwen3_5.py), as flash-linear-attention's
# chunk_gated_delta_rule, which it stands in for
CHUNK = 64
STATE_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # a config's mamba_ssm_dtype


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet's sizes (Qwen3.5's ``linear_*`` keys): ``key_heads`` query/key heads of
    ``key_dim`` serve ``value_heads`` value heads of ``value_dim`` (grouped value attention); a
    depthwise causal convolution of ``conv_kernel`` positions runs over the queries, keys and
    values; each value head keeps a ``key_dim x value_dim`` state of ``state_bytes`` elements."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int
    state_bytes: int

    @property
    def conv_channels(self) -> int:
        """Channels the convolution runs over: queries, keys and values (``conv_dim``)."""
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim

    def state_bytes_per_sequence(self, dtype_bytes: int) -> int:
        """What one layer keeps for one sequence between steps, whatever its length: the recurrent
        state of every value head, and the convolution's last ``conv_kernel - 1`` inputs."""
        state = self.value_heads * self.key_dim * self.value_dim * self.state_bytes
        return state + (self.conv_kernel - 1) * self.conv_channels * dtype_bytes


@dataclass(frozen=True)
class SparseAttention:
    """A lightning indexer choosing the keys each query attends: ``index_heads`` heads of
    ``index_dim`` score every cached key, and a query attends the ``keys`` best at most, chosen in
    blocks of ``block`` consecutive keys (1: DeepSeek sparse attention's single keys; MiniMax-M3's
    blocks of 128, ``keys`` its top blocks times the block). ``sparse_layers`` attend so;
    ``indexer_layers`` run an indexer of their own, the other sparse layers reuse the choice of the
    last one that did (GLM-5's IndexShare)."""

    index_heads: int
    index_dim: int
    keys: int
    block: int
    sparse_layers: tuple[bool, ...]
    indexer_layers: tuple[bool, ...]

    @property
    def blockwise(self) -> bool:
        return self.block > 1

    def selected_keys(self, seq: int, context: int, decode_step: bool) -> int:
        """Keys a query attends on average when ``seq`` queries are the last of ``context``
        positions: all the positions up to its own, at most ``keys``; 0 when no query has more
        than ``keys`` positions to choose from (the choice keeps them all, and attention is dense)."""
        if context <= self.keys:
            return 0
        if decode_step:
            return self.keys
        first = context - seq + 1  # the first query's positions, itself included
        below = max(0, min(self.keys, context) - first + 1)  # queries with fewer than ``keys`` positions
        short = below * (first + first + below - 1) // 2
        return round((short + (seq - below) * self.keys) / seq)


def gated_deltanet(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """A Gated DeltaNet layer's token mixing, between its block's normalisation and the all-reduce
    of its output (Qwen3_5GatedDeltaNet): the input projections, the causal convolution and its
    SiLU, the gates (beta = sigmoid(b), the decay g = -exp(A_log) softplus(a + dt_bias)), the L2
    norms of queries and keys, the delta-rule recurrence, the gated RMS norm and the output
    projection. The heads split over the ``tp`` cores like attention's.

    A prompt runs the recurrence in chunks of :data:`CHUNK` positions
    (torch_chunk_gated_delta_rule): in each chunk and value head the UT system ``k_beta k^T``, the
    intra-chunk scores ``q k^T``, their pairwise decays, the forward substitution solving the
    system and its product with ``[v_beta | decayed k_beta]``; then, chunk after chunk, the state
    read against the chunk's keys and queries, the intra-chunk scores times the corrected values,
    and the state's decay and update ``k^T v_new``. A one-token step runs the recurrent form
    (torch_recurrent_gated_delta_rule): the state decayed, read against the key, corrected by
    ``k (x) (v - S^T k) beta`` and read against the query. Every step reads the state and the
    convolution's window from device memory and writes them back: it has no KV cache; a prompt
    writes them for the steps after it (and reads them when an earlier chunk of it wrote them).
    """
    la = spec.linear_attention
    hk, hv = share(la.key_heads, ph.tp), share(la.value_heads, ph.tp)
    dk, dv, tokens = la.key_dim, la.value_dim, ph.batch * ph.seq
    conv = 2 * hk * dk + hv * dv
    carried = ph.decode_step or ph.context > ph.seq  # a state from the steps before this one
    proj = b.matmul("in_proj", tokens, spec.hidden, conv + hv * dv + 2 * hv)  # q k v, the gate z, b and a
    window = ph.batch * (la.conv_kernel - 1) * conv
    read = b.copy_in("conv_state_read", elems=window, rows=ph.batch, deps=()) if carried else -1
    b.vector("conv1d", elems=tokens * conv, rows=tokens, passes=la.conv_kernel, deps=(proj, read),
             hbm_elems=conv * la.conv_kernel, params=conv * la.conv_kernel)
    conv_out = b.scalar("conv_silu", elems=tokens * conv, rows=tokens, act=spec.act)
    b.copy_out("conv_state_write", elems=window, rows=ph.batch)
    beta = b.scalar("beta", elems=tokens * hv, rows=tokens, act="sigmoid", deps=(proj,))
    gates = b.scalar("decay", elems=tokens * hv, rows=tokens, act="softplus", deps=(beta,))
    normed = b.vector("qk_l2norm", elems=tokens * 2 * hk * dk, rows=tokens * 2 * hk, passes=2, deps=(conv_out,))
    state, state_rows = ph.batch * hv * dk * dv, ph.batch * hv * dk
    held = b.add("state_read", OpKind.COPY, deps=(), elems=state, rows=state_rows, hbm_elems=state,
                 dtype_bytes=la.state_bytes) if carried else -1
    if ph.decode_step and ph.seq == 1:
        b.vector("state_decay", elems=state, rows=state_rows, deps=(held, gates), dtype_bytes=la.state_bytes)
        b.matmul("state_keys", 1, dk, dv, count=ph.batch * hv, weights=False, deps=(b.last, normed))  # S^T k
        b.vector("delta", elems=tokens * hv * dv, rows=tokens, passes=2)  # (v - S^T k) beta
        b.vector("state_update", elems=state, rows=state_rows, passes=2, dtype_bytes=la.state_bytes)  # S += k delta
        b.matmul("state_query", 1, dk, dv, count=ph.batch * hv, weights=False)  # S^T q
    else:
        _chunked_recurrence(b, la, ph, hv, (normed, gates, held))
    mixed = b.last
    b.add("state_write", OpKind.COPY, elems=state, rows=state_rows, hbm_write_elems=state,
          dtype_bytes=la.state_bytes)
    core = b.vector("gated_norm", elems=tokens * hv * dv, rows=tokens * hv, passes=2, deps=(mixed,))
    z = b.scalar("z_silu", elems=tokens * hv * dv, rows=tokens, act="silu", deps=(proj,))
    b.vector("z_gate", elems=tokens * hv * dv, rows=tokens, deps=(core, z))
    b.matmul("out_proj", tokens, hv * dv, spec.hidden)


def _chunked_recurrence(b: ProgramBuilder, la: LinearAttention, ph: Phase, hv: int, ready: tuple[int, ...]) -> None:
    """The chunked form of the recurrence over ``ph.seq`` positions (see :func:`gated_deltanet`):
    ``chunk`` positions a chunk (the prompt's, when shorter), ``blocks`` of (sequence, head, chunk)."""
    dk, dv = la.key_dim, la.value_dim
    chunk = min(CHUNK, ph.seq)
    blocks = ph.batch * hv * -(-ph.seq // chunk)
    rows = blocks * chunk
    system = b.matmul("chunk_kk", chunk, dk, chunk, count=blocks, weights=False, deps=ready)  # k_beta k^T
    scores = b.matmul("chunk_qk", chunk, dk, chunk, count=blocks, weights=False, deps=ready)  # q k^T
    b.scalar("chunk_decay", elems=blocks * chunk * chunk, rows=rows, act="exp", deps=(system, scores))
    # forward substitution of the unit lower-triangular system: row i takes i x i products and sums
    substitution = (chunk - 1) * chunk * (2 * chunk - 1) // 6
    b.vector("ut_solve", elems=blocks * substitution, rows=rows, passes=2)
    b.matmul("chunk_values", chunk, chunk, dv + dk, count=blocks, weights=False)  # [v_new | k_cumdecay]
    b.matmul("scan_keys", chunk, dk, dv, count=blocks, weights=False)  # k_cumdecay S
    b.matmul("scan_queries", chunk, dk, dv, count=blocks, weights=False)  # q S
    b.matmul("scan_intra", chunk, chunk, dv, count=blocks, weights=False)  # (q k^T) v_new
    b.vector("state_decay", elems=blocks * dk * dv, rows=blocks * dk, dtype_bytes=la.state_bytes)
    b.matmul("scan_state", dk, chunk, dv, count=blocks, weights=False)  # k^T v_new


def indexer(b: ProgramBuilder, spec: ModelSpec, ph: Phase, heads: int, query_in: tuple[int, int],
            hidden_in: int, rope: int) -> int:
    """A lightning indexer's pass; returns the op choosing the keys.

    ``heads`` index heads score each query against every cached key (one key a position, shared by
    the heads) from a query projection of ``query_in`` (its op and width: DeepSeek sparse
    attention's normalised query latent, MiniMax-M3's block input) and a key projection of the
    block input ``hidden_in``, their first ``rope`` features turned by position; the new keys are
    appended to the indexer's own cache. DeepSeek sparse attention (GlmMoeDsaIndexer) normalises
    the key (LayerNorm), takes ReLU of the scores and sums the heads with weights projected from
    the block input, then takes the top ``keys`` positions; MiniMax-M3 (MiniMaxM3VLIndexer)
    RMS-normalises both, max-pools each head's scores over blocks of keys and takes each head's
    top blocks. The choice is modelled as one pass over what it chooses from."""
    sa = spec.sparse_attention
    tokens, ctx, dim = ph.batch * ph.seq, ph.context, sa.index_dim
    cached = ctx if ph.decode_step else max(0, ctx - ph.seq)
    q = b.matmul("index_q", tokens, query_in[1], heads * dim, deps=(query_in[0],))
    if sa.blockwise:
        q = b.vector("index_q_norm", elems=tokens * heads * dim, rows=tokens * heads, passes=2)
    b.matmul("index_k", tokens, spec.hidden, dim, deps=(hidden_in,))
    b.vector("index_k_norm", elems=tokens * dim, rows=tokens, passes=2)
    ready = b.vector("index_rope", elems=tokens * (heads + 1) * rope, rows=tokens, deps=(q, b.last))
    b.copy_out("index_k_append", elems=tokens * dim, rows=tokens)
    b.matmul("index_scores", ph.seq * heads, dim, ctx, count=ph.batch, weights=False, deps=(ready,),
             hbm_elems=ph.batch * cached * dim, kv_row_elems=dim)
    scores = tokens * heads * ctx
    if sa.blockwise:
        blocks = -(-ctx // sa.block)
        b.vector("index_block_max", elems=scores, rows=tokens * heads, reduced=tokens * heads * blocks)
        return b.vector("index_topk", elems=tokens * heads * blocks, rows=tokens * heads)
    scored = b.scalar("index_relu", elems=scores, rows=tokens * heads, act="relu")
    weights = b.matmul("index_weights", tokens, spec.hidden, sa.index_heads, deps=(hidden_in,))
    b.vector("index_head_sum", elems=scores, rows=tokens, passes=2, reduced=tokens * ctx, deps=(scored, weights))
    return b.vector("index_topk", elems=tokens * ctx, rows=tokens)
