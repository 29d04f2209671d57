"""Collectives: all-reduce, all-gather, reduce-scatter and all-to-all over a group of NeuronCores.

They run hierarchically as the Neuron collectives do (aws-neuron-sdk
neuron-runtime/explore/{intranode,internode}-collective-comm.rst): a reduce-scatter goes from the
innermost level out (the physical cores of a logical core, the cores of a chip, the chips of an
instance over NeuronLink, the instances over EFA), each level working on what the level inside it
left, ``1/d`` of its data after a level of ``d``; an all-gather comes back out the same way, and
an all-reduce is one then the other. Within an instance the runtime picks its algorithm by the
size of the buffer (intranode-collective-comm.rst, its Algorithm Summary):

- **Ring** (the largest buffers, where the runtime's KangaRing saves hops too few to count, and
  the fallback): every level is a ring, ``d - 1`` steps per pass, each paying the level's per-hop
  latency, moving ``(d - 1) / d`` of its data;
- **RDH**, recursive doubling and halving (mid-size buffers): the cores of a chip exchange in one
  step, the chips in ``log2`` steps (a torus seen as a hypercube), moving what a ring moves;
- **Mesh** (small buffers): one step among a chip's cores and one routed step in which every chip
  writes straight to every other, O(1) latency; the routed bytes cross every link between the
  chips (over-subscription).

The chips of an instance form its topology: a torus runs a ring along each dimension in turn over
that dimension's share of the chip's links, a switch reaches every chip in one step, and an
UltraServer's last dimension crosses instances on its slower links. Across instances, the ranks
of every instance work in parallel on their shares (the instance's whole EFA bandwidth for the
level's data) in log2 steps when the instances are a power of two (recursive doubling and
halving), a ring otherwise. A collective that leaves its chip also pays a fixed setup. An
all-to-all sends each other rank its share directly: its bytes cross every level they have to,
each hop of the topology carrying them. A send (pipeline stages) goes to one neighbour: over one
link, or the instance's EFA.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from math import ceil, log2

from sim.hardware.chip import Chip
from sim.hardware.instances import Topology

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send")


@dataclass(frozen=True)
class Group:
    """The ranks of a collective: ``ranks`` physical cores, ``ranks_per_chip`` of them on each
    chip, spread evenly over ``nodes`` instances; ``lnc`` physical cores make one logical rank
    (they combine among themselves first). ``share_chip`` and ``share_node`` groups like it run
    at once over each chip's links and each instance's EFA (the shards of a tensor-parallel copy,
    each reducing its own gradients with its counterparts in the other copies)."""

    ranks: int
    ranks_per_chip: int
    nodes: int = 1
    lnc: int = 1
    share_chip: int = 1
    share_node: int = 1

    @property
    def chips_per_node(self) -> int:
        return max(1, -(-self.ranks // (self.nodes * max(1, self.ranks_per_chip))))


@dataclass(frozen=True)
class Cost:
    """What one collective takes: its time, the bytes each chip sends over NeuronLink and the
    bytes each instance sends over EFA."""

    seconds: float
    link_bytes: float = 0.0
    efa_bytes: float = 0.0


def _ring(nbytes: float, size: int, bytes_per_s: float, hop_s: float, steps: float | None = None) -> float:
    """One pass (a reduce-scatter or an all-gather) of ``nbytes`` around a ring of ``size``, in
    ``size - 1`` steps unless an algorithm moving the same bytes takes ``steps``."""
    if size <= 1:
        return 0.0
    return (size - 1 if steps is None else steps) * hop_s + (size - 1) / size * nbytes / bytes_per_s


def algorithm(chip: Chip, nbytes: float) -> str:
    """The algorithm an instance's collective of ``nbytes`` a rank runs: "mesh", "rdh" or "ring"."""
    eff = chip.efficiency
    return "mesh" if nbytes < eff.mesh_max_bytes else "rdh" if nbytes <= eff.rdh_max_bytes else "ring"


def sub_dims(topo: Topology, chips: int) -> tuple[int, ...]:
    """The shape ``chips`` neighbouring chips take in the topology: the fewest steps that hold
    them (a 4x4 torus: 16 -> 4x4, 8 -> 2x4, 4 -> 2x2); a ring or switch of that many otherwise."""
    if topo.kind != "torus" or chips <= 1:
        return (chips,)
    best: tuple[int, ...] = (chips,)
    for shape in product(*(range(1, d + 1) for d in topo.dims)):
        total = 1
        for d in shape:
            total *= d
        if total == chips and sum(shape) < sum(best):
            best = shape
    return best


def _dim_rates(topo: Topology, dims: tuple[int, ...]) -> list[float]:
    """Each dimension's share of a chip's NeuronLink bandwidth (an UltraServer's last dimension
    runs on the links that leave the instance)."""
    inner = len(topo.dims) - (1 if topo.outer_bytes_per_s else 0)  # the outer ring has links of its own
    share = topo.link_bytes_per_s / max(1, inner) if topo.kind == "torus" else topo.link_bytes_per_s
    rates = [share] * len(dims)
    if topo.outer_bytes_per_s and len(dims) == len(topo.dims):
        rates[-1] = topo.outer_bytes_per_s
    return rates


