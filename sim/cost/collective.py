"""Collectives over NeuronLink (between chips) or the on-chip path (between a chip's cores)."""

from __future__ import annotations

from sim.hardware.chip import Chip


def allreduce_seconds(chip: Chip, nbytes: float, ranks: int, ranks_per_chip: int) -> float:
    """Ring all-reduce: each rank sends and receives ``2 (r-1)/r`` of the buffer.

    The ring crosses NeuronLink as soon as it spans more than one chip; its bandwidth per rank
    is the chip's link bandwidth divided among the ranks on that chip.
    """
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    if ranks <= ranks_per_chip:
        link = chip.intra_chip_link_bytes_per_s
    else:
        link = chip.neuronlink_bytes_per_s / max(1, ranks_per_chip)
    steps = 2 * (ranks - 1)
    return steps * chip.efficiency.collective_latency_s + 2 * (ranks - 1) / ranks * nbytes / link
