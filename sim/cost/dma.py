"""DMA between device memory (HBM/DDR) and SBUF.

A core's DMA engines each move ``engine_bytes_per_s`` of contiguous data, but no faster than
their packet rate allows: every descriptor (one contiguous run of bytes into one partition)
takes at least the time of ``packet_bytes``, so runs shorter than that move proportionally
slower (the NKI DMA guide's payload curve: "the DMA packet rate, not HBM bandwidth, becomes the
limiting factor"). What the engines can pull is also limited by the core's share of its memory stack:
each HBM stack (or the one DDR of Inferentia1) serves the cores beside it, at
``memory_efficiency`` of its peak, split among those of them that are running. Each transfer also
has a fixed latency that delays its consumer but does not occupy the engines (many transfers
are in flight at once).
"""

from __future__ import annotations

from sim.hardware.chip import Chip


def engines_bytes_per_s(chip: Chip, descriptor_bytes: float) -> float:
    """What one core's DMA engines move per second in descriptors of ``descriptor_bytes`` (capped
    where a generation's per-core DMA rate is not published and was fitted instead)."""
    d = chip.dma
    rate = d.engines * d.engine_bytes_per_s * min(1.0, descriptor_bytes / d.packet_bytes)
    cap = chip.efficiency.core_dma_bytes_per_s
    return min(rate, cap) if cap > 0 else rate


def memory_share_bytes_per_s(chip: Chip, active_cores: int) -> float:
    """One core's share of its memory stack while ``active_cores`` cores of the chip run.

    Copies and shards occupy neighbouring cores, so the running cores fill one stack before the
    next: a stack is shared by as many of them as sit beside it."""
    per_stack = chip.memory_bytes_per_s / chip.memory_stacks * chip.memory_efficiency
    cores_per_stack = max(1, chip.cores // chip.memory_stacks)
    return per_stack / max(1, min(active_cores, cores_per_stack))


def core_bytes_per_s(chip: Chip, active_cores: int, descriptor_bytes: float) -> float:
    """Sustained DMA bandwidth of one core: the lower of its engines' rate and its memory share."""
    return min(engines_bytes_per_s(chip, descriptor_bytes), memory_share_bytes_per_s(chip, active_cores))
