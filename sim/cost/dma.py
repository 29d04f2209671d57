"""DMA between device memory (HBM/DDR) and SBUF.

A core's DMA engines move data at the lower of their own aggregate rate and the core's share
of the chip's memory bandwidth, times the calibrated achievable fraction. Transfers with less
than ``saturation_bytes_per_partition`` per partition are overhead-bound and proportionally
slower. Each transfer also has a fixed latency that delays its consumer but does not occupy
the queue (many transfers are in flight at once).
"""

from __future__ import annotations

from sim.hardware.chip import Chip


def core_bytes_per_s(chip: Chip, active_cores: int) -> float:
    """Sustained DMA bandwidth of one core while ``active_cores`` cores share the memory."""
    share = chip.memory_bytes_per_s / max(1, active_cores)
    return min(chip.dma.bytes_per_s, share) * chip.efficiency.memory_fraction


def transfer_efficiency(chip: Chip, bytes_per_partition: float) -> float:
    """Fraction of the sustained rate a transfer with this many bytes per partition reaches."""
    return min(1.0, bytes_per_partition / chip.dma.saturation_bytes_per_partition)
