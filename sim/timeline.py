"""The timeline of one core: the run's phases (a program run a number of times), each execution
between the host's costs on the host track, identical executions copied rather than scheduled
again, and the op and layer tables the trace names them by."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.hardware.chip import Schedule
from sim.host import (
    HOST,
    PIPELINE_WAIT,
    HostCost,
)
from sim.lowering import RESOURCE_NAMES, CoreContext, LoweredOp, lower
from sim.scheduler import CoreScheduler, copy_span, log_mark, repeat_tail
from sim.workloads import (
    Program,
)

# what each layer's ops add up to, kept in the trace's metadata (``layer_stats``) for the analysis
LAYER_STATS = ("spill_save_bytes", "spill_reload_bytes", "transpose_flops", "dma_transfers")


HOST_RESOURCE = len(RESOURCE_NAMES)  # the host track's index among the scheduler's log tracks


@dataclass(frozen=True)
class RunPhase:
    """A program run ``repeat`` times back to back, of which at most ``max_stored`` are kept as
    events; with ``number_from`` its executions are numbered from there even when not repeated.
    With ``idle_periods`` the core waits instead, for that many times the program's duration.
    Each execution is preceded by the host's costs ``before`` (the runtime's launch, the inputs'
    copy) and followed by those ``after`` (the outputs' copy, the host's loop calling the next).
    With ``then``, each execution also runs these programs after ``program``, each compiled apart
    (a speculative step's draft and verification graphs): each between the same host costs, none
    of its work starting before the graph before it has ended."""

    name: str
    program: Program
    repeat: int = 1
    max_stored: int | None = None
    number_from: int = 0
    idle_periods: float = 0.0  # an idle wait this many times as long as ``program`` takes (a pipeline bubble)
    numbered: bool = True  # False: every execution keeps the layers' own names (requests back to back)
    before: tuple[HostCost, ...] = ()
    after: tuple[HostCost, ...] = ()
    then: tuple[Program, ...] = ()

    @property
    def graphs(self) -> tuple[Program, ...]:
        """The programs one execution runs, one after another."""
        return (self.program, *self.then)

    def label(self, execution: int) -> str:
        """The name of the ``execution``-th run (from 0), which prefixes its layers' names."""
        if self.number_from:
            return f"{self.name} {self.number_from + execution}"
        return f"{self.name} #{execution + 1}" if self.repeat > 1 and self.numbered else self.name


def _layer_name(label: str, name: str) -> str:
    """The name of layer ``name`` of the execution ``label`` (none for a request's inference)."""
    return name if label in ("", "inference") else f"{label}/{name}"


class Tables:
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

    def add_execution(self, graphs: tuple[Program, ...], label: str, lowered: list[list[LoweredOp]],
                      before: tuple[HostCost, ...], after: tuple[HostCost, ...]) -> None:
        """The ops and layers of one execution of ``graphs``, the host's costs around each included."""
        for prog, ops in zip(graphs, lowered, strict=True):
            self.add_host(label, before)
            self.add_program(prog, label, ops)
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


class Timeline:
    """One core's schedule, program after program from the times given, keeping at most
    ``max_events`` events, with the host's costs around each execution on the host track. A
    program run before (with the same host costs) is not scheduled again: its first execution's
    events are copied to the new time (what the core does for it is the same), and a run right
    after the same program's extends that phase (one more of its executions)."""

    def __init__(self, ctx: CoreContext, max_events: int, plan: Schedule) -> None:
        self.ctx, self.max_events, self.plan = ctx, max_events, plan
        self.sched = CoreScheduler(ctx.chip.sbuf_bytes, ctx.chip.tensor.throttle, plan)
        self.tables = Tables()
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

    def run(self, phase: RunPhase, t0: float) -> float:
        """Run ``phase`` from ``t0``, each execution between the host's costs ``phase.before`` and
        ``phase.after`` (a program run before keeps its first run's); return when it ends."""
        graphs, repeat, sched, tables = phase.graphs, phase.repeat, self.sched, self.tables
        key = (tuple(id(g) for g in graphs), phase.before, phase.after)
        stride = sum(len(phase.before) + len(g.ops) + len(phase.after) for g in graphs)  # ops of one execution
        seen = self._seen.get(key)
        if seen is None:
            mark, first_op = log_mark(sched.log), len(tables.op_names)
            lowered = [[lower(self.ctx, op) for op in g.ops] for g in graphs]
            t, op = t0, first_op
            for g, ops in zip(graphs, lowered, strict=True):
                t = self._host(phase.before, t, op)
                sched.run(g, ops, op + len(phase.before), t)
                op += len(phase.before) + len(g.ops)
                t = self._host(phase.after, max(sched.free.max(), t), op)
                op += len(phase.after)
            period = t - t0
            per_step = sum(len(a) for a in sched.log.start[mark[0]:])
            stored = max(1, min(repeat, phase.max_stored or repeat, self._room(per_step) + 1))
            for r in range(stored):
                tables.add_execution(graphs, phase.label(r), lowered, phase.before, phase.after)
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
                tables.add_execution(graphs, phase.label(r), lowered, phase.before, phase.after)
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
