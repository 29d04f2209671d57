"""Runs named by what differs: two runs on the same instance are told apart, in every pane, table
and legend, by the settings in which they differ ("trn2.48xlarge · 32 cores/copy" beside
"trn2.48xlarge · 64 cores/copy"), in a fixed order of what users compare first."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

# the settings a name may give, in that order: their key in a run's metadata and how each reads
IMPORTED = "imported"  # a trace of what ran (a device profile, another tool's): named by its model and as measured
# what such a trace says of itself (its file: a rank's profile directory): its settings are not known
KNOWN_OF_IMPORTED = ("model", "mode", "source_file")
DESCRIBED: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("model", str),
    ("mode", lambda v: "measured" if v == IMPORTED else str(v)),
    ("source_file", lambda v: str(v).removesuffix("@latest")),  # a profile's directory names it so
    ("cores_per_copy", lambda v: f"{v} core{'' if v == 1 else 's'}/copy"),
    ("copies", lambda v: f"{v} cop{'y' if v == 1 else 'ies'}"),
    ("nodes", lambda v: f"{v} instance{'' if v == 1 else 's'}"),
    ("pipeline", lambda v: f"{v} stage{'' if v == 1 else 's'}"),
    ("batch", lambda v: f"batch {v}"),
    ("seq", lambda v: f"seq {v}"),
    ("new_tokens", lambda v: f"{v} new tokens"),
    ("grad_accum", lambda v: f"{v} micro-batch{'' if v == 1 else 'es'}"),
    ("concurrency", lambda v: f"{v} user{'' if v == 1 else 's'}"),
    ("requests", lambda v: f"{v} requests"),
    ("dtype", str),
    ("lnc", lambda v: f"LNC {v}"),
)
# settings read from the run's configuration (``meta["config"]``), after those above
CONFIGURED = ("quant", "kv_cache", "attention", "sparsity", "nki_kernels", "spec_method", "draft", "spec_k",
              "spec_acceptance", "fused_speculation", "zero1", "checkpoint_activations", "sequence_parallel", "ep",
              "prefill_chunk", "max_seq", "rate", "autocast")


def distinct_titles(titles: Sequence[str], metas: Sequence[Mapping]) -> list[str]:
    """``titles`` (chip and instance) made distinct: each run that shares its title with another
    gets the settings in which the runs of that title differ, then, for runs alike in every
    setting, its place among them ("#2")."""
    out = list(titles)
    for title in set(titles):
        group = [i for i, t in enumerate(titles) if t == title]
        if len(group) < 2:
            continue
        parts = {i: _differences(metas[i], [metas[j] for j in group]) for i in group}
        for i in group:
            out[i] = " · ".join([title, *parts[i]])
        for name in set(out[i] for i in group):
            same = [i for i in group if out[i] == name]
            if len(same) > 1:
                for k, i in enumerate(same, 1):
                    out[i] = f"{name} #{k}"
    return out


def _differences(meta: Mapping, group: list[Mapping]) -> list[str]:
    """What of ``meta``'s settings differs among ``group``, as a name reads each. An imported trace
    is named by its model and mode alone, and its unknown settings differ from no run's."""
    imported = meta.get("mode") == IMPORTED
    known = [m for m in group if m.get("mode") != IMPORTED]
    parts = []
    for key, read in DESCRIBED:
        if imported and key not in KNOWN_OF_IMPORTED:
            continue
        values = {repr(m.get(key)) for m in (group if key in KNOWN_OF_IMPORTED else known)}
        if len(values) > 1 and meta.get(key) is not None:
            parts.append(read(meta[key]))
    for key in CONFIGURED if not imported else ():
        values = {repr(_config(m).get(key)) for m in known}
        if len(values) > 1:
            value = _config(meta).get(key)
            parts.append(f"{key.replace('_', ' ')} {_setting(value)}")
    return parts


def _config(meta: Mapping) -> Mapping:
    config = meta.get("config")
    return config if isinstance(config, Mapping) else {}


def _setting(value: Any) -> str:
    if value in (None, False, (), []):
        return "off"
    if value is True:
        return "on"
    if isinstance(value, list | tuple):
        return "+".join(map(str, value))
    return str(value)
