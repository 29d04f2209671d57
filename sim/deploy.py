"""Deployment: which instance, how many NeuronCores one model copy spans, how many copies run.

Follows the Neuron SDK's defaults: one model copy per (logical) NeuronCore, as many copies as
the instance has cores (torch-neuronx data parallel); a model too big for one core's share of
device memory is split tensor-parallel over the fewest cores, a power of two, that hold it
(as NxD Inference and Transformers NeuronX deployments are sized). On Trn2/Trn3 a logical
core groups ``lnc_default`` physical cores, over which the compiler shards each op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from sim.errors import ConfigError, DoesNotFitError
from sim.hardware.chip import Chip
from sim.hardware.instances import Instance, default_instance, instances_of

MEMORY_HEADROOM = 0.9  # runtime, compiled graphs and scratch take the rest of device memory
TRAINING_BYTES_PER_PARAM = 16  # BF16 weights and gradients + FP32 master weights, Adam moments
OPTIMIZER_BYTES_PER_PARAM = 12  # of which the FP32 master weights and Adam moments (what ZeRO-1 shards)


@dataclass(frozen=True)
class Deployment:
    chip: Chip
    instance: Instance
    cores_per_copy: int  # logical NeuronCores one copy (one pipeline stage of it) spans: the tensor-parallel degree
    copies: int  # model copies the whole instance runs (at least one: a pipelined copy may span instances)
    nodes: int = 1  # instances running as many copies each (training: data parallel over all)
    need: MemoryNeed | None = None  # the device memory one copy needs
    pipeline: int = 1  # pipeline stages of a training copy, each on its own cores_per_copy cores

    @property
    def data_parallel(self) -> int:
        """Copies of the model over all the instances (the data-parallel degree of training)."""
        if self.pipeline == 1:
            return self.copies * self.nodes
        return max(1, self.nodes * self.instance.logical_cores // (self.cores_per_copy * self.pipeline))

    @property
    def node_cores(self) -> int:
        """Physical cores of one instance."""
        return self.instance.chips * self.chip.cores

    @property
    def memory_per_core_bytes(self) -> float:
        """Device memory each physical core of a copy holds (its stage's share of a pipelined copy)."""
        return 0.0 if self.need is None else self.need.per_core(self.shards * self.pipeline, self.data_parallel)

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


@dataclass(frozen=True)
class MemoryNeed:
    """Device memory one model copy needs: ``copy_bytes`` split over its shards, and
    ``sharded_bytes`` (ZeRO-1's optimizer state) split over its shards and the data-parallel copies."""

    copy_bytes: float
    sharded_bytes: float = 0.0
    # a decoder's KV cache, which its shards split by KV heads: the bytes of one KV head's keys and
    # values (every layer, the batch, the compiled positions) and how many KV heads each of
    # ``shards`` cores keeps (replicated when the cores outnumber them; one for the model alone)
    kv_head_bytes: float = 0.0
    kv_heads_per_core: Callable[[int], int] | None = None

    def _kv(self, shards: int) -> float:
        return self.kv_head_bytes * self.kv_heads_per_core(shards) if self.kv_heads_per_core else 0.0

    @property
    def total(self) -> float:
        return self.copy_bytes + self.sharded_bytes + self._kv(1)

    def per_core(self, shards: int, dp: int) -> float:
        """What each of a copy's ``shards`` holds, with ``dp`` data-parallel copies."""
        return (self.copy_bytes + self.sharded_bytes / max(1, dp)) / shards + self._kv(shards)


def memory_needed(param_bytes: float, state_bytes: float, training: bool, params: int,
                  zero1: bool = False) -> MemoryNeed:
    """Device memory of one model copy: weights (or training state) plus KV cache/activations."""
    if not training:
        return MemoryNeed(param_bytes + state_bytes)
    optimizer = params * OPTIMIZER_BYTES_PER_PARAM
    rest = params * TRAINING_BYTES_PER_PARAM - optimizer + state_bytes
    return MemoryNeed(rest, optimizer) if zero1 else MemoryNeed(rest + optimizer)


def _fits(chip: Chip, need: MemoryNeed, shards: int, dp: int) -> bool:
    return need.per_core(shards, dp) <= chip.memory_bytes / chip.cores * MEMORY_HEADROOM


def _deployment(chip: Chip, inst: Instance, cores: int, nodes: int, need: MemoryNeed, pipeline: int) -> Deployment:
    copies = max(1, inst.logical_cores // (cores * pipeline))
    return Deployment(chip, inst, cores, copies, nodes, need, pipeline)


def _fits_as(dep: Deployment) -> bool:
    return _fits(dep.chip, dep.need, dep.shards * dep.pipeline, dep.data_parallel)


def plan_deployment(chip: Chip, instance: Instance | None, need: MemoryNeed, cores: int | None,
                    model: str, copies: int | None = None, nodes: int = 1, pipeline: int = 1) -> Deployment:
    """Choose instance, cores per copy and copies; raise when the model cannot fit.

    ``copies`` runs fewer copies than the instance holds (one request in flight: ``copies=1``),
    so the running copies share the chip's memory bandwidth with fewer others. ``nodes``
    instances each run as many copies (the data-parallel ranks of a training run); a copy split
    into ``pipeline`` stages spans that many times its cores, over several instances if need be.
    """
    if cores is not None and cores < 1:
        raise ConfigError(f"--cores must be at least 1, got {cores}")
    dep = _plan(chip, instance, need, cores, model, nodes, pipeline)
    if copies is None:
        return dep
    if copies < 1 or copies > dep.copies:
        held = f"{dep.copies} cop{'y' if dep.copies == 1 else 'ies'}"
        raise ConfigError(f"copies running must be between 1 and {dep.copies} ({dep.instance.name} holds {held} "
                          f"of {dep.cores_per_copy} core(s)), got {copies}")
    running = replace(dep, copies=copies)
    if not _fits_as(running):  # ZeRO-1's optimizer state, split over fewer data-parallel copies
        gib, limit = running.memory_per_core_bytes / 2**30, chip.memory_bytes / chip.cores * MEMORY_HEADROOM / 2**30
        copies_text = f"{running.data_parallel} data-parallel cop{'y' if running.data_parallel == 1 else 'ies'}"
        raise DoesNotFitError(f"{model} with ZeRO-1 over {copies_text} needs {gib:.1f} GiB on each core, more than "
                              f"the {limit:.1f} GiB usable on a {chip.name} core: run more copies or more --cores")
    return running


def _plan(chip: Chip, instance: Instance | None, need: MemoryNeed, cores: int | None, model: str,
          nodes: int, pipeline: int) -> Deployment:
    candidates = [instance] if instance is not None else _candidates(chip, nodes)
    for inst in candidates:
        limit = min(inst.logical_cores, inst.logical_cores * nodes // pipeline)  # cores one stage may span
        if cores is not None:
            if cores > limit:
                if instance is not None:
                    raise ConfigError(f"--cores {cores} exceeds the {inst.logical_cores} NeuronCores of {inst.name}"
                                      if cores > inst.logical_cores else
                                      f"--cores {cores} x {pipeline} pipeline stages exceed the "
                                      f"{inst.logical_cores * nodes} NeuronCores of {nodes} x {inst.name}")
                continue
            dep = _deployment(chip, inst, cores, nodes, need, pipeline)
            if _fits_as(dep):
                return dep
            continue
        c = 1
        while c <= limit:
            dep = _deployment(chip, inst, c, nodes, need, pipeline)
            if _fits_as(dep):
                return dep
            c *= 2
    where = instance.name if instance is not None else f"any {chip.name} instance"
    gib = need.total / 2**30
    raise DoesNotFitError(f"{model} needs {gib:.1f} GiB of device memory and does not fit on {where}"
                          + ("" if cores is None else f" with --cores {cores}"))


def _candidates(chip: Chip, nodes: int = 1) -> list[Instance]:
    """Instances to try, in order: the chip's default, then larger ones. A cluster of several
    instances is built from the largest priced instance (the cheaper of equals), as clusters are."""
    default = default_instance(chip)
    if nodes > 1:
        priced = [i for i in instances_of(chip) if i.price_usd_per_hour is not None]
        if priced:
            default = max(priced, key=lambda i: (i.chips, -i.price_usd_per_hour))
    found = [default] + [i for i in instances_of(chip) if i is not default and i.chips > default.chips]
    return [i if i.chip is chip else replace(i, chip=chip) for i in found]  # a chip run at another LNC
