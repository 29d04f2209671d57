"""Frozen descriptions of Neuron chips, read from the TOML data files beside this module.

Every number in a data file is a table ``{ value = ..., source = "..." }``; the loader keeps
the value and checks that a source is given, so no spec number lives in code.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sim.errors import UnknownNameError

DATA_DIR = Path(__file__).with_name("data")
COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")


def sourced(table: Mapping[str, Any], key: str, where: str) -> Any:
    """Return ``table[key]["value"]``, insisting that the entry names its source."""
    entry = table[key]
    if not isinstance(entry, Mapping) or "value" not in entry or not entry.get("source"):
        raise ValueError(f"{where}.{key}: every number needs {{ value = ..., source = ... }}")
    return entry["value"]


def _sourced_map(table: Mapping[str, Any], where: str) -> Mapping[str, float]:
    return MappingProxyType({k: float(sourced(table, k, where)) for k in table})


@dataclass(frozen=True, eq=False)
class Throttle:
    """TensorE dI/dt throttling: after an idle stretch the array starts at ``start_fraction``
    of its rate and ramps linearly to full over ``ramp_s`` of work; the limit re-engages when
    utilization stays under one half for ``window_s``."""

    start_fraction: float
    ramp_s: float
    window_s: float


@dataclass(frozen=True, eq=False)
class Sparsity:
    """M:N structured sparsity of the weights (the stationary matrix): ``patterns`` the M:N it
    takes, the multiply running up to ``max_rate`` times the BF16 rate."""

    max_rate: float
    patterns: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Microscaling:
    """OCP MX formats: ``group`` elements along the contraction share one ``scale_bits`` scale;
    VectorE quantizes ``quantize_elems_per_cycle`` elements a cycle to them."""

    group: int
    scale_bits: int
    quantize_elems_per_cycle: float


@dataclass(frozen=True, eq=False)
class TensorEngine:
    """The systolic matmul array: ``rows`` contraction partitions by ``cols`` stationary columns.

    ``rate[dtype]`` is the dtype's peak relative to BF16 (the published chip totals) and
    ``k_pack[dtype]`` how many contraction rows one PE takes per instruction in that dtype
    (FP8 double-row mode 2, MX 4): an instruction streams at ``rate / k_pack`` columns per cycle.
    """

    clock_hz: float
    rows: int
    cols: int
    moving_free_max: int
    mm_init_cycles: int
    load_stationary_cycles: int
    fill_drain_cycles: int
    rate: Mapping[str, float]
    k_pack: Mapping[str, int]
    throttle: Throttle | None
    sparse: Sparsity | None = None  # M:N structured sparsity, where the array takes it
    mx: Microscaling | None = None  # MX formats (their rates are in ``rate``), where the array takes them

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s of one core's TensorE for ``dtype``."""
        return 2.0 * self.rows * self.cols * self.clock_hz * self.rate[dtype]


@dataclass(frozen=True, eq=False)
class StreamEngine:
    """Vector, Scalar or GpSimd engine: processes ``elems_per_cycle`` elements per cycle."""

    name: str
    clock_hz: float
    instr_overhead_cycles: int
    elems_per_cycle: Mapping[str, float]

    def elems_per_s(self, dtype: str) -> float:
        return self.clock_hz * self.elems_per_cycle[dtype]


@dataclass(frozen=True, eq=False)
class Dma:
    """A NeuronCore's DMA engines: ``engines`` of them, each moving ``engine_bytes_per_s`` in
    descriptors of at least ``packet_bytes`` worth of time; every transfer has a fixed
    ``latency_s`` before its data is usable."""

    engines: int
    engine_bytes_per_s: float
    packet_bytes: float
    latency_s: float

    @property
    def bytes_per_s(self) -> float:
        """Peak DMA bandwidth of one NeuronCore (all its DMA engines, long descriptors)."""
        return self.engines * self.engine_bytes_per_s


@dataclass(frozen=True, eq=False)
class Efficiency:
    """Named residuals: the few parameters fitted on published measurements, each the unknown of
    one mechanism (efficiency.toml says which rows it was fitted on)."""

    weight_descriptor_bytes: float
    kv_descriptor_bytes: float
    launch_overhead_s: float
    collective_latency_s: float
    collective_setup_s: float
    mesh_max_bytes: float
    rdh_max_bytes: float
    efa_latency_s: float
    grad_bucket_bytes: float
    stream_free_elems: float
    sbuf_activation_fraction: float
    mm_wait_cycles: float
    request_overhead_s: float
    generate_step_s: float
    core_dma_bytes_per_s: float
    host_copy_bytes_per_s: float
    host_fault_bytes_per_s: float
    host_mmap_threshold_bytes: float


