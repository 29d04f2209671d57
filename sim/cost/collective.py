"""Collectives over NeuronLink between chips and the on-chip path between a chip's cores.

An all-reduce over ``ranks`` cores, ``ranks_per_chip`` of them on each chip, runs hierarchically
as the Neuron collectives do: the cores of a chip reduce-scatter among themselves, the chips then
all-reduce their shares over the instance's topology, and the cores all-gather the result. Over
the chips, a ring of ``d`` chips reduce-scatters and all-gathers in ``2 (d - 1)`` steps; a torus
does that along each of its dimensions in turn, on a ``1/d`` share of the data after each one
(``2 (a - 1) + 2 (b - 1)`` steps for ``a x b`` chips instead of ``2 (ab - 1)`` around a ring); a
switch reaches every chip in one step each way. Every step pays the per-hop latency; each
dimension moves its bytes over its share of the chip's links. A collective that spans chips also
pays a fixed setup. Cores grouped into a logical core (``lnc``) reduce within the group first.
"""

from __future__ import annotations

from itertools import product

from sim.hardware.chip import Chip
from sim.hardware.instances import Topology


def _ring_seconds(nbytes: float, size: int, bytes_per_s: float, hop_s: float) -> float:
    """Reduce-scatter then all-gather of ``nbytes`` around a ring of ``size``."""
    if size <= 1:
        return 0.0
    return 2 * (size - 1) * hop_s + 2 * (size - 1) / size * nbytes / bytes_per_s


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


def _inter_chip_seconds(chip: Chip, topo: Topology, nbytes: float, chips: int) -> float:
    """All-reduce of ``nbytes`` per chip among ``chips`` chips of the instance."""
    hop = chip.efficiency.collective_latency_s
    if chips <= 1:
        return 0.0
    if topo.kind == "switch":  # every chip one hop from every other: one step each way
        return 2 * hop + 2 * (chips - 1) / chips * nbytes / topo.link_bytes_per_s
    dims = sub_dims(topo, chips)
    # a torus drives its dimensions' links in turn (half the chip's links each for two dimensions)
    share = topo.link_bytes_per_s / max(1, len(topo.dims)) if topo.kind == "torus" else topo.link_bytes_per_s
    seconds, data = 0.0, nbytes
    for i, d in enumerate(dims):
        outer = topo.outer_bytes_per_s and len(dims) == len(topo.dims) and i == len(dims) - 1
        seconds += _ring_seconds(data, d, topo.outer_bytes_per_s if outer else share, hop)
        data /= d
    return seconds


def allreduce_seconds(chip: Chip, topo: Topology, nbytes: float, ranks: int, ranks_per_chip: int,
                      lnc: int = 1) -> float:
    """All-reduce of ``nbytes`` over ``ranks`` cores, ``ranks_per_chip`` to a chip (see module)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    eff = chip.efficiency
    if lnc > 1 and ranks % lnc == 0:  # the physical cores of each logical core first, on the chip
        pair = _ring_seconds(nbytes, lnc, chip.intra_chip_link_bytes_per_s, eff.collective_latency_s)
        return pair + allreduce_seconds(chip, topo, nbytes, ranks // lnc, max(1, ranks_per_chip // lnc))
    on_chip = max(1, min(ranks_per_chip, ranks))
    chips = -(-ranks // on_chip)
    within = _ring_seconds(nbytes, on_chip, chip.intra_chip_link_bytes_per_s, eff.collective_latency_s)
    if chips == 1:
        return within
    return eff.collective_setup_s + within + _inter_chip_seconds(chip, topo, nbytes, chips)
