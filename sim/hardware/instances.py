"""EC2 instances built on Neuron chips: how many chips, and what an hour costs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from sim.errors import UnknownNameError
from sim.hardware.chip import Chip, get_chip, load_toml, sourced


@dataclass(frozen=True)
class Topology:
    """How an instance's chips are joined: a ``ring`` or ``torus`` of ``dims`` chips per
    dimension, a ``switch`` (all to all), or a ``single`` chip. ``link_bytes_per_s`` is each chip's
    NeuronLink bandwidth within it; the last dimension runs at ``outer_bytes_per_s`` when that is
    given (an UltraServer's ring across its instances). ``efa_bytes_per_s`` is the instance's
    network bandwidth to other instances (0: none published)."""

    kind: str
    dims: tuple[int, ...]
    link_bytes_per_s: float
    outer_bytes_per_s: float = 0.0
    efa_bytes_per_s: float = 0.0


@dataclass(frozen=True)
class Instance:
    """One instance type (or UltraServer) and its on-demand price, when one is published."""

    name: str
    chip: Chip
    chips: int
    vcpus: int
    default: bool
    price_usd_per_hour: float | None
    price_note: str
    topology: Topology

    @property
    def logical_cores(self) -> int:
        return self.chips * self.chip.logical_cores


def _parse(entry: Mapping) -> Instance:
    where = f"instance {entry['name']}"
    price = entry.get("price_usd_per_hour")
    chip = get_chip(entry["chip"])
    kind = entry.get("topology", "single")
    if kind not in ("single", "ring", "torus", "switch"):
        raise ValueError(f"{where}: unknown topology {kind}")
    dims = tuple(int(d) for d in sourced(entry, "topology_dims", where)) if kind != "single" else (1,)
    link = float(sourced(entry, "link_bytes_per_s", where)) if "link_bytes_per_s" in entry else \
        chip.neuronlink_bytes_per_s
    outer = float(sourced(entry, "outer_link_bytes_per_s", where)) if "outer_link_bytes_per_s" in entry else 0.0
    efa = float(sourced(entry, "efa_gbps", where)) * 1e9 / 8 if "efa_gbps" in entry else 0.0
    return Instance(
        name=entry["name"],
        chip=chip,
        chips=int(sourced(entry, "chips", where)),
        vcpus=int(sourced(entry, "vcpus", where)),
        default=bool(entry.get("default", False)),
        price_usd_per_hour=None if price is None else float(sourced(entry, "price_usd_per_hour", where)),
        price_note=entry.get("price_note", ""),
        topology=Topology(kind, dims, link, outer, efa),
    )


@cache
def all_instances() -> Mapping[str, Instance]:
    """Every instance in ``instances.toml``, by name, in file order."""
    entries = load_toml("instances.toml")["instance"]
    return MappingProxyType({e["name"]: _parse(e) for e in entries})


def get_instance(name: str) -> Instance:
    wanted = name.strip().lower()
    if wanted in all_instances():
        return all_instances()[wanted]
    known = ", ".join(all_instances())
    raise UnknownNameError(f"unknown instance '{name}': choose one of {known}")


def instances_of(chip: Chip) -> list[Instance]:
    """The instances built on ``chip``, smallest first."""
    return sorted((i for i in all_instances().values() if i.chip.key == chip.key), key=lambda i: i.chips)


def default_instance(chip: Chip) -> Instance:
    for inst in instances_of(chip):
        if inst.default:
            return inst
    raise UnknownNameError(f"no default instance for chip '{chip.key}' in instances.toml")