OPT_LEVELS = (1, 2, 3)  # neuronx-cc --optlevel
DEFAULT_OPT_LEVEL = 2  # neuronx-cc's level when none is given


@dataclass(frozen=True)
class Schedule:
    """What a compiler optimization level changes in compiled code's schedule (compiler.toml)."""

    optlevel: int
    lookahead_ops: int  # how many ops ahead of the computing one loads are issued (0: as SBUF holds)
    loads_pass_stores: bool  # loads are issued ahead of earlier ops' stores on the shared DMA queues
    tiles_samples: bool  # activations too large for SBUF run in blocks of samples across ops (not spilled)


@cache
def schedule(optlevel: int = DEFAULT_OPT_LEVEL) -> Schedule:
    """The schedule neuronx-cc compiles for at ``optlevel`` (1, 2 or 3)."""
    table = load_toml("compiler.toml")["optlevel"].get(str(optlevel))
    if table is None:
        raise UnknownNameError(f"unknown compiler optimization level {optlevel}: choose one of "
                               f"{', '.join(map(str, OPT_LEVELS))}")
    return Schedule(optlevel, int(table["lookahead_ops"]["value"]), bool(table["loads_pass_stores"]["value"]),
                    bool(table["tiles_samples"]["value"]))


@dataclass(frozen=True, eq=False)
class Chip:
    """One Neuron chip generation: its cores' engines and memories, and the chip's links."""

    key: str
    name: str
    core_version: str
    aliases: tuple[str, ...]
    memory_kind: str
    dtypes: tuple[str, ...]
    autocast_default: str  # what the chip's compiler casts of an FP32 model to BF16 by default
    compiler: str  # neuron-cc (NeuronCore-v1) or neuronx-cc, which has optimization levels
    cores: int
    lnc_default: int
    lnc_options: tuple[int, ...]  # the logical-core sizes the runtime takes (NEURON_LOGICAL_NC_CONFIG)
    memory_bytes: int
    memory_bytes_per_s: float
    memory_stacks: int
    memory_efficiency: float
    neuronlink_bytes_per_s: float
    intra_chip_link_bytes_per_s: float
    tensor: TensorEngine
    vector: StreamEngine
    scalar: StreamEngine
    gpsimd: StreamEngine | None
    sbuf_bytes: int
    sbuf_partitions: int
    psum_bytes: int
    psum_banks: int
    dma: Dma
    efficiency: Efficiency

    @property
    def logical_cores(self) -> int:
        """NeuronCores as the runtime sees them (physical cores grouped by the default LNC)."""
        return self.cores // self.lnc_default

    def peak_flops(self, dtype: str) -> float:
        """Dense TensorE peak FLOP/s of the whole chip."""
        return self.tensor.peak_flops(dtype) * self.cores


def _stream(table: Mapping[str, Any], name: str, where: str) -> StreamEngine:
    return StreamEngine(
        name=name,
        clock_hz=float(sourced(table, "clock_hz", where)),
        instr_overhead_cycles=int(sourced(table, "instr_overhead_cycles", where)),
        elems_per_cycle=_sourced_map(table["elems_per_cycle"], f"{where}.elems_per_cycle"),
    )


def _tensor(t: Mapping[str, Any]) -> TensorEngine:
    keys = ("rows", "cols", "moving_free_max", "mm_init_cycles", "load_stationary_cycles", "fill_drain_cycles")
    ints = {k: int(sourced(t, k, "tensor")) for k in keys}
    throttle = None
    if "throttle" in t:
        th = t["throttle"]
        throttle = Throttle(**{k: float(sourced(th, k, "tensor.throttle"))
                               for k in ("start_fraction", "ramp_s", "window_s")})
    sparse = mx = None
    if "sparse" in t:
        sp = t["sparse"]
        sparse = Sparsity(float(sourced(sp, "max_rate", "tensor.sparse")),
                          tuple(sourced(sp, "patterns", "tensor.sparse")))
    if "mx" in t:
        m = t["mx"]
        mx = Microscaling(int(sourced(m, "group", "tensor.mx")), int(sourced(m, "scale_bits", "tensor.mx")),
                          float(sourced(m, "quantize_elems_per_cycle", "tensor.mx")))
    return TensorEngine(
        clock_hz=float(sourced(t, "clock_hz", "tensor")),
        rate=_sourced_map(t["rate"], "tensor.rate"),
        k_pack=MappingProxyType({k: int(v) for k, v in _sourced_map(t["k_pack"], "tensor.k_pack").items()}),
        throttle=throttle, sparse=sparse, mx=mx,
        **ints,
    )


