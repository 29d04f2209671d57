"""A run's description, typed: what ran (:class:`Workload`), where and how it was laid out
(:class:`Deployment`), with what software (:class:`Software`) and on what hardware
(:class:`Hardware`: its chip's memories and peaks, the bandwidth its cores share, its instance's
links). :func:`describe` reads it from a trace's metadata once, with the defaults every reader
shares, for every file format; views, reports and metrics read it instead of metadata keys.

The hardware facts are written by the simulator into the metadata (``meta["hardware"]``,
versioned), so a file says what it was simulated on even when the chip data changes later; a
file from before they were written gets them from the chip data of the chip it names, here and
only here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sim.cost.dma import memory_share_bytes_per_s
from sim.errors import SimError
from sim.hardware.chip import Chip, get_chip
from sim.hardware.instances import Instance, get_instance

HARDWARE_VERSION = 1
DTYPE_ROOFS = ("mxfp8", "fp8", "bf16", "fp32")  # MX: on the chips whose array multiplies it


@dataclass(frozen=True)
class Hardware:
    """What a run's chip and instance are, as its views draw and measure it."""

    chip: str  # the generation's key
    name: str
    cores: int  # NeuronCores of one chip
    sbuf_bytes: float
    psum_bytes: float
    memory_kind: str  # HBM, or DDR on Inferentia1
    memory_bytes_per_s: float  # one chip's
    memory_share_bytes_per_s: float  # one core's while the run's cores of a chip run
    peak_flops_per_core: Mapping[str, float] = field(default_factory=dict)  # by matmul data type
    gpsimd: bool = True
    # the instance's chips and links, for runs over several chips (none for one chip or no instance)
    instance_chips: int = 1
    topology: str | None = None
    topology_dims: tuple[int, ...] = ()
    link_bytes_per_s: float = 0.0
    efa_bytes_per_s: float | None = None

    def record(self) -> dict[str, Any]:
        """As the trace's metadata keeps it (JSON types)."""
        out = asdict(self)
        out["topology_dims"] = list(self.topology_dims)
        out["peak_flops_per_core"] = dict(self.peak_flops_per_core)
        return {"version": HARDWARE_VERSION, **out}


def hardware(chip: Chip, instance: Instance | None, cores_active: int) -> Hardware:
    """The facts of ``chip`` (on ``instance``) with ``cores_active`` of a chip's cores running."""
    te = chip.tensor
    peaks = {d: te.peak_flops(d) for d in DTYPE_ROOFS if d in chip.dtypes or (te.mx is not None and d in te.rate)}
    topo = instance.topology if instance is not None else None
    return Hardware(chip.key, chip.name, chip.cores, float(chip.sbuf_bytes), float(chip.psum_bytes),
                    chip.memory_kind, chip.memory_bytes_per_s, memory_share_bytes_per_s(chip, cores_active),
                    peaks, chip.gpsimd is not None, instance.chips if instance is not None else 1,
                    topo.kind if topo else None, tuple(topo.dims) if topo else (),
                    topo.link_bytes_per_s if topo else 0.0, topo.efa_bytes_per_s if topo else None)


def hardware_of(meta: Mapping) -> Hardware | None:
    """A run's hardware facts: as its metadata records them, else (a file of an older neuronviz)
    from the chip data of the chip and instance it names; None for a trace without a chip."""
    record = meta.get("hardware")
    if record is not None:
        return _read(record)
    try:
        chip = get_chip(str(meta["chip"])) if meta.get("chip") else None
    except SimError:
        return None
    if chip is None:
        return None
    try:
        instance = get_instance(str(meta.get("instance", "")))
    except SimError:
        instance = None
    return hardware(chip, instance, int(meta.get("cores_active", 1)))


_TEXTS = ("chip", "name", "memory_kind")
_COUNTS = ("cores", "instance_chips")
_NUMBERS = ("sbuf_bytes", "psum_bytes", "memory_bytes_per_s", "memory_share_bytes_per_s", "link_bytes_per_s")


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


