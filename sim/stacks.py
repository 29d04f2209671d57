"""The software stacks a generation runs under (``hardware/data/stacks.toml``).

A stack is what the host does around the device's work: whether a server receives each request
(vLLM on Neuron, optimum-neuron's vLLM), whose handling (:func:`sim.host.request_handling`) comes
before the prompt is encoded, and where each step's next token is sampled: on the device, inside
the compiled graph (NxD Inference's on-device sampling), or on the host, the step's logits copied
back and sampled by torch (Transformers NeuronX; optimum-neuron without on-device sampling),
which :func:`sim.host.host_sampling` puts after every step. The engines' work is the same under
every stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from sim.hardware.chip import load_toml, sourced

DEVICE, HOST = "device", "host"  # where a step's next token is sampled
SAMPLINGS = (DEVICE, HOST)
# a run's stack when it names none: vLLM on Neuron, what most generation on Neuron is served with
# (aws-neuron-sdk vllm-neuron: NxD Inference's models behind vLLM's server), a decode as one request of it
DEFAULT_STACK = "vllm"


@dataclass(frozen=True)
class Stack:
    key: str
    label: str
    short: str  # as a number's validation error names it ("±9% (5 vLLM trn2 rows)")
    server: bool  # a server receives, tokenises and schedules each request
    sampling: str  # DEVICE or HOST


@cache
def stacks() -> dict[str, Stack]:
    """Every stack of the data file, by key."""
    out = {}
    for key, entry in load_toml("stacks.toml").items():
        where = f"stacks.toml [{key}]"
        out[key] = Stack(key, entry["label"], entry["short"], bool(sourced(entry, "server", where)),
                         str(sourced(entry, "sampling", where)))
        if out[key].sampling not in SAMPLINGS:
            raise ValueError(f"{where}.sampling: choose one of {', '.join(SAMPLINGS)}")
    return out


STACKS = tuple(stacks())


def stack_of(name: str | None) -> Stack:
    """The stack ``name`` (its key), else the default (:data:`DEFAULT_STACK`)."""
    return stacks()[name or DEFAULT_STACK]


def samples_on_host(name: str | None, sampling: str | None) -> bool:
    """Whether a run's steps sample their next token on the host: as ``sampling`` says, else as
    its stack does."""
    return (sampling or stack_of(name).sampling) == HOST