def parse_chip(doc: Mapping[str, Any], efficiency: Mapping[str, Any]) -> Chip:
    """Build a :class:`Chip` from a parsed chip data file and the efficiency table."""
    c = doc["chip"]
    key = doc["key"]
    eff = {**efficiency.get("default", {}), **efficiency.get(key, {})}
    chip = Chip(
        key=key,
        name=doc["name"],
        core_version=doc["core_version"],
        aliases=tuple(doc.get("aliases", ())),
        memory_kind=doc["memory_kind"],
        dtypes=tuple(doc["dtypes"]),
        autocast_default=doc["autocast_default"],
        compiler=doc["compiler"],
        cores=int(sourced(c, "cores", "chip")),
        lnc_default=int(sourced(c, "lnc_default", "chip")),
        lnc_options=tuple(int(v) for v in sourced(c, "lnc_options", "chip")) if "lnc_options" in c else (
            int(sourced(c, "lnc_default", "chip")),),
        memory_bytes=int(sourced(c, "memory_bytes", "chip")),
        memory_bytes_per_s=float(sourced(c, "memory_bytes_per_s", "chip")),
        memory_stacks=int(sourced(c, "memory_stacks", "chip")),
        memory_efficiency=float(sourced(c, "memory_efficiency", "chip")),
        neuronlink_bytes_per_s=float(sourced(c, "neuronlink_bytes_per_s", "chip")),
        intra_chip_link_bytes_per_s=float(sourced(c, "intra_chip_link_bytes_per_s", "chip")),
        tensor=_tensor(doc["tensor"]),
        vector=_stream(doc["vector"], "vector", "vector"),
        scalar=_stream(doc["scalar"], "scalar", "scalar"),
        gpsimd=_stream(doc["gpsimd"], "gpsimd", "gpsimd") if "gpsimd" in doc else None,
        sbuf_bytes=int(sourced(doc["sbuf"], "bytes", "sbuf")),
        sbuf_partitions=int(sourced(doc["sbuf"], "partitions", "sbuf")),
        psum_bytes=int(sourced(doc["psum"], "bytes", "psum")),
        psum_banks=int(sourced(doc["psum"], "banks", "psum")),
        dma=Dma(
            engines=int(sourced(doc["dma"], "engines", "dma")),
            engine_bytes_per_s=float(sourced(doc["dma"], "engine_bytes_per_s", "dma")),
            packet_bytes=float(sourced(doc["dma"], "packet_bytes", "dma")),
            latency_s=float(sourced(doc["dma"], "latency_s", "dma")),
        ),
        efficiency=Efficiency(**{k: float(sourced(eff, k, "efficiency")) for k in eff}),
    )
    _check_dtypes(chip)
    return chip


def _check_dtypes(chip: Chip) -> None:
    engines = [chip.tensor.rate, chip.tensor.k_pack, chip.vector.elems_per_cycle, chip.scalar.elems_per_cycle]
    if chip.gpsimd is not None:
        engines.append(chip.gpsimd.elems_per_cycle)
    for dtype in chip.dtypes:
        if any(dtype not in table for table in engines):
            raise ValueError(f"{chip.key}: dtype {dtype} lacks a rate on some engine")


def load_toml(name: str) -> dict[str, Any]:
    with open(DATA_DIR / name, "rb") as f:
        return tomllib.load(f)


@cache
def kernel_settings(table: str) -> dict[str, int]:
    """How the NKI kernels that NxD calls tile their work (kernels.toml), one table of it."""
    entries = load_toml("kernels.toml")[table]
    return {k: int(sourced(entries, k, f"kernels.toml [{table}]")) for k in entries}


@cache
def all_chips() -> Mapping[str, Chip]:
    """Every chip generation in the data directory, by key, oldest first."""
    efficiency = load_toml("efficiency.toml")
    chips = [
        parse_chip(load_toml(p.name), efficiency)
        for p in sorted(DATA_DIR.glob("*.toml"))
        if p.name not in ("instances.toml", "efficiency.toml", "compiler.toml", "kernels.toml", "speculation.toml")
    ]
    order = {"inf1": 0, "inf2": 1, "trn1": 2, "trn2": 3, "trn3": 4}
    chips.sort(key=lambda ch: (order.get(ch.key, 99), ch.key))
    return MappingProxyType({ch.key: ch for ch in chips})


def get_chip(name: str) -> Chip:
    """Look a chip up by key or alias (case-insensitive): ``trn2``, ``trainium2``, ``inf1``..."""
    wanted = name.strip().lower()
    for chip in all_chips().values():
        if wanted == chip.key or wanted in chip.aliases or wanted == chip.name.lower():
            return chip
    known = ", ".join(all_chips())
    raise UnknownNameError(f"unknown chip '{name}': choose one of {known}")
