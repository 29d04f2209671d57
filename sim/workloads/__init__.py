"""Model graphs as data: presets, Hugging Face configs, and the programs built from them."""

from __future__ import annotations

from dataclasses import replace

from sim.workloads.builder import ProgramBuilder
from sim.workloads.graph import Program
from sim.workloads.models import CNN, ModelSpec, get_model, preset_names
from sim.workloads.resnet import resnet_program
from sim.workloads.training import training_program
from sim.workloads.transformer import Phase, transformer_program

__all__ = ["ModelSpec", "Phase", "Program", "build_program", "get_model", "preset_names", "speculative_step",
           "training_program"]


def build_program(spec: ModelSpec, phase: Phase, dtype_bytes: int) -> Program:
    """The forward program one core runs for ``phase`` (its shard when ``phase.tp > 1``)."""
    b = ProgramBuilder(dtype_bytes)
    if spec.family == CNN:
        resnet_program(b, spec, phase)
    else:
        transformer_program(b, spec, phase)
    return b.program


def speculative_step(spec: ModelSpec, draft: ModelSpec, k: int, phase: Phase, dtype_bytes: int) -> Program:
    """One step of speculative decoding on a core: the draft model's ``k`` decode steps, each
    proposing a token, then the model verifying all of them and proposing its own in one pass
    over ``k + 1`` tokens against the cache (its logits at every position, to compare)."""
    b = ProgramBuilder(dtype_bytes)
    for i in range(k):
        b.prefix = f"draft {i + 1}/"
        transformer_program(b, draft, phase)
    b.prefix = "verify/"
    transformer_program(b, spec, replace(phase, seq=k + 1))
    return b.program
