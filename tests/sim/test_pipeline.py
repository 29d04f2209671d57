"""The chunk-by-chunk pipeline of bounded buffers: its steady state is taken as soon as it is
reached, and the chunks after it are exactly those the recurrence would have computed."""

import itertools

import numpy as np
import pytest

from sim.lowering import DMA_READ, DMA_WRITE, TENSOR, VECTOR, Stage
from sim.scheduler import _pipeline_bounded


def _recurrence(stages, n, ready0, free):
    """Every chunk of every stage in turn: a chunk starts when its engine is free, the stage
    before has finished it (and its latency passed) and the stage after has emptied the buffer
    it writes into."""
    ends = [[0.0] * n for _ in stages]
    starts = [[0.0] * n for _ in stages]
    free = list(free)
    for j in range(n):
        for s, st in enumerate(stages):
            r = max(ready0[s], free[s])
            if s:
                r = max(r, ends[s - 1][j] + stages[s - 1].latency_s)
            if 0 < st.buffers < n and j >= st.buffers:
                r = max(r, ends[s + 1][j - st.buffers])
            starts[s][j] = r + st.wait_s
            ends[s][j] = free[s] = starts[s][j] + st.dur_s
    return starts, ends


US = 1e-6
CASES = [  # (read, compute, write) microseconds per chunk, the compute's buffers, its latency
    (read, compute, write, buffers, latency)
    for read, compute, write in itertools.permutations((0.7, 1.3, 2.9))
    for buffers, latency in ((1, 0.0), (2, 0.4), (3, 2.0))
]


@pytest.mark.parametrize("read, compute, write, buffers, latency", CASES)
def test_the_steady_state_continues_the_recurrence_exactly(read, compute, write, buffers, latency):
    stages = [Stage(DMA_READ, read * US, 0.0, 1.0), Stage(VECTOR, compute * US, 0.0, 0.0, buffers=buffers,
                                                          latency_s=latency * US, wait_s=0.1 * US),
              Stage(DMA_WRITE, write * US, 0.0, 1.0)]
    ready0, free = [5 * US, 0.0, 0.0], [0.0, 30 * US, 2 * US]
    got = _pipeline_bounded(stages, 200, ready0, free)
    want = _recurrence(stages, 200, ready0, free)
    for (start, end), w_start, w_end in zip(got, *want, strict=True):
        np.testing.assert_allclose(start, w_start, rtol=1e-12, atol=0)
        np.testing.assert_allclose(end, w_end, rtol=1e-12, atol=0)
    # in the end every stage keeps the pace of the slowest engine, or of the compute and the write
    # taking turns over its buffers (the compute's wait, its instructions, the latency, the write)
    pace = max(read, compute + 0.1, write, (0.1 + compute + latency + write) / buffers)
    assert np.diff(got[1][0])[-1] == pytest.approx(pace * US, rel=1e-9)


def test_a_faster_first_stage_runs_ahead_of_a_bounded_one():
    """A read without a bound of its own runs at its own pace while the compute behind it takes
    turns with the write through its single buffer (5 us a chunk): the stages never share one
    step, yet every chunk is as the recurrence has it."""
    stages = [Stage(DMA_READ, 0.5 * US, 0.0, 1.0), Stage(TENSOR, 2.0 * US, 0.0, 0.0, buffers=1),
              Stage(DMA_WRITE, 3.0 * US, 0.0, 1.0)]
    got = _pipeline_bounded(stages, 64, [0.0] * 3, [0.0] * 3)
    want = _recurrence(stages, 64, [0.0] * 3, [0.0] * 3)
    np.testing.assert_allclose(got[0][0], want[0][0], rtol=1e-12)
    np.testing.assert_allclose(got[2][1], want[1][2], rtol=1e-12)
    assert got[0][1][-1] == pytest.approx(64 * 0.5 * US)
    assert got[2][1][-1] == pytest.approx((0.5 + 2.0 + 3.0 + 63 * 5.0) * US)
