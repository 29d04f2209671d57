"""Window averages of long tracks: the tabulated integrals that zoomed-out views draw from."""

import numpy as np
import pytest

from sim.integrals import (
    TABLE_INTERVALS,
    TABLE_LINE,
    TABLE_MIN_POINTS,
    BusyIntegral,
    CounterIntegral,
    IntegralStack,
    ReplayedIntegral,
)
from sim.trace import union_intervals

TOLERANCE = 1 / 16


@pytest.fixture(scope="module")
def tracks():
    """A long busy track in uneven bursts (more events than the table has rows: it is made), and
    a short one that starts later and ends earlier."""
    rng = np.random.default_rng(7)
    n = 3 * TABLE_INTERVALS
    start = np.cumsum(rng.exponential(50.0, n) * rng.choice([0.1, 1.0, 20.0], n))
    long = BusyIntegral(*union_intervals(start, rng.uniform(1.0, 40.0, n)))
    assert len(long.start) > TABLE_INTERVALS
    short = BusyIntegral(np.array([0.2, 0.5, 0.7]) * long.hi, np.array([0.01, 0.02, 0.01]) * long.hi)
    return long, short


def _grid(track, edges):
    """The edges moved to the nearest of the evenly spaced times the long track spans."""
    step = (track.hi - track.lo) / TABLE_INTERVALS
    return track.lo + np.rint((edges - track.lo) / step) * step


def test_zoomed_out_windows_are_exact_averages_over_grid_times_within_the_tolerance(tracks):
    long, short = tracks
    stack = IntegralStack([long, short])
    edges = np.linspace(long.lo + 0.3, long.hi - 0.7, 601)
    points, _ = stack.evaluate(edges, TOLERANCE)
    width = np.diff(edges).min()
    shift = np.abs(points - edges).max()
    assert 0 < shift <= TOLERANCE * width
    snapped = _grid(long, edges)
    means = stack.means(edges, TOLERANCE)
    for row, track in enumerate(tracks):
        np.testing.assert_allclose(means[row], track.fractions(snapped), rtol=0, atol=1e-9)
        # so they differ from the averages over the edges asked for by what moving both edges can change
        error = np.abs(means[row] - track.fractions(edges)).max()
        assert 0 < error <= 4 * shift / (width - 2 * shift)


def test_short_tracks_beyond_a_cache_line_are_searched_at_the_same_moved_edges(tracks):
    long, short = tracks
    shorts = [BusyIntegral(short.start + 3.0 * i, short.dur) for i in range(TABLE_LINE + 2)]
    stack = IntegralStack([long, *shorts])
    edges = np.linspace(long.lo, long.hi, 301)
    points, _ = stack.evaluate(edges, TOLERANCE)
    assert stack._table.shape == (TABLE_INTERVALS + 1, TABLE_LINE)  # the long track and 7 short ones
    means = stack.means(edges, TOLERANCE)
    for row, track in enumerate([long, *shorts]):
        np.testing.assert_allclose(means[row], track.fractions(points), rtol=0, atol=1e-9)


