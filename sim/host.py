"""What the host does around the device's work, as costs the run puts on the timeline.

The runtime launching each execution of a compiled program, an inference's inputs and outputs
crossing between host and device memory, a server's handling of a request, a step's next token
sampled on the host,
transformers' generate loop between two decoder calls, a pipelined step's slowest stage waiting
for the others: each is a :class:`HostCost`, drawn by :mod:`sim.run` as an event on the run's
host track (kind :data:`HOST`) before or after the execution it belongs to. A reported time is
then the span of the events that make it: nothing is added to a metric after the timeline is
made. A cost of no time (a residual fitted to 0) is no event.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.config import DTYPE_BYTES
from sim.hardware.chip import Chip
from sim.stacks import Stack
from sim.workloads import ModelSpec, Phase, host_bytes

HOST = "host"  # the kind of the track the host's costs are drawn on
HOST_TRACK = "Host"  # and its name
# the names of the host's costs (the ops of the host track's events)
LAUNCH = "launch"
INPUT_COPY = "copy inputs to device"
OUTPUT_COPY = "copy outputs to host"
REQUEST_HANDLING = "request handling"
HOST_SAMPLING = "sample on host"
LOGIT_BYTES = DTYPE_BYTES["fp32"]  # a logit as the host's sampler takes it (host_sampling_bytes_per_s)
GENERATE_LOOP = "generate loop"
PIPELINE_WAIT = "waiting for the other pipeline stages"
QUEUED = "waiting for a slot"  # a served request handled, in the server's queue until the engine takes it
# what the host track draws that is not the host at work: a stage idle until the others catch up
WAITS = (PIPELINE_WAIT, QUEUED)


@dataclass(frozen=True)
class HostCost:
    """``dur_s`` the host (or the runtime) spends on ``name``, moving ``nbytes`` between host and
    device memory where it copies."""

    name: str
    dur_s: float
    nbytes: float = 0.0


def costs(*items: HostCost) -> tuple[HostCost, ...]:
    """The costs of ``items`` that take time."""
    return tuple(c for c in items if c.dur_s > 0)


def launch(chip: Chip) -> tuple[HostCost, ...]:
    """The runtime's launch of one execution of a compiled program (semaphores, completion)."""
    return costs(HostCost(LAUNCH, chip.efficiency.launch_overhead_s))


def request_handling(chip: Chip, stack: Stack) -> tuple[HostCost, ...]:
    """A server receiving, tokenising and scheduling a generation request before the engine may
    take it (and streaming its first token back); nothing for a stack with no server."""
    return costs(HostCost(REQUEST_HANDLING, chip.efficiency.server_request_s)) if stack.server else ()


def host_sampling(chip: Chip, on_host: bool, batch: int, vocab: int) -> tuple[HostCost, ...]:
    """A step's next tokens sampled on the host: the logits of the ``batch`` rows the graph is
    compiled for (fp32, :data:`LOGIT_BYTES`) copied back and sampled by torch before the next step
    may start; nothing when the graph samples on the device."""
    if not on_host:
        return ()
    nbytes = float(batch * vocab * LOGIT_BYTES)
    return costs(HostCost(HOST_SAMPLING, nbytes / chip.efficiency.host_sampling_bytes_per_s, nbytes))


def generate_loop(chip: Chip) -> tuple[HostCost, ...]:
    """transformers' generate on the host between two decoder calls of an encoder-decoder."""
    return costs(HostCost(GENERATE_LOOP, chip.efficiency.generate_step_s))


def inference_copies(spec: ModelSpec, phase: Phase, dtype_bytes: int, chip: Chip
                     ) -> tuple[tuple[HostCost, ...], tuple[HostCost, ...]]:
    """An inference's inputs copied from host memory before it runs and its outputs back after,
    as a traced model called with host tensors does (:func:`sim.workloads.host_bytes`, in the
    model's own dtype: the compiler's auto-cast is inside the graph).

    The copies run at the generation's host copy rate, except an output too large for the host's
    allocator to reuse freed memory for (above ``host_mmap_threshold_bytes``): its pages are mapped
    and faulted in anew every inference, at ``host_fault_bytes_per_s``. The inputs are the
    caller's tensors, allocated once."""
    eff = chip.efficiency
    inputs, outputs = host_bytes(spec, phase, dtype_bytes)
    out_rate = eff.host_fault_bytes_per_s if outputs > eff.host_mmap_threshold_bytes else eff.host_copy_bytes_per_s
    return (costs(HostCost(INPUT_COPY, inputs / eff.host_copy_bytes_per_s, inputs)),
            costs(HostCost(OUTPUT_COPY, outputs / out_rate, outputs)))
