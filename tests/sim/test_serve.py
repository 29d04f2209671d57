"""Serving runs: requests from users or at a rate, continuous batching onto a compiled batch,
and the percentiles serving benchmarks report."""

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.io import load_file, save_file
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.serve import accepted_tokens, lengths, send_times, serve, serving_record, serving_summary

MS = 1e-3


def _serve(n=4, prompt=100, out=3, batch=2, prefill_ms=10.0, decode_ms=1.0, handling_ms=0.0, **kw):
    steps = []

    def prefill(t, p, i):
        steps.append(("prefill", t, p, i))
        return t + prefill_ms * MS

    def decode(t, context):
        steps.append(("decode", t, context))
        return t + decode_ms * MS

    log = serve(prompts=np.full(n, prompt), outputs=np.full(n, out), batch=batch, handling_s=handling_ms * MS,
                prefill=prefill, decode=decode, **{"concurrency": None, "rate": None, "seed": 0, "chunk": 0, **kw})
    return log, steps


def test_users_send_their_next_request_when_the_last_is_done():
    # batch 2, two users, 3 tokens each: A and B encoded one after the other (first tokens at 10
    # and 20 ms), two token steps for both (done at 22), then C and D the same from 22 ms
    log, steps = _serve(concurrency=2)
    assert [s[0] for s in steps] == ["prefill", "prefill", "decode", "decode"] * 2
    assert np.allclose(np.array(log.sent) / MS, [0, 0, 22, 22])
    assert np.allclose(np.array(log.first_token) / MS, [10, 20, 32, 42])
    assert np.allclose(np.array(log.finish) / MS, [22, 22, 44, 44])
    assert steps[2][2] == 101  # the first token step attends to the prompt and the first token
    s = serving_summary(serving_record(log))
    assert s["ttft_p50_s"] == pytest.approx(15 * MS)
    assert s["tpot_mean_s"] == pytest.approx((6 + 1 + 6 + 1) / 4 * MS)  # (end - first token) / 2 tokens
    assert s["output_tokens_per_s"] == pytest.approx(12 / (44 * MS))
    assert s["requests_per_s"] == pytest.approx(4 / (44 * MS))
    # gaps between a request's tokens: A's first token step waits for B's prompt (11 ms), the others 1 ms
    assert sorted(np.array(log.gaps) / MS) == pytest.approx([1, 1, 1, 1, 1, 1, 11, 11])


def test_users_beyond_the_compiled_batch_wait_for_a_slot():
    log, steps = _serve(n=2, batch=1, concurrency=2, handling_ms=5.0)
    # B was sent at 0 but is encoded only when A is done (5 + 10 + 2 = 17 ms)
    assert np.allclose(np.array(log.first_token) / MS, [15, 27])
    assert steps[3][0] == "prefill" and steps[3][1] == pytest.approx(17 * MS)


def test_chunked_prompts_let_token_steps_run_between_their_chunks():
    log, steps = _serve(n=2, prompt=250, out=10, batch=2, concurrency=2, chunk=100)
    kinds = [s[0] for s in steps]
    # A's three chunks and its first token step, then B's chunks each followed by a token step for A
    assert kinds[:4] == ["prefill"] * 3 + ["decode"]
    assert kinds[4:10] == ["prefill", "decode"] * 3
    assert [s[3] for s in steps if s[0] == "prefill"][:6] == [0, 1, 2, 0, 1, 2]


def test_requests_at_a_rate_arrive_as_a_poisson_process_and_the_server_idles_between():
    due = send_times(2000, 50.0, seed=3)
    assert due[0] == 0 and np.all(np.diff(due) >= 0)
    assert np.mean(np.diff(due)) == pytest.approx(1 / 50.0, rel=0.05)
    log, steps = _serve(n=20, rate=2.0, seed=3, batch=4)  # one request each 500 ms, served in 12 ms
    assert np.allclose(log.sent, send_times(20, 2.0, seed=3))
    ttft = np.array(log.first_token) - np.array(log.sent)
    assert np.allclose(ttft, 10 * MS)  # nobody waits: each prompt is encoded when it arrives


def test_speculative_steps_yield_the_expected_tokens():
    """Four draft tokens each accepted with probability 0.7 while the ones before it were:
    cumulative rates 0.7^i, (1 - 0.7^5) / 0.3 tokens a step."""
    rng = np.random.default_rng(0)
    k, p = 4, 0.7
    tokens = accepted_tokens(rng, tuple(p ** i for i in range(1, k + 1)), 200_000)
    assert tokens.min() == 1 and tokens.max() == k + 1
    assert tokens.mean() == pytest.approx((1 - p ** (k + 1)) / (1 - p), rel=0.01)


def test_spread_lengths_stay_within_three_spreads():
    drawn = lengths(1500, 150, 10_000, np.random.default_rng(1))
    assert drawn.min() >= 1050 and drawn.max() <= 1950
    assert drawn.mean() == pytest.approx(1500, rel=0.01) and drawn.std() == pytest.approx(150, rel=0.05)
    assert np.all(lengths(7, 0, 3, np.random.default_rng(1)) == 7)


