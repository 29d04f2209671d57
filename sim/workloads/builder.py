"""Appends ops to a :class:`Program` with readable dependency handling."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sim.workloads.graph import Layer, Op, OpKind, Program


def share(n: int, parts: int) -> int:
    """One part's share of ``n`` split ``parts`` ways: the largest part when they do not divide."""
    return -(-n // parts)


class ProgramBuilder:
    """Builds one core's program. Each op depends on the previous one unless ``deps`` is given."""

    def __init__(self, dtype_bytes: int) -> None:
        self.program = Program()
        self.dtype_bytes = dtype_bytes
        self.shared_weights = False  # weights of the ops being added belong to earlier ops
        self._fused = False  # the ops being added form one fused kernel (see :meth:`fused`)
        self._layer: tuple[str, str, int] | None = None
        self.prefix = ""  # prepended to the names of the layers being added (one model among several)
        self._branch = False  # the next op starts a path of its own (see :meth:`branch`)
        self.items = 1  # samples the activations of the ops being added divide into (see Op.items)

    @property
    def last(self) -> int:
        """Index of the most recently added op (-1 before the first)."""
        return len(self.program.ops) - 1

    @contextmanager
    def layer(self, name: str, kind: str) -> Iterator[None]:
        start = len(self.program.ops)
        yield
        n_ops = len(self.program.ops) - start
        if n_ops:
            self.program.layers.append(Layer(name=self.prefix + name, kind=kind, first_op=start, n_ops=n_ops))

    @contextmanager
    def fused(self, enabled: bool = True) -> Iterator[None]:
        """Ops added inside form one fused kernel whose tiles stay in SBUF (flash attention)."""
        before, self._fused = self._fused, enabled
        try:
            yield
        finally:
            self._fused = before

    def branch(self) -> None:
        """The next op added without ``deps`` depends on none before it: the start of a second
        input's path through the graph (CLIP's text tower beside its vision tower)."""
        self._branch = True

    def add(self, name: str, kind: OpKind, deps: tuple[int, ...] | None = None, **fields) -> int:
        if deps is None:
            deps = (self.last,) if self.last >= 0 and not self._branch else ()
        self._branch = False
        fields.setdefault("dtype_bytes", self.dtype_bytes)
        fields.setdefault("fused", self._fused)
        fields.setdefault("items", self.items)
        self.program.ops.append(Op(name=name, kind=kind, deps=tuple(d for d in deps if d >= 0), **fields))
        return self.last

    def matmul(self, name: str, m: int, k: int, n: int, *, count: int = 1, weights: bool = True,
               hbm_elems: int | None = None, act: str = "", deps: tuple[int, ...] | None = None,
               shared_weights: bool = False, params: int | None = None, read_after: int = -1,
               weight_replicas: int = 1, kv_row_elems: int = 0, weight_run_rows: int = 1,
               contiguous_weights: bool = False, items: int | None = None) -> int:
        """``count`` x ``[m,k] @ [k,n]``; with ``weights`` the ``[k,n]`` operand comes from memory.

        ``shared_weights``: the weights belong to another op (tied embeddings) and are not
        counted again as parameters, though they are still read.
        ``params``: the parameters the op owns when they are more than the ``k x n x count``
        weights it reads (the experts a mixture-of-experts layer leaves idle).
        ``read_after``: the op that decides which weights to read (see :class:`Op`).
        ``weight_replicas``: cores that hold these weights whole, each running its share of the
        ``m`` rows (see :class:`Op`).
        ``kv_row_elems``: ``hbm_elems`` are a KV cache laid out in rows this long (see :class:`Op`).
        ``weight_run_rows``: weight rows one partition reads in one run (see :class:`Op`).
        ``contiguous_weights``: the weights are one contiguous block, an expert's (see :class:`Op`).
        ``items``: the samples its activations divide into, when not the builder's (see :class:`Op`).
        """
        if hbm_elems is None:
            hbm_elems = k * n * count if weights else 0
        if params is None:
            params = k * n * count
        owned = params if weights and not (shared_weights or self.shared_weights) else 0
        return self.add(name, OpKind.MATMUL, deps, m=m, k=k, n=n, count=count, rows=m,
                        hbm_elems=hbm_elems, params=owned, weights=weights, act=act, read_after=read_after,
                        weight_replicas=weight_replicas, kv_row_elems=kv_row_elems,
                        weight_run_rows=weight_run_rows, contiguous_weights=contiguous_weights,
                        items=self.items if items is None else items)

    def transpose(self, name: str, rows: int, cols: int, *, count: int = 1,
                  deps: tuple[int, ...] | None = None) -> int:
        """Turn ``count`` ``[rows, cols]`` tensors (``rows`` on partitions) around on the TensorE."""
        return self.add(name, OpKind.TRANSPOSE, deps, m=rows, n=cols, count=count, rows=rows)

    def vector(self, name: str, elems: int, rows: int, passes: float = 1.0,
               deps: tuple[int, ...] | None = None, **fields) -> int:
        return self.add(name, OpKind.VECTOR, deps, elems=elems, rows=rows, passes=passes, **fields)

    def scalar(self, name: str, elems: int, rows: int, act: str = "",
               deps: tuple[int, ...] | None = None, **fields) -> int:
        return self.add(name, OpKind.SCALAR, deps, elems=elems, rows=rows, act=act, **fields)

    def gpsimd(self, name: str, elems: int, rows: int, deps: tuple[int, ...] | None = None) -> int:
        return self.add(name, OpKind.GPSIMD, deps, elems=elems, rows=rows)

    def gather(self, name: str, rows: int, row_elems: int, table_rows: int,
               deps: tuple[int, ...] | None = None, shared: bool = False) -> int:
        """Look ``rows`` rows up in a ``[table_rows, row_elems]`` table held in device memory
        (``shared``: a table another program owns, not counted again as parameters)."""
        return self.add(name, OpKind.GATHER, deps, elems=rows * row_elems, rows=rows,
                        hbm_elems=rows * row_elems, params=0 if shared else table_rows * row_elems)

    def copy_in(self, name: str, elems: int, rows: int, deps: tuple[int, ...] | None = None) -> int:
        """Load ``elems`` from device memory into SBUF."""
        return self.add(name, OpKind.COPY, deps, elems=elems, rows=rows, hbm_elems=elems)

    def copy_out(self, name: str, elems: int, rows: int, deps: tuple[int, ...] | None = None) -> int:
        """Store ``elems`` from SBUF to device memory."""
        return self.add(name, OpKind.COPY, deps, elems=elems, rows=rows, hbm_write_elems=elems)

    def collective(self, name: str, elems: int, ranks: int, kind: str = "all_reduce",
                   deps: tuple[int, ...] | None = None, **fields) -> int:
        """A collective (``kind``: sum, gather, scatter) of ``elems``, each rank's whole buffer,
        across ``ranks`` cores; a no-op when the copy runs on one core."""
        if ranks <= 1:
            return self.last
        return self.add(name, OpKind.COLLECTIVE, deps, elems=elems, rows=ranks, collective=kind, **fields)

    def cross_entropy(self, rows: int, classes: int, ranks: int = 1) -> int:
        """A training step's loss over ``rows`` rows of ``classes`` logits: torch's cross-entropy,
        log_softmax then the negative log-likelihood of each row's label. Over ``ranks`` shards
        each holds its share of the classes and the rows' maxima and sums are all-reduced across
        them (Megatron's and NxD's vocabulary-parallel cross-entropy).

        Three passes over the logits: their maximum, their exponentials summed (one ScalarE pass
        accumulating its output), and the log-probabilities, which the backward pass reads back
        for log_softmax's gradient, ``g - exp(log p) * sum(g)``: two passes (the label's pick is
        one element a row). The maximum and the sum have no gradient of their own."""
        elems = rows * classes
        self.vector("loss_max", elems=elems, rows=rows, reduced=rows, grad_passes=0)
        self.collective("loss_max_allreduce", elems=rows, ranks=ranks, grad_passes=0)
        self.scalar("loss_exp", elems=elems, rows=rows, act="exp", reduced=rows, grad_passes=0)
        self.collective("loss_sum_allreduce", elems=rows, ranks=ranks, grad_passes=0)
        return self.vector("log_probs", elems=elems, rows=rows)