def _read(record: Any) -> Hardware:
    """The facts a trace's metadata records, checked: a :class:`ValueError` says which is wrong."""
    if not isinstance(record, Mapping):
        raise ValueError("is not a table")
    version = record.get("version")
    if type(version) is not int or version > HARDWARE_VERSION:
        raise ValueError(f"has version {version!r}; this neuronviz reads up to {HARDWARE_VERSION}: upgrade neuronviz")
    values = {k: v for k, v in record.items() if k in Hardware.__dataclass_fields__}
    for key in _TEXTS:
        if not isinstance(values.get(key), str):
            raise ValueError(f"'{key}' is not a text")
    for key in _COUNTS:
        if type(values.get(key)) is not int or values[key] < 1:
            raise ValueError(f"'{key}' is not a positive whole number")
    for key in _NUMBERS:
        if not _number(values.get(key)):
            raise ValueError(f"'{key}' is not a finite number from 0")
    peaks = values.get("peak_flops_per_core")
    if not isinstance(peaks, Mapping) or not all(isinstance(k, str) and _number(v) for k, v in peaks.items()):
        raise ValueError("'peak_flops_per_core' is not a table of finite numbers by data type")
    dims = values.get("topology_dims", [])
    if not isinstance(dims, list) or not all(type(d) is int and d > 0 for d in dims):
        raise ValueError("'topology_dims' is not a list of positive whole numbers")
    if values.get("topology") is not None and not isinstance(values["topology"], str):
        raise ValueError("'topology' is not a text")
    if values.get("efa_bytes_per_s") is not None and not _number(values["efa_bytes_per_s"]):
        raise ValueError("'efa_bytes_per_s' is not a finite number from 0")
    if type(values.get("gpsimd", True)) is not bool:
        raise ValueError("'gpsimd' is not true or false")
    return Hardware(**{**values, "topology_dims": tuple(dims), "peak_flops_per_core": dict(peaks)})


@dataclass(frozen=True)
class Workload:
    """What ran: the model and the mode, its sizes and data types."""

    model: str
    mode: str  # inference, decode, serve, training, or imported (a trace of another tool)
    batch: int = 1
    seq: int = 1
    dtype: str = ""
    matmul_dtype: str = ""
    family: str = ""
    model_type: str = ""
    new_tokens: int | None = None  # decode, serve
    grad_accum: int = 1  # training: micro-batches a step
    requests: int = 1  # back to back (inference), or served
    concurrency: int | None = None  # decode: the requests a compiled batch serves; serve: users
    rate: float | None = None  # serve: requests a second

    @property
    def generating(self) -> bool:
        return self.mode in ("decode", "serve")


@dataclass(frozen=True)
class Deployment:
    """Where the run ran and how it was laid out."""

    chip: str = ""
    chip_name: str = ""
    instance: str = ""
    cores_per_copy: int = 1  # logical NeuronCores of a copy (of one pipeline stage of it)
    lnc: int = 1  # physical cores a logical one
    copies: int = 1  # on one instance
    nodes: int = 1
    data_parallel: int = 1  # copies over every instance
    pipeline: int = 1
    cores_active: int = 1  # cores of a chip running the traced request alone
    cores_active_under_load: int = 1
    memory_per_core_bytes: float = 0.0
    price_usd_per_hour: float | None = None  # one instance's; None: no published price

    @property
    def shards(self) -> int:
        """Physical cores one copy's work is split over (the trace holds one of them)."""
        return self.cores_per_copy * self.lnc


@dataclass(frozen=True)
class Software:
    """The compiler and the configuration the run was simulated with (None for a trace of
    another tool, or one whose configuration this neuronviz cannot read)."""

    compiler: str = ""
    optlevel: int | None = None
    config: Any = None  # sim.config.RunConfig


@dataclass(frozen=True)
class Speculation:
    """How a run decoded speculatively: its ``method`` (sim.speculation.SPEC_METHODS: a draft
    model, or an EAGLE or EAGLE-3 head on the target), whether NxD Inference fused the draft and
    the target into one graph, the ``spec_k`` asked for (num_speculative_tokens) and the draft
    tokens a step then ``proposed``, and the ``acceptance`` taken at each of their positions,
    cumulative as vLLM reports it: the share of steps whose draft tokens up to that position were
    all accepted. ``stated`` is False when the run stated none and took the published default
    ``source`` names."""

    method: str
    fused: bool
    spec_k: int
    proposed: int
    acceptance: tuple[float, ...]
    stated: bool = True
    source: str = ""
    draft: str | None = None  # the draft model (an EAGLE head is the target's own)

    @property
    def tokens_per_step(self) -> float:
        """Tokens a step yields on average: the accepted draft tokens and the target's own."""
        return 1.0 + sum(self.acceptance)

    def record(self) -> dict[str, Any]:
        """As the trace's metadata keeps it (JSON types)."""
        return {**asdict(self), "acceptance": list(self.acceptance), "tokens_per_step": self.tokens_per_step}