def test_one_user_on_a_padded_batch_pays_each_token_what_decode_mode_does():
    cfg = dict(model="llama-3-8b", chip="trn2", batch=4, seq=256, new_tokens=16, cores=4, max_seq=512,
               concurrency=1)
    served = compute_metrics(simulate(RunConfig(mode="serve", requests=3, **cfg), max_events=0))
    decode = compute_metrics(simulate(RunConfig(mode="decode", **cfg), max_events=0))
    assert served.serving["tpot_p50_s"] == pytest.approx(decode.per_token_s, rel=1e-9)
    assert served.serving["ttft_p50_s"] == pytest.approx(decode.time_to_first_token_s, rel=1e-9)
    assert served.serving["e2e_p50_s"] == pytest.approx(decode.latency_s, rel=1e-6)


def test_steps_not_kept_as_events_still_count_in_the_totals():
    cfg = RunConfig(model="llama-3-8b", chip="trn2", mode="serve", batch=4, seq=256, new_tokens=16, cores=4,
                    max_seq=512, requests=8)
    kept, counted = simulate(cfg), simulate(cfg, max_events=0)
    assert counted.n_events < kept.n_events
    assert any(p["stored"] == 0 and "same_as" in p for p in counted.meta["phases"])
    assert counted.run_total("flops") == pytest.approx(kept.run_total("flops"), rel=1e-9)
    busy = counted.track_index("tensor")
    assert counted.run_busy_ns(busy) == pytest.approx(kept.run_busy_ns(busy), rel=1e-6)
    assert compute_metrics(counted).serving == compute_metrics(kept).serving


def test_more_users_raise_throughput_and_latency(tmp_path):
    few = compute_metrics(simulate(RunConfig(model="llama-3-8b", chip="trn2", mode="serve", batch=8, seq=256,
                                             new_tokens=32, cores=4, concurrency=1), max_events=0))
    many = simulate(RunConfig(model="llama-3-8b", chip="trn2", mode="serve", batch=8, seq=256, new_tokens=32,
                              cores=4, concurrency=16), max_events=0)
    m = compute_metrics(many)
    assert m.serving["output_tokens_per_s"] > 4 * few.serving["output_tokens_per_s"]
    assert m.serving["ttft_p99_s"] > 2 * few.serving["ttft_p99_s"]  # half of them wait for a slot
    assert m.serving["requests"] == 64  # four per user
    # a saved serving run reads back with its requests and percentiles
    path = tmp_path / "serve.nvtrace"
    save_file(path, [many])
    again = load_file(path)[0]
    assert compute_metrics(again).serving == m.serving


@pytest.mark.parametrize("kw, message", [
    (dict(mode="decode", rate=2.0), "a request rate (and its seed) is for serve mode"),
    (dict(rate=-1.0), "the request rate is requests a second, a positive number"),
    (dict(seq_spread=-3), "the prompt length spread is a whole number of tokens from 0"),
    (dict(mode="decode", new_tokens_spread=5), "is for serve mode"),
    (dict(seq_spread=100), "(the longest of their spread lengths) need 572 positions"),
    (dict(requests=20_000), "requests must be a whole number from 1 to 10,000"),
    (dict(model="bert-base"), "serve mode needs a GPT-style decoder"),
])
def test_impossible_serving_runs_are_refused(kw, message):
    base = dict(model="llama-3-8b", chip="trn2", mode="serve", batch=4, seq=256, new_tokens=16, cores=4,
                max_seq=512)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        simulate(RunConfig(**{**base, **kw}), max_events=0)


def test_executions_not_stored_are_drawn_exactly_as_if_they_were():
    from sim.integrals import BusyIntegral, CounterIntegral, replayed
    from sim.trace import union_intervals

    cfg = RunConfig(model="gpt2", chip="trn2", mode="serve", batch=2, concurrency=3, seq=64, new_tokens=12,
                    requests=6)
    full, part = simulate(cfg), simulate(cfg, max_events=30_000)
    assert part.n_events < full.n_events / 3 and len(part.replays[0]) > 0 and not len(full.replays[0])
    edges = np.linspace(0.0, full.meta["total_ns"], 997)
    for kind in ("tensor", "vector", "dma_read"):
        busy = []
        for trace in (full, part):
            ev, sel = trace.events, trace.events["track"] == trace.track_index(kind)
            busy.append(replayed(BusyIntegral(*union_intervals(ev["start_ns"][sel], ev["dur_ns"][sel])), trace))
        assert busy[1].at(edges) == pytest.approx(busy[0].at(edges), rel=1e-6, abs=1e-3), kind
    counters = [replayed(CounterIntegral(t.counters["hbm_read_bytes_per_s"].t_ns,
                                         t.counters["hbm_read_bytes_per_s"].value), t) for t in (full, part)]
    assert counters[1].at(edges) == pytest.approx(counters[0].at(edges), rel=1e-6, abs=1.0)


def test_a_serving_run_keeps_events_up_to_its_limit_and_counts_the_rest():
    """The steps past the trace's limit are counted, not stored (the log's size is tallied as it
    grows: recounting it at every step made long serving runs quadratic)."""
    cfg = RunConfig(model="gpt2", chip="inf2", mode="serve", batch=4, concurrency=4, requests=8, seq=128,
                    new_tokens=32)
    full = simulate(cfg)
    limit = full.n_events // 3
    short = simulate(cfg, max_events=limit)
    assert 0 < short.n_events <= limit < full.n_events
    assert sum(p["stored"] for p in short.meta["phases"]) < sum(p["stored"] for p in full.meta["phases"])
    a, b = compute_metrics(full), compute_metrics(short)
    assert b.flops == pytest.approx(a.flops, rel=1e-9)
    assert b.serving["output_tokens_per_s"] == pytest.approx(a.serving["output_tokens_per_s"], rel=1e-12)
