"""Deployment: which instance, how many NeuronCores one model copy spans, how many copies run.

Follows the Neuron SDK's defaults: one model copy per (logical) NeuronCore, as many copies as
the instance has cores (torch-neuronx data parallel); a model too big for one core's share of
device memory is split tensor-parallel over the fewest cores, a power of two, that hold it
(as NxD Inference and Transformers NeuronX deployments are sized). On Trn2/Trn3 a logical
core groups ``lnc_default`` physical cores, over which the compiler shards each op.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import ConfigError, DoesNotFitError
from sim.hardware.chip import Chip
from sim.hardware.instances import Instance, default_instance, instances_of

MEMORY_HEADROOM = 0.9  # runtime, compiled graphs and scratch take the rest of device memory
TRAINING_BYTES_PER_PARAM = 16  # BF16 weights and gradients + FP32 master weights, Adam moments


@dataclass(frozen=True)
class Deployment:
    chip: Chip
    instance: Instance
    cores_per_copy: int  # logical NeuronCores one copy spans (the tensor-parallel degree)
    copies: int  # model copies the whole instance runs

    @property
    def lnc(self) -> int:
        return self.chip.lnc_default

    @property
    def shards(self) -> int:
        """Physical cores one copy's work is split over."""
        return self.cores_per_copy * self.lnc

    @property
    def ranks_per_chip(self) -> int:
        return min(self.shards, self.chip.cores)

    @property
    def copies_per_chip(self) -> int:
        """Model copies running on one chip (at least one: a copy may span several chips)."""
        return max(1, min(self.copies, self.chip.cores // self.shards))

    @property
    def active_cores_per_chip(self) -> int:
        """Physical cores of a chip that run (and share its memory bandwidth)."""
        used = self.copies * self.shards
        return min(self.chip.cores, used)


def memory_needed(param_bytes: float, state_bytes: float, training: bool, params: int) -> float:
    """Device memory one model copy needs: weights (or training state) plus KV cache/activations."""
    weights = params * TRAINING_BYTES_PER_PARAM if training else param_bytes
    return weights + state_bytes


def _fits(chip: Chip, need: float, shards: int) -> bool:
    per_core = chip.memory_bytes / chip.cores * MEMORY_HEADROOM
    return need / shards <= per_core


def _power_of_two_cores(chip: Chip, need: float, limit: int) -> int | None:
    c = 1
    while c <= limit:
        if _fits(chip, need, c * chip.lnc_default):
            return c
        c *= 2
    return None


def plan_deployment(chip: Chip, instance: Instance | None, need_bytes: float, cores: int | None,
                    model: str, copies: int | None = None) -> Deployment:
    """Choose instance, cores per copy and copies; raise when the model cannot fit.

    ``copies`` runs fewer copies than the instance holds (one request in flight: ``copies=1``),
    so the running copies share the chip's memory bandwidth with fewer others.
    """
    if cores is not None and cores < 1:
        raise ConfigError(f"--cores must be at least 1, got {cores}")
    dep = _plan(chip, instance, need_bytes, cores, model)
    if copies is None:
        return dep
    if copies < 1 or copies > dep.copies:
        held = f"{dep.copies} cop{'y' if dep.copies == 1 else 'ies'}"
        raise ConfigError(f"copies running must be between 1 and {dep.copies} ({dep.instance.name} holds {held} "
                          f"of {dep.cores_per_copy} core(s)), got {copies}")
    return Deployment(chip, dep.instance, dep.cores_per_copy, copies)


def _plan(chip: Chip, instance: Instance | None, need_bytes: float, cores: int | None, model: str) -> Deployment:
    candidates = [instance] if instance is not None else _candidates(chip)
    for inst in candidates:
        limit = inst.logical_cores
        if cores is not None:
            if cores > limit:
                if instance is not None:
                    raise ConfigError(f"--cores {cores} exceeds the {limit} NeuronCores of {inst.name}")
                continue
            if _fits(chip, need_bytes, cores * chip.lnc_default):
                return Deployment(chip, inst, cores, max(1, limit // cores))
            continue
        per_copy = _power_of_two_cores(chip, need_bytes, limit)
        if per_copy is not None:
            return Deployment(chip, inst, per_copy, max(1, limit // per_copy))
    where = instance.name if instance is not None else f"any {chip.name} instance"
    gib = need_bytes / 2**30
    raise DoesNotFitError(f"{model} needs {gib:.1f} GiB of device memory and does not fit on {where}"
                          + ("" if cores is None else f" with --cores {cores}"))


def _candidates(chip: Chip) -> list[Instance]:
    default = default_instance(chip)
    return [default] + [i for i in instances_of(chip) if i is not default and i.chips > default.chips]
