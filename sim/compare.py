"""Measured beside simulated: a device profile (what a Neuron device measured) and the simulation
of the same run, figure by figure and block by block, with how far apart they are.

A profile's layers are named by the framework (``NeuronLlamaDecoderLayer[3]/function[2]/aten.add``,
``model.layers.3.mlp``, ``layer_3``), a simulation's by the model (``layer3.mlp``,
``prefill/layer3.attention``): both are compared by the model block a name is in
(:func:`block_of`), each block's time summed over its layers and the executions they stand for.
The figures are the metric catalogue's that Neuron Explorer also gives (:mod:`sim.catalogue`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from sim import options
from sim.analysis import RunAnalysis, Stats, analyse, region_of_layers
from sim.catalogue import CATALOGUE, label, measure
from sim.config import RunConfig
from sim.errors import ConfigError
from sim.trace import Trace

FIGURE, BLOCK = "figure", "block"
# a numbered block of the model, as frameworks and the simulator name it: layer3, layers.3, layer_3,
# DecoderLayer[3], block 3, h.3
_NUMBERED = re.compile(r"(?:layers?|layer\w*?|block|blocks|h)[\[._ ]?(\d+)\]?", re.IGNORECASE)
_PHASE = re.compile(r"^(?:prefill|decode|context|token|micro-batch|chunk|step)\b[^/]*/")  # a simulation's phase
_WORD = re.compile(r"[A-Za-z]+")
_EMBEDDING = ("embed", "embedding", "embeddings", "wte", "wpe", "tok")
_HEAD = ("head", "lm", "pooler", "classifier", "norm", "final")


@lru_cache(maxsize=65536)
def block_of(name: str) -> str:
    """The model block a layer of a profile or a simulation is in: ``layer N`` for the Nth numbered
    block, ``embedding`` and ``head`` for what comes before and after them, else the name's first
    word (the host's costs: ``copy``, ``request``)."""
    rest = _PHASE.sub("", name)
    m = _NUMBERED.search(rest)
    if m:
        return f"layer {int(m[1])}"
    words = [w.lower() for w in _WORD.findall(rest)]
    if any(w.startswith(_EMBEDDING) for w in words):
        return "embedding"
    if any(w.startswith(_HEAD) for w in words):
        return "head"
    return words[0] if words else "other"


@dataclass(frozen=True)
class Row:
    """One figure or block: what the device measured and what the simulator predicts of it."""

    kind: str  # figure or block
    name: str
    unit: str
    measured: float | None
    simulated: float | None

    @property
    def ratio(self) -> float | None:
        """Simulated over measured (None where either is missing or the measurement is 0)."""
        if self.measured is None or self.simulated is None or not self.measured:
            return None
        return self.simulated / self.measured

    @property
    def error_percent(self) -> float | None:
        return None if self.ratio is None else 100.0 * (self.ratio - 1.0)


def block_stats(trace: Trace, analysis: RunAnalysis | None = None) -> list[Stats]:
    """Each block of ``trace`` as one region (its layers' times, FLOPs and bytes summed, MFU and
    MBU over their summed time), its layers as its parts, in the order blocks first run."""
    analysis = analysis or analyse(trace)
    members: dict[str, list[Stats]] = {}
    for s in sorted(analysis.layers, key=lambda s: s.start_ns):
        members.setdefault(block_of(s.name), []).append(s)
    out = []
    for name, layers in members.items():
        names = {s.name for s in layers}
        merged = region_of_layers(trace, analysis, name, lambda s, names=names: s.name in names)
        out.append(replace(merged, kind=BLOCK, ops=tuple(replace(s, ops=()) for s in layers)))
    return out


def block_times(trace: Trace) -> dict[str, float]:
    """Each block's time (ns) in ``trace``, in the order blocks first run."""
    return {s.name: s.time_ns for s in block_stats(trace)}


def compare(measured: Trace, simulated: Trace) -> list[Row]:
    """The figures Neuron Explorer gives of both runs, then every block either has."""
    ours, theirs = measure(measured), measure(simulated)
    rows = [Row(FIGURE, label(m.key), m.unit, ours.get(m.key), theirs.get(m.key)) for m in CATALOGUE
            if m.explorer and (ours.get(m.key) is not None or theirs.get(m.key) is not None)]
    got, want = block_times(measured), block_times(simulated)
    names = list(dict.fromkeys([*want, *got]))
    rows += [Row(BLOCK, n, "µs", got[n] / 1e3 if n in got else None, want[n] / 1e3 if n in want else None)
             for n in names]
    return rows


def simulation_config(profile: Trace, values: Mapping[str, Any]) -> RunConfig:
    """The run a profile measured as the simulator takes it: its instance (and logical core size)
    from the profile unless ``values`` (run options by name) set them, the model and the rest from
    ``values``. A profile that names no instance neuronviz knows needs ``instance`` set."""
    chosen = dict(values)
    d = profile.run.deployment
    if not chosen.get("instance"):
        if not d.instance:
            raise ConfigError("the profile names no instance neuronviz has data of: set --instance")
        chosen["instance"] = d.instance
    if chosen.get("lnc") is None and d.lnc > 1:
        chosen["lnc"] = d.lnc
    return options.config(chosen)


def table_text(rows: list[Row]) -> str:
    """The rows as aligned text: name, measured, simulated, simulated over measured."""
    lines = []
    for kind, title in ((FIGURE, "figure"), (BLOCK, "block (time µs)")):
        part = [r for r in rows if r.kind == kind]
        if not part:
            continue
        width = max(len(title), *(len(_name(r)) for r in part))
        lines.append(f"{title:{width}s}  {'measured':>14s}  {'simulated':>14s}  {'sim/meas':>8s}")
        for r in part:
            lines.append(f"{_name(r):{width}s}  {_number(r.measured):>14s}  {_number(r.simulated):>14s}  "
                         f"{'n/a' if r.ratio is None else f'{r.ratio:.2f}x':>8s}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _name(row: Row) -> str:
    return f"{row.name} {row.unit}".rstrip() if row.kind == FIGURE else row.name


def _number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def csv_rows(rows: list[Row]) -> list[dict[str, Any]]:
    return [{"kind": r.kind, "name": r.name, "unit": r.unit, "measured": r.measured, "simulated": r.simulated,
             "simulated_over_measured": r.ratio} for r in rows]

