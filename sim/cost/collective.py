"""Collectives over NeuronLink (between chips) or the on-chip path (between a chip's cores)."""

from __future__ import annotations

from sim.hardware.chip import Chip


def allreduce_seconds(chip: Chip, nbytes: float, ranks: int, ranks_per_chip: int, lnc: int = 1) -> float:
    """Ring all-reduce: each rank sends and receives ``2 (r-1)/r`` of the buffer.

    The ring crosses NeuronLink as soon as it spans more than one chip; its bandwidth per rank
    is the chip's link bandwidth divided among the ranks on that chip. A ring that spans chips also
    pays a fixed setup (the collective cores of every chip synchronising over NeuronLink).
    ``ranks`` physical cores grouped ``lnc`` to a logical core (Trn2's default LNC=2) reduce within
    each group over the chip first, then ring over the logical ranks.
    """
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    if lnc > 1 and ranks % lnc == 0:
        pair = 2 * (lnc - 1) / lnc * nbytes / chip.intra_chip_link_bytes_per_s
        return pair + allreduce_seconds(chip, nbytes, ranks // lnc, max(1, ranks_per_chip // lnc))
    eff = chip.efficiency
    if ranks <= ranks_per_chip:
        link, setup = chip.intra_chip_link_bytes_per_s, 0.0
    else:
        link, setup = chip.neuronlink_bytes_per_s / max(1, ranks_per_chip), eff.collective_setup_s
    steps = 2 * (ranks - 1)
    return setup + steps * eff.collective_latency_s + 2 * (ranks - 1) / ranks * nbytes / link
