"""Model graphs as data: presets, Hugging Face configs, and the programs built from them."""

from __future__ import annotations

from sim.workloads.builder import ProgramBuilder
from sim.workloads.graph import Program
from sim.workloads.models import CNN, ModelSpec, get_model, preset_names
from sim.workloads.resnet import resnet_program
from sim.workloads.training import training_program
from sim.workloads.transformer import Phase, transformer_program

__all__ = ["ModelSpec", "Phase", "Program", "build_program", "get_model", "preset_names", "training_program"]


def build_program(spec: ModelSpec, phase: Phase, dtype_bytes: int) -> Program:
    """The forward program one core runs for ``phase`` (its shard when ``phase.tp > 1``)."""
    b = ProgramBuilder(dtype_bytes)
    if spec.family == CNN:
        resnet_program(b, spec, phase)
    else:
        transformer_program(b, spec, phase)
    return b.program
