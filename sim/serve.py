"""Serving: a stream of generation requests on one model copy, as vLLM on Neuron (NxD Inference,
optimum-neuron) serves them, and the figures serving benchmarks report about it.

The server runs graphs compiled for a fixed batch (``--max-num-seqs``): each request's prompt is
encoded alone as soon as a slot of that batch is free (its first token comes out of that pass),
and every token step runs the whole compiled batch for the requests in flight, the empty slots
computed too. Without prefill chunks, the prompts waiting for a slot are encoded before the
next token step (vLLM schedules prefills first); with chunks, one chunk runs before each token
step, so the requests already generating are not held up by a long prompt.

Clients send requests as benchmark tools do: ``concurrency`` users, each sending its next
request when the last one finished (``vllm bench serve --max-concurrency``, LLMPerf's
concurrent requests, guidellm's synchronous and concurrent profiles), or at ``rate`` requests a
second (Poisson arrivals, seeded) with at most ``concurrency`` of them in flight.

This module knows nothing about chips: it asks ``prefill`` and ``decode`` to run a step from a
time and returns what every request saw. Times are in seconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

PERCENTILES = (50, 99)  # the percentiles serving benchmarks report (vLLM: p50/p99, LLMPerf: p50..p99)


@dataclass
class _Request:
    index: int
    sent: float
    ready: float  # when the engine can take it: sent, plus the server's handling of it
    prompt: int
    new_tokens: int
    first: float = 0.0
    finish: float = 0.0
    generated: int = 0
    chunks_done: int = 0
    last: float = 0.0  # when its last token came out
    admitted: float = -1.0  # when its prompt's first pass began (it queued for a slot from ready until then)


@dataclass
class ServeLog:
    """What a serving run did: per request its times and tokens (and when it was ready for the
    engine and its prompt's pass began, between which it queued), per step when it ended and the
    tokens it produced, and every gap between a request's successive token steps."""

    sent: list[float] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)
    admitted: list[float] = field(default_factory=list)
    first_token: list[float] = field(default_factory=list)
    finish: list[float] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    step_end: list[float] = field(default_factory=list)
    step_tokens: list[int] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)


def send_times(requests: int, rate: float | None, seed: int) -> np.ndarray:
    """When each request is due to be sent: all at once (closed-loop users send as soon as they
    may), or Poisson arrivals at ``rate`` a second from time 0."""
    if not rate:
        return np.zeros(requests)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, requests)
    return np.concatenate(([0.0], np.cumsum(gaps[1:])))


def accepted_tokens(rng: np.random.Generator, acceptance: tuple[float, ...], n: int) -> np.ndarray:
    """Tokens ``n`` speculative steps each yield: the draft's leading accepted tokens and the
    model's own. With cumulative per-position ``acceptance`` (each the chance that the draft's
    tokens up to that position are all accepted: :mod:`sim.speculation`), a step accepts at least
    i tokens with probability ``acceptance[i - 1]``: one uniform draw u a step, it accepts the
    positions whose rate exceeds u."""
    u = rng.random(n)
    return 1 + (u[:, None] < np.asarray(acceptance)[None, :]).sum(axis=1)


