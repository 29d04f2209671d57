"""Speculative decoding as the serving stacks run it: a run's method (a draft model, or an EAGLE or
EAGLE-3 head on the target's hidden states), how its draft and target are compiled, the draft
tokens a step proposes, and the acceptance it takes at each of their positions.

Acceptance is an input, not a result: it is the draft's, the target's and the data's, and no
simulation of the chip can know it. A run states it as vLLM reports it
(``sim/hardware/data/speculation.toml`` says how): one mean rate, the share of draft tokens
accepted, or a rate for each position, the share of steps whose draft tokens were accepted up to
that position (cumulative: each needs the ones before it). A run that states none takes the
published figure that data file names, and its description says so.
"""

from __future__ import annotations

from sim.config import RunConfig
from sim.description import Speculation
from sim.hardware.chip import sourced
from sim.workloads import ModelSpec, get_model
from sim.workloads.speculation import DRAFT_MODEL, Drafter, drafter, speculation_data

# halvings of [0, 1] that find a mean rate's constant conditional rate (below a float's precision)
BISECTIONS = 60


def default_acceptance() -> tuple[tuple[float, ...], str]:
    """The per-position rates a run takes when it states none, and the publication they are from."""
    table = speculation_data()["default_acceptance"]
    return tuple(sourced(table, "per_position", "speculation.toml [default_acceptance]")), table["publication"]


def method_of(cfg: RunConfig) -> str | None:
    """How ``cfg`` speculates: as asked, a draft model when it names one, None when it does not."""
    return cfg.spec_method or (DRAFT_MODEL if cfg.draft else None)


def drafter_of(cfg: RunConfig, spec: ModelSpec) -> Drafter | None:
    """What proposes ``cfg``'s speculative tokens for the model ``spec``; None when it does not
    speculate."""
    method = method_of(cfg)
    if method is None:
        return None
    return drafter(spec, method, get_model(cfg.draft) if cfg.draft else None, cfg.fused_speculation)


def proposed_tokens(cfg: RunConfig) -> int:
    """Draft tokens a step proposes: the num_speculative_tokens asked, except under NxD Inference's
    fused speculation, which takes it as its speculation_length (vLLM's NxD Inference loader:
    speculation_length = num_speculative_tokens). That length counts the target's own token: the
    fused token-generation graph runs the draft speculation_length times and compares the first
    speculation_length - 1 of its tokens with the target's (the last run only fills the draft's KV
    cache), an EAGLE head speculation_length - 1 times (neuronx_distributed_inference
    models/model_base.py, NeuronFusedSpecModel._token_gen_forward and _eagle_token_gen_forward)."""
    return cfg.spec_k - 1 if cfg.fused_speculation else cfg.spec_k


def constant_rate(mean: float, positions: int) -> float:
    """The conditional rate c whose cumulative rates c, c^2 ... c^positions average ``mean``."""
    lo, hi = 0.0, 1.0
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        if sum(mid ** i for i in range(1, positions + 1)) / positions < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def per_position(rates: tuple[float, ...], positions: int) -> tuple[float, ...]:
    """Cumulative ``rates`` over ``positions`` draft positions: the first of them, and past the
    last one given the last one's conditional rate (its share of the steps that reach it)."""
    out = list(rates[:positions])
    before = rates[-2] if len(rates) > 1 else 1.0
    last = rates[-1] / before if before else 0.0
    while len(out) < positions:
        out.append(out[-1] * last)
    return tuple(out)


def acceptance_rates(given: tuple[float, ...], positions: int) -> tuple[float, ...]:
    """The cumulative rate at each of ``positions`` draft positions of what a run states: one
    number is the mean rate (the share of draft tokens accepted, vLLM's "Acceptance rate"), taken
    as a constant conditional rate whose cumulative rates average it, so that a step accepts
    ``positions`` x the mean on average; several are per-position rates (:func:`per_position`)."""
    if len(given) == 1 and positions > 1:
        c = constant_rate(given[0], positions)
        return tuple(c ** i for i in range(1, positions + 1))
    return per_position(given, positions)


def speculation(cfg: RunConfig) -> Speculation | None:
    """What ``cfg``'s speculation is, its acceptance stated or the published default; None when it
    does not speculate."""
    method = method_of(cfg)
    if method is None:
        return None
    positions = proposed_tokens(cfg)
    if cfg.spec_acceptance:
        rates, stated, source = acceptance_rates(tuple(cfg.spec_acceptance), positions), True, ""
    else:
        published, source = default_acceptance()
        rates, stated = per_position(published, positions), False
    return Speculation(method, cfg.fused_speculation, cfg.spec_k, positions, rates, stated, source, cfg.draft)


def tokens_per_step(cfg: RunConfig) -> float:
    """Tokens one decode step yields: 1, or with speculation the expected accepted draft tokens and
    the target's own next one, 1 + the sum of the cumulative per-position rates (the expected
    count of leading positions accepted)."""
    spec = speculation(cfg)
    return 1.0 if spec is None else spec.tokens_per_step

