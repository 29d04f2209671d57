"""Window averages of long tracks: the tabulated integral that zoomed-out views draw from."""

import numpy as np
import pytest

from sim.metrics import TABLE_INTERVALS, TABLE_MIN_POINTS, BusyIntegral, CounterIntegral
from sim.trace import union_intervals

TOLERANCE = 1 / 16


@pytest.fixture(scope="module")
def long_track():
    """A busy track with more intervals than are searched directly, in uneven bursts."""
    rng = np.random.default_rng(7)
    n = 2 * TABLE_MIN_POINTS
    start = np.cumsum(rng.exponential(50.0, n) * rng.choice([0.1, 1.0, 20.0], n))
    track = BusyIntegral(*union_intervals(start, rng.uniform(1.0, 40.0, n)))
    assert len(track.start) > TABLE_MIN_POINTS
    return track


def _grid(track, edges):
    """The edges moved to the nearest of the evenly spaced times of the track's table."""
    lo = track.start[0]
    step = ((track.start + track.dur).max() - lo) / TABLE_INTERVALS
    return lo + np.rint((edges - lo) / step) * step


def test_zoomed_out_windows_are_exact_averages_over_grid_times_within_the_tolerance(long_track):
    lo, hi = long_track.start[0], (long_track.start + long_track.dur).max()
    edges = np.linspace(lo + 0.3, hi - 0.7, 601)
    points, _ = long_track.evaluate(edges, TOLERANCE)
    width = np.diff(edges).min()
    shift = np.abs(points - edges).max()
    assert 0 < shift <= TOLERANCE * width
    snapped = _grid(long_track, edges)
    np.testing.assert_allclose(long_track.fractions(edges, TOLERANCE), long_track.fractions(snapped),
                               rtol=0, atol=1e-9)
    # so they differ from the averages over the edges asked for by what moving both edges can change
    error = np.abs(long_track.fractions(edges, TOLERANCE) - long_track.fractions(edges)).max()
    assert 0 < error <= 4 * shift / (width - 2 * shift)


def test_zoomed_in_windows_are_not_moved(long_track):
    """Windows narrower than the table allows are computed exactly, edges as given."""
    lo, hi = long_track.start[0], (long_track.start + long_track.dur).max()
    step = (hi - lo) / TABLE_INTERVALS
    edges = lo + 1000 * step + np.arange(601) * step  # one grid step per window: too narrow
    points, _ = long_track.evaluate(edges, TOLERANCE)
    assert np.array_equal(points, edges)
    assert np.array_equal(long_track.fractions(edges, TOLERANCE), long_track.fractions(edges))


def test_no_tolerance_and_short_tracks_stay_exact(long_track):
    edges = np.linspace(0.0, (long_track.start + long_track.dur).max(), 101)
    assert np.array_equal(long_track.evaluate(edges)[0], edges)
    short = BusyIntegral(np.array([0.0, 10.0, 25.0]), np.array([5.0, 10.0, 5.0]))
    assert short.fractions(np.array([0.0, 10.0, 20.0, 30.0]), TOLERANCE).tolist() == [0.5, 1.0, 0.5]


def test_counter_table_is_exact_outside_the_track():
    """Before its first sample a counter integrates to 0; after its last it keeps its last value:
    windows out there are exact whatever the tolerance."""
    n = TABLE_MIN_POINTS + 5
    t = np.arange(n, dtype=np.float64) * 10.0
    value = np.where(np.arange(n) % 2 == 0, 4.0, 0.0)
    value[-1] = 3.0
    ci = CounterIntegral(t, value)
    end = t[-1]
    edges = np.array([-2 * end, -end, 0.0, end, 2 * end, 3 * end])
    means = ci.means(edges, TOLERANCE)
    assert means[0] == 0.0
    assert means[2] == pytest.approx(2.0, rel=1e-6)  # the alternating part averages 4 and 0
    assert means[3:].tolist() == [3.0, 3.0]