def lengths(mean: int, spread: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` token counts around ``mean``: all of it, or normally spread by ``spread`` tokens (as
    benchmark tools emulate datasets), kept within three spreads and at least 1."""
    if not spread:
        return np.full(n, mean, np.int64)
    drawn = np.clip(rng.normal(0.0, 1.0, n), -3.0, 3.0) * spread + mean
    return np.maximum(1, np.rint(drawn)).astype(np.int64)


def serve(*, prompts: np.ndarray, outputs: np.ndarray, concurrency: int | None, rate: float | None, seed: int,
          batch: int, chunk: int, handling_s: float, prefill: Callable[[float, int, int], float],
          decode: Callable[[float, int], float], acceptance: tuple[float, ...] | None = None) -> ServeLog:
    """Serve one request per entry of ``prompts`` (its prompt's tokens) and ``outputs`` (the
    tokens generated for it) on graphs compiled for ``batch``. ``prefill(t, prompt, i)``
    encodes chunk ``i`` of a prompt of ``prompt`` tokens in chunks of ``chunk`` (0: all of it
    at once, ``i`` = 0) from ``t``, and ``decode(t, context)`` runs one token step over
    contexts of up to ``context`` positions; both return when the step ends. A speculative run's
    ``acceptance`` is its cumulative rate at each draft position (:func:`accepted_tokens`)."""
    requests = len(prompts)
    due = send_times(requests, rate, seed)
    limit = concurrency or (requests if rate else batch)
    rng = np.random.default_rng(seed + 1)
    log = ServeLog()
    reqs: list[_Request] = []
    waiting: deque[_Request] = deque()
    prefilling: list[_Request] = []
    running: list[_Request] = []
    in_flight = finished = 0
    clock = 0.0

    def send(now: float) -> None:
        nonlocal in_flight
        while len(reqs) < requests and in_flight < limit and due[len(reqs)] <= now + 1e-15:
            sent = max(now, float(due[len(reqs)]))
            i = len(reqs)
            r = _Request(i, sent, sent + handling_s, int(prompts[i]), int(outputs[i]))
            reqs.append(r)
            waiting.append(r)
            in_flight += 1

    def done(r: _Request, t: float) -> None:
        nonlocal in_flight, finished
        r.finish = t
        in_flight -= 1
        finished += 1

    def first_token(r: _Request, t: float) -> None:
        r.first = r.last = t
        r.generated = 1
        if r.generated >= r.new_tokens:
            done(r, t)
        else:
            running.append(r)

    while finished < requests:
        send(clock)
        while waiting and waiting[0].ready <= clock and len(running) + len(prefilling) < batch:
            prefilling.append(waiting.popleft())
        ran = False
        if prefilling:
            ran = True
            if chunk:  # one chunk of the oldest prompt, then a token step
                r = prefilling[0]
                r.admitted = clock if r.admitted < 0 else r.admitted
                clock = prefill(clock, r.prompt, r.chunks_done)
                r.chunks_done += 1
                if r.chunks_done * chunk >= r.prompt:
                    prefilling.pop(0)
                    first_token(r, clock)
            else:
                for r in prefilling:
                    r.admitted = clock
                    clock = prefill(clock, r.prompt, 0)
                    first_token(r, clock)
                prefilling.clear()
        if running:
            ran = True
            clock = decode(clock, max(r.prompt + r.generated for r in running))
            tokens = (accepted_tokens(rng, acceptance, len(running)) if acceptance
                      else np.ones(len(running), int))
            produced = 0
            for r, n in zip(list(running), tokens, strict=True):
                n = min(int(n), r.new_tokens - r.generated)
                r.generated += n
                produced += n
                log.gaps.append(clock - r.last)
                r.last = clock
                if r.generated >= r.new_tokens:
                    running.remove(r)
                    done(r, clock)
            log.step_end.append(clock)
            log.step_tokens.append(produced)
        if not ran:  # idle until the next request is due or ready
            upcoming = [r.ready for r in waiting]
            if len(reqs) < requests and in_flight < limit:
                upcoming.append(float(due[len(reqs)]))
            clock = max(clock, min(upcoming))
    for r in reqs:
        log.sent.append(r.sent)
        log.ready.append(r.ready)
        log.admitted.append(r.admitted)
        log.first_token.append(r.first)
        log.finish.append(r.finish)
        log.output_tokens.append(r.generated)
    return log


def serving_record(log: ServeLog) -> dict:
    """``log`` as a trace keeps it (``meta["serving"]``): times in ns, per request and per step,
    and the inter-token gaps as their mean and :data:`PERCENTILES` (there is one per token)."""
    gaps = np.asarray(log.gaps if log.gaps else [0.0]) * 1e9
    return {"sent_ns": [t * 1e9 for t in log.sent], "first_token_ns": [t * 1e9 for t in log.first_token],
            "finish_ns": [t * 1e9 for t in log.finish], "output_tokens": list(log.output_tokens),
            "step_end_ns": [t * 1e9 for t in log.step_end], "step_tokens": list(log.step_tokens),
            "itl_ns": {"mean": float(gaps.mean()), **{f"p{q}": float(np.percentile(gaps, q)) for q in PERCENTILES}}}


def serving_summary(rec: dict) -> dict[str, float]:
    """The figures serving benchmarks report, from a :func:`serving_record`, in seconds and per
    second: time to first token, time per output token after the first ((end - first token) /
    (tokens - 1), per request), inter-token latency (every gap between a request's token
    steps), end-to-end latency, each as a mean and at :data:`PERCENTILES`, and output tokens and
    requests a second over the run (from the first request sent to the last token)."""
    sent, first, finish = (np.asarray(rec[k], np.float64) * 1e-9 for k in ("sent_ns", "first_token_ns", "finish_ns"))
    tokens = np.asarray(rec["output_tokens"], np.float64)
    many = tokens > 1
    tpot = (finish[many] - first[many]) / (tokens[many] - 1) if many.any() else np.zeros(1)
    out: dict[str, float] = {}
    for name, values in (("ttft", first - sent), ("tpot", tpot), ("e2e", finish - sent)):
        out[f"{name}_mean_s"] = float(np.mean(values))
        for q in PERCENTILES:
            out[f"{name}_p{q}_s"] = float(np.percentile(values, q))
    out.update({f"itl_{k}_s": v * 1e-9 for k, v in rec["itl_ns"].items()})
    span = float(finish.max() - sent.min())
    out["output_tokens_per_s"] = float(tokens.sum()) / span if span > 0 else 0.0
    out["requests_per_s"] = len(sent) / span if span > 0 else 0.0
    out["requests"] = float(len(sent))
    out["output_tokens"] = float(tokens.sum())
    return out