def _instance_pass(chip: Chip, topo: Topology, nbytes: float, chips: int, how: str = "ring") -> tuple[float, float]:
    """One pass of algorithm ``how`` over ``chips`` chips of an instance, each holding ``nbytes``:
    seconds, and bytes each chip sends."""
    if chips <= 1:
        return 0.0, 0.0
    hop = chip.efficiency.collective_latency_s
    if topo.kind == "switch" or how == "mesh":  # every chip writes to every other in one step
        sent = (chips - 1) / chips * nbytes
        return hop + sent * _mean_hops(topo, chips) / topo.link_bytes_per_s, sent
    dims = sub_dims(topo, chips)
    seconds = sent = 0.0
    for d, rate in zip(dims, _dim_rates(topo, dims), strict=True):
        seconds += _ring(nbytes, d, rate, hop, steps=ceil(log2(d)) if how == "rdh" else None)
        sent += (d - 1) / d * nbytes
        nbytes /= d
    return seconds, sent


def _node_pass(chip: Chip, topo: Topology, nbytes: float, nodes: int) -> float:
    """One pass over ``nodes`` instances, each holding ``nbytes`` over all its ranks."""
    if nodes <= 1:
        return 0.0
    steps = log2(nodes) if nodes & (nodes - 1) == 0 else nodes - 1
    return steps * chip.efficiency.efa_latency_s + (nodes - 1) / nodes * nbytes / topo.efa_bytes_per_s


def _mean_hops(topo: Topology, chips: int) -> float:
    """Average NeuronLink hops between two of ``chips`` chips (shortest way round each ring)."""
    if topo.kind == "switch" or chips <= 1:
        return 1.0
    total = 0.0
    for d in sub_dims(topo, chips):
        total += sum(min(k, d - k) for k in range(d)) / d
    return max(1.0, total * chips / (chips - 1))


def collective(kind: str, chip: Chip, topo: Topology, nbytes: float, group: Group) -> Cost:
    """Cost of one collective over ``group``. ``nbytes`` is each rank's full buffer: the input
    and output of an all-reduce or all-to-all, an all-gather's output, a reduce-scatter's input."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind}: one of {', '.join(KINDS)}")
    if group.ranks <= 1 or nbytes <= 0:
        return Cost(0.0)
    if kind == "all_to_all":
        return _all_to_all(chip, topo, nbytes, group)
    if kind == "send":
        return _send(chip, topo, nbytes, group)
    passes = 2 if kind == "all_reduce" else 1
    eff, intra = chip.efficiency, chip.intra_chip_link_bytes_per_s
    how = algorithm(chip, nbytes)
    lnc = group.lnc if group.lnc > 1 and group.ranks % group.lnc == 0 else 1
    logical_on_chip = max(1, min(group.ranks_per_chip, group.ranks) // lnc)
    seconds = _ring(nbytes, lnc, intra, eff.collective_latency_s)
    seconds += _ring(nbytes, logical_on_chip, intra, eff.collective_latency_s, steps=None if how == "ring" else 1)
    chips = group.chips_per_node
    if chips == 1 and group.nodes == 1:
        return Cost(passes * seconds)
    across, link_sent = _instance_pass(chip, topo, nbytes * group.share_chip, chips, how)
    # every instance's ranks run the EFA level in parallel on their shares: nbytes per instance
    node_bytes = nbytes * group.share_node
    efa = _node_pass(chip, topo, node_bytes, group.nodes)
    efa_sent = (group.nodes - 1) / group.nodes * node_bytes if group.nodes > 1 else 0.0
    return Cost(eff.collective_setup_s + passes * (seconds + across + efa), passes * link_sent, passes * efa_sent)


def _send(chip: Chip, topo: Topology, nbytes: float, group: Group) -> Cost:
    """One rank sends ``nbytes`` to another (a pipeline stage to the next): over the on-chip path,
    one NeuronLink to a neighbouring chip, or the instance's EFA, shared with the groups beside it."""
    eff = chip.efficiency
    if group.nodes > 1:
        sent = nbytes * group.share_node
        return Cost(eff.collective_setup_s + eff.efa_latency_s + sent / topo.efa_bytes_per_s, 0.0, sent)
    if group.chips_per_node > 1:
        sent = nbytes * group.share_chip
        links = 2 * max(1, len(topo.dims)) if topo.kind == "torus" else (1 if topo.kind == "switch" else 2)
        return Cost(eff.collective_setup_s + eff.collective_latency_s + sent / (topo.link_bytes_per_s / links), sent)
    return Cost(eff.collective_latency_s + nbytes / chip.intra_chip_link_bytes_per_s)


def _all_to_all(chip: Chip, topo: Topology, nbytes: float, group: Group) -> Cost:
    """Each rank sends ``1/ranks`` of its buffer to every other rank, pairwise, one peer per step."""
    eff = chip.efficiency
    n, on_chip = group.ranks, max(1, min(group.ranks_per_chip, group.ranks))
    chips = group.chips_per_node
    share = nbytes / n
    seconds = (on_chip - 1) * (eff.collective_latency_s + share / chip.intra_chip_link_bytes_per_s)
    link_sent = efa_sent = 0.0
    if chips > 1:
        # what a chip sends to the node's other chips, each byte over the hops between them
        link_sent = on_chip * share * (chips - 1) * on_chip
        steps = 1 if topo.kind == "switch" else chips - 1
        seconds += eff.collective_setup_s + steps * eff.collective_latency_s
        seconds += link_sent * _mean_hops(topo, chips) / topo.link_bytes_per_s
    if group.nodes > 1:
        per_node = chips * on_chip
        efa_sent = per_node * share * (n - per_node)
        seconds += (group.nodes - 1) * eff.efa_latency_s + efa_sent / topo.efa_bytes_per_s
        if chips == 1:
            seconds += eff.collective_setup_s
    return Cost(seconds, link_sent, efa_sent)