def speculation_of(meta: Mapping) -> Speculation | None:
    """A run's speculation as its metadata records it, None for a run without (or a record this
    neuronviz cannot read). A file of an older neuronviz records a draft model proposing ``k``
    tokens, each accepted with probability ``acceptance`` while the ones before it were: cumulative
    rates ``acceptance`` to the power of each position."""
    from sim.config import MAX_SPEC_K  # here, not at the top: see describe

    rec = meta.get("speculation")
    if not isinstance(rec, Mapping):
        return None
    try:
        if "method" not in rec:
            k, p = min(int(rec["k"]), MAX_SPEC_K), float(rec["acceptance"])
            out = Speculation("draft_model", False, k, k, tuple(p ** i for i in range(1, k + 1)),
                              draft=str(rec.get("draft")))
        else:
            out = Speculation(str(rec["method"]), bool(rec["fused"]), int(rec["spec_k"]), int(rec["proposed"]),
                              tuple(float(a) for a in rec["acceptance"]), bool(rec.get("stated", True)),
                              str(rec.get("source", "")), None if rec.get("draft") is None else str(rec["draft"]))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    rates = out.acceptance
    return out if len(rates) == out.proposed and all(0 <= a <= 1 for a in rates) else None


@dataclass(frozen=True)
class RunDescription:
    workload: Workload
    deployment: Deployment
    software: Software
    hardware: Hardware | None
    # what a device measured (a Neuron Explorer profile's Summary), by metric catalogue key
    measured: Mapping[str, float] = field(default_factory=dict)
    speculation: Speculation | None = None  # decode and serve runs that speculate


def describe(meta: Mapping) -> RunDescription:
    """The run a trace's metadata describes, every field its type or its default (the same for
    every reader and format): a training run's copies over all its instances, a request alone."""
    # here, not at the top: sim.config imports the workloads, whose config.json reader imports
    # sim.io, whose readers check a file's hardware record with this module
    from sim.config import config_from_record

    m = meta
    workload = Workload(
        model=str(m.get("model", "")), mode=str(m.get("mode", "imported")), batch=int(m.get("batch", 1)),
        seq=int(m.get("seq", 1)), dtype=str(m.get("dtype", "")), matmul_dtype=str(m.get("matmul_dtype", "")),
        family=str(m.get("family", "")), model_type=str(m.get("model_type", "")), new_tokens=m.get("new_tokens"),
        grad_accum=int(m.get("grad_accum", 1)), requests=max(1, int(m.get("requests", 1))),
        concurrency=m.get("concurrency"), rate=m.get("rate"))
    copies = int(m.get("copies", 1))
    deployment = Deployment(
        chip=str(m.get("chip", "")), chip_name=str(m.get("chip_name", m.get("chip", ""))),
        instance=str(m.get("instance", "")), cores_per_copy=int(m.get("cores_per_copy", 1)), lnc=int(m.get("lnc", 1)),
        copies=copies, nodes=int(m.get("nodes", 1)), data_parallel=int(m.get("data_parallel", copies)),
        pipeline=int(m.get("pipeline", 1)), cores_active=int(m.get("cores_active", 1)),
        cores_active_under_load=int(m.get("cores_active_under_load", m.get("cores_active", 1))),
        memory_per_core_bytes=float(m.get("memory_per_core_bytes", 0.0)),
        price_usd_per_hour=m.get("price_usd_per_hour"))
    record = m.get("config")
    try:
        config = config_from_record(record) if isinstance(record, Mapping) else None
    except (TypeError, ValueError):
        config = None
    software = Software(str(m.get("compiler", "")), m.get("optlevel"), config)
    measured = m.get("measured") if isinstance(m.get("measured"), Mapping) else {}
    return RunDescription(workload, deployment, software, hardware_of(m),
                          {str(k): float(v) for k, v in measured.items() if _number(v)}, speculation_of(m))