def test_tracks_shorter_than_the_table_are_searched_at_its_times_instead_of_filling_it(tracks):
    """A stack of tracks long enough to be tabulated but shorter than the table answers with the
    table's values, the integrals searched at its times, and never fills its 65,537 rows."""
    long, short = tracks
    part = BusyIntegral(long.start[:TABLE_INTERVALS // 2], long.dur[:TABLE_INTERVALS // 2])
    assert TABLE_MIN_POINTS <= part.n_points < TABLE_INTERVALS
    searched = IntegralStack([part, short])
    edges = np.linspace(part.lo + 0.3, part.hi - 0.7, 601)
    means = searched.means(edges, TOLERANCE)
    assert searched._table is None
    with_table = IntegralStack([part, short])
    with_table._long = True  # as a stack with a longer track would
    assert np.array_equal(with_table.means(edges, TOLERANCE), means) and with_table._table is not None
    points, _ = searched.evaluate(edges, TOLERANCE)
    assert not np.array_equal(points, edges)  # moved to the table's times all the same


def test_a_table_is_the_integrals_at_its_times(tracks):
    """The table's rows, filled by one pass over each track's sorted times, are the integrals
    searched at the tabulated times, bit for bit, counters too."""
    long, short = tracks
    counter = CounterIntegral(long.start, np.arange(len(long.start)) % 7.0)
    period = (long.hi - long.lo) / 10  # three runs of the track's first tenth replayed after it
    replays = tuple(np.array([x]) for x in (long.hi, long.hi + 3 * period, period, long.lo))
    stack = IntegralStack([long, short, counter, ReplayedIntegral(long, replays)])
    stack.evaluate(np.linspace(long.lo, long.hi, 301), TOLERANCE)
    grid = stack._lo + np.arange(TABLE_INTERVALS + 1) * stack._step
    assert sorted(stack._tabulated) == [0, 1, 2, 3]
    for column, k in enumerate(stack._tabulated):
        assert np.array_equal(stack._table[:, column], stack.integrals[k].at(grid))


def test_zoomed_in_windows_are_not_moved(tracks):
    """Windows narrower than the table allows are computed exactly, edges as given."""
    long, short = tracks
    stack = IntegralStack([long, short])
    step = (long.hi - long.lo) / TABLE_INTERVALS
    edges = long.lo + 1000 * step + np.arange(601) * step  # one grid step per window: too narrow
    points, _ = stack.evaluate(edges, TOLERANCE)
    assert np.array_equal(points, edges)
    assert np.array_equal(stack.means(edges, TOLERANCE)[0], np.diff(long.busy(edges)) / np.diff(edges))


def test_no_tolerance_and_short_tracks_stay_exact(tracks):
    long, _ = tracks
    edges = np.linspace(0.0, long.hi, 101)
    stack = IntegralStack([long])
    assert np.array_equal(stack.evaluate(edges)[0], edges)
    # the same edges, asked again without tolerance, are not answered from the moved ones
    assert not np.array_equal(stack.means(edges, TOLERANCE)[0], long.fractions(edges))
    assert np.array_equal(stack.means(edges)[0], np.diff(long.busy(edges)) / np.diff(edges))
    # windows of a third of a short track are wide enough for any table: it has none
    few = IntegralStack([BusyIntegral(np.array([0.0, 10.0, 25.0]), np.array([5.0, 10.0, 5.0]))])
    edges = np.array([0.0, 10.0, 20.0, 30.0])
    assert np.array_equal(few.evaluate(edges, TOLERANCE)[0], edges)
    assert few.means(edges, TOLERANCE)[0].tolist() == [0.5, 1.0, 0.5]


def test_counter_table_is_exact_outside_the_counters():
    """Before its first sample a counter integrates to 0; after its last it keeps its last value:
    windows out there are exact whatever the tolerance, for each counter of a stack."""
    n = TABLE_MIN_POINTS + 5
    t = np.arange(n, dtype=np.float64) * 10.0
    value = np.where(np.arange(n) % 2 == 0, 4.0, 0.0)
    value[-1] = 3.0
    end = t[-1]
    stack = IntegralStack([CounterIntegral(t, value), CounterIntegral(np.array([0.0, end / 2]), np.array([1.0, 5.0]))])
    edges = np.array([-2 * end, -end, 0.0, end, 2 * end, 3 * end])
    means = stack.means(edges, TOLERANCE)
    assert means[0, 0] == 0.0
    assert means[0, 2] == pytest.approx(2.0, rel=1e-6)  # the alternating part averages 4 and 0
    assert means[0, 3:].tolist() == [3.0, 3.0]
    assert means[1, 2] == pytest.approx(3.0, rel=1e-6) and means[1, 3:].tolist() == [5.0, 5.0]
    # windows straddling the first and the last sample: exact over the (moved) edges inside
    edges = np.array([-end / 3, end / 3 + 1.234, end + 7.0])
    points, _ = stack.evaluate(edges, TOLERANCE)
    assert points[0] == edges[0] and points[2] == edges[2] and points[1] != edges[1]
    for row, counter in enumerate(stack.integrals):
        np.testing.assert_allclose(stack.means(edges, TOLERANCE)[row], counter.means(points), rtol=1e-12)


def test_steps_not_stored_as_events_still_count_in_the_metrics(monkeypatch):
    """A long generation keeps only its first steps as events; the later ones, identical, count
    in FLOPs, bytes and busy time as if they had been stored."""
    import sim.run
    from sim.metrics import compute_metrics

    cfg = sim.run.RunConfig(model="gpt2", chip="inf2", mode="decode", seq=64, new_tokens=9)
    full = sim.run.simulate(cfg)
    short = sim.run.simulate(cfg, max_events=full.n_events // 3)
    # the request's handling, the prompt, then 6 of 8 steps not stored
    assert [(p["repeat"], p["stored"]) for p in short.meta["phases"]] == [(1, 1), (1, 1), (8, 2)]
    a, b = compute_metrics(full), compute_metrics(short)
    assert b.flops == pytest.approx(a.flops, rel=1e-9)
    assert (b.hbm_read_bytes, b.hbm_write_bytes) == pytest.approx((a.hbm_read_bytes, a.hbm_write_bytes), rel=1e-9)
    for engine, busy in a.engine_utilization.items():
        assert b.engine_utilization[engine] == pytest.approx(busy, rel=1e-6)


def test_one_window_of_an_integral_by_hand():
    """The chip diagram's activity and gauges ask for one window at every playback frame."""
    busy = BusyIntegral(np.array([20.0, 0.0]), np.array([10.0, 10.0]))  # busy [0, 10) and [20, 30)
    assert busy.window_mean(5.0, 25.0) == pytest.approx((5 + 5) / 20)
    assert busy.window_mean(-10.0, 0.0) == 0.0 and busy.window_mean(30.0, 40.0) == 0.0
    assert busy.window_mean(12.0, 12.0) == 0.0  # an empty window
    counter = CounterIntegral(np.array([0.0, 10.0, 20.0]), np.array([2.0, 4.0, 0.0]))
    assert counter.window_mean(5.0, 15.0) == pytest.approx((2 * 5 + 4 * 5) / 10)
    assert counter.window_mean(-5.0, 5.0) == pytest.approx(2 * 5 / 10)  # nothing before the first step


def test_one_window_matches_the_windows_of_a_run_with_replayed_steps():
    from sim.integrals import replayed
    from sim.run import RunConfig, simulate

    trace = simulate(RunConfig(model="gpt2", chip="trn2", mode="decode", seq=64, new_tokens=300), max_events=20_000)
    assert len(trace.replays[0])  # some token steps are not stored as events
    tensor = next(i for i, t in enumerate(trace.tracks) if t.kind == "tensor")
    integrals = [replayed(BusyIntegral.of_track(trace, tensor), trace),
                 replayed(CounterIntegral(trace.counters["hbm_read_bytes_per_s"].t_ns,
                                          trace.counters["hbm_read_bytes_per_s"].value), trace)]
    end = trace.run_end_ns  # before the run, in its stored steps, in its replayed ones, after it (scalar paths)
    for a in np.linspace(-0.02 * end, 1.01 * end, 73):
        for it in integrals:
            b = a + 0.013 * end
            assert it.window_mean(a, b) == pytest.approx(float(it.means(np.array([a, b]))[0]), rel=1e-9, abs=1e-12)
