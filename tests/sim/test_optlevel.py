"""neuronx-cc's optimization levels: how far ahead compiled code's loads go (compiler.toml)."""

import pytest

from sim.errors import ConfigError
from sim.hardware.chip import schedule
from sim.lowering import DMA_READ, DMA_WRITE, VECTOR, LoweredOp, Stage
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.scheduler import CoreScheduler
from sim.workloads.graph import Op, OpKind, Program

US = 1e-6


def _op(read_us: float, compute_us: float, write_us: float = 0.0) -> LoweredOp:
    """One chunk: a load, a VectorE instruction and (optionally) a store of its result."""
    write = Stage(DMA_WRITE, write_us * US, 0.0, 1.0) if write_us else None
    return LoweredOp(chunks=1, read=Stage(DMA_READ, read_us * US, 0.0, 1.0),
                     compute=(Stage(VECTOR, compute_us * US, 0.0, 0.0),), write=write, read_after_deps=False,
                     sbuf_bytes=1.0, psum_bytes=0.0, weight_refetch_bytes=0.0)


def _finish_us(optlevel: int, lowered: list[LoweredOp]) -> float:
    program = Program(ops=[Op(f"op{i}", OpKind.VECTOR) for i in range(len(lowered))])
    sched = CoreScheduler(24 << 20, None, schedule(optlevel))
    sched.run(program, lowered, 0, 0.0)
    return float(sched.free.max()) / US


def test_at_O1_loads_go_one_op_ahead_at_most():
    # a 10 us op, then two short ones whose loads take 1 and 5 us. Level 2 loads all three at
    # once (0-1, 1-2, 2-7 us) and computes 1-11, 11-12, 12-13. Level 1 loads the third only once
    # the first has finished (11-16 us) and computes it 16-17.
    ops = [_op(1, 10), _op(1, 1), _op(5, 1)]
    assert _finish_us(2, ops) == pytest.approx(13)
    assert _finish_us(1, ops) == pytest.approx(17)
    assert _finish_us(3, ops) == pytest.approx(13)  # nothing published says what level 3 adds


def test_at_O1_loads_queue_behind_the_stores_before_them():
    # three ops of a 1 us load, 4 us of compute and a 1 us store. Level 2 hoists each load above
    # the store before it: loads 0-1, 1-2, 6-7, computes 1-5, 5-9, 9-13, last store 13-14.
    # Level 1 issues in program order on the DMA queue: load 0-1, compute 1-5, store 5-6, load
    # 6-7, compute 7-11, store 11-12, load 12-13, compute 13-17, store 17-18.
    ops = [_op(1, 4, 1)] * 3
    assert _finish_us(2, ops) == pytest.approx(14)
    assert _finish_us(1, ops) == pytest.approx(18)


def _step_s(optlevel: int, **kw) -> float:
    return compute_metrics(simulate(RunConfig(optlevel=optlevel, **kw))).latency_under_load_s


def test_the_seeds_O1_trains_a_few_percent_slower_than_O2():
    # Amazon Search M5 (seed 003): O1 "about 5-7% lower performance" than the default O2, training
    # its encoder + MLP on trn1.32xlarge with --auto-cast all (the batch as bench/bench_scale.py's)
    setup = dict(model="encoder-mlp", instance="trn1.32xlarge", mode="training", batch=32, seq=128, grad_accum=4,
                 dtype="fp32", autocast="all")
    slower = _step_s(1, **setup) / _step_s(2, **setup) - 1
    assert 0.03 <= slower <= 0.09


def test_a_latency_bound_decode_step_loses_more_at_O1_than_training():
    setup = dict(model="llama-2-13b", instance="inf2.48xlarge", mode="decode", batch=1, seq=128, new_tokens=4,
                 cores=24, attention="compiler")
    tpot = [compute_metrics(simulate(RunConfig(optlevel=o, **setup))).per_token_s for o in (2, 1)]
    assert tpot[1] / tpot[0] - 1 > 0.15  # each small op's weights no longer stream in ahead of it


def test_inferentia1s_compiler_has_no_levels_and_a_bad_level_is_refused():
    setup = dict(model="bert-base", instance="inf1.xlarge", batch=1, seq=128, copies=1)
    o1, o2 = (simulate(RunConfig(optlevel=o, **setup)) for o in (1, 2))
    assert o1.meta["optlevel"] is None and o1.meta["compiler"] == "neuron-cc"
    assert compute_metrics(o1).latency_s == compute_metrics(o2).latency_s
    with pytest.raises(ConfigError, match=r"optimization level must be one of 1, 2, 3 \(neuronx-cc --optlevel\), "
                                          r"got 0"):
        simulate(RunConfig(model="bert-base", instance="trn1.2xlarge", optlevel=0))
