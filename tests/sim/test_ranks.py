"""Device profiles of several ranks on one clock, their collectives matched and each one's
straggler found."""

import math

import pytest

from sim.io import load_file, save_file
from sim.ranks import collectives, on_one_clock, rank_summaries, wall_start_ns
from sim.run import RunConfig, simulate
from tests.profiles import rank_profile

# three ranks whose clocks started 0, 2 and 5 µs after 10:00:00; on the shared clock they arrive
# at the first AllReduce at 1,000 / 1,300 / 1,100 ns (rank 1 last) and the second at 3,000 / 3,000 / 3,400 (rank 2)
STARTED_US = (0, 2, 5)
ARRIVALS = ([1000, 3000], [1300 - 2000, 3000 - 2000], [1100 - 5000, 3400 - 5000])


@pytest.fixture
def ranks(tmp_path):
    traces = [load_file(rank_profile(tmp_path / f"rank{r}", r, STARTED_US[r], [a + 10_000 for a in ARRIVALS[r]],
                                     first_hw=10 ** 9 * (r + 1)))[0] for r in range(3)]
    return on_one_clock(traces)


def test_each_rank_is_shifted_by_how_much_later_its_clock_started(ranks):
    assert [t.meta.get("clock_offset_ns", 0.0) for t in ranks] == [0.0, 2000.0, 5000.0]
    assert wall_start_ns(ranks[0]) % 10**9 == 0 and wall_start_ns(ranks[2]) - wall_start_ns(ranks[0]) == 5000


def test_collectives_are_matched_in_order_and_the_last_to_arrive_is_the_straggler(ranks):
    first, second = collectives(ranks)
    assert first.name == "AllReduce" and first.starts == (11_000.0, 11_300.0, 11_100.0)
    assert first.straggler == 1 and first.waits_ns == (300.0, 0.0, 200.0) and first.spread_ns == 300.0
    assert second.straggler == 2 and second.waits_ns == (400.0, 400.0, 0.0)


def test_each_ranks_summary_counts_its_waits_and_last_arrivals(ranks):
    summaries = rank_summaries(ranks)
    assert [s.last_arrivals for s in summaries] == [0, 1, 1]
    assert [s.waited_for_others_ns for s in summaries] == [700.0, 400.0, 200.0]
    assert [s.collective_ns for s in summaries] == [200.0, 200.0, 200.0]
    span = 13_500 - 10_950  # from the first MATMUL on the shared clock to the last collective's end
    assert summaries[0].busy["tensor"] == pytest.approx(100 / span)


def test_a_rank_that_ran_fewer_collectives_is_matched_as_far_as_it_went(tmp_path):
    traces = on_one_clock([load_file(rank_profile(tmp_path / "a", 0, 0, [100, 200, 300]))[0],
                           load_file(rank_profile(tmp_path / "b", 1, 0, [150, 250]))[0]])
    matched = collectives(traces)
    assert len(matched) == 2 and all(math.isfinite(s) for c in matched for s in c.starts)


def test_one_profile_or_profiles_without_a_wall_time_stay_on_their_own_clocks(tmp_path):
    one = load_file(rank_profile(tmp_path / "a", 0, 3, [100]))[0]
    assert on_one_clock([one]) == [one]
    sim = simulate(RunConfig(model="bert-base", chip="trn1"))
    save_file(tmp_path / "sim", [sim], "explorer")  # neuronviz writes the epoch: no wall time
    (written,) = load_file(tmp_path / "sim")
    assert wall_start_ns(written) is None
    assert on_one_clock([one, written]) == [one, written]


def test_the_share_of_a_window_covered_counts_overlaps_once():
    import numpy as np

    from sim.ranks import Coverage

    cover = Coverage(np.array([0.0, 10.0, 15.0, 40.0]), np.array([5.0, 10.0, 2.0, 10.0]))  # [0, 5) [10, 20) [40, 50)
    assert cover.covered_ns(np.array([0.0, 2.0, 5.0, 12.0, 25.0, 45.0, 100.0])).tolist() == [0, 2, 5, 7, 15, 20, 25]
    assert cover.shares(np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0])).tolist() == [0.5, 1.0, 0.0, 0.0, 1.0]
    assert Coverage(np.zeros(0), np.zeros(0)).shares(np.array([0.0, 1.0])).tolist() == [0.0]


def test_a_ranks_activity_over_time_is_its_engines_busy_share_and_its_waits(tmp_path):
    import numpy as np

    from sim.ranks import activity
    from tests.profiles import small_profile

    (trace,) = load_file(small_profile(tmp_path / "p"))
    act = activity(trace)
    # the Vector op waited 100 ns on a semaphore before it started (1,600 to 1,700 ns), the Sync
    # instruction 30 ns on its DMA after it ended (2,050 to 2,080)
    assert act.waiting(np.array([1500.0, 1700.0, 2000.0, 2100.0])) == pytest.approx([0.5, 0.0, 0.3])
    # the MATMUL (1,000 to 1,600 ns), the Vector op (1,700 to 1,900) and the ACTIVATE (2,100 to 2,400):
    # of the three engines, one busy in each, half of the last window
    assert set(act.engines) == {"tensor", "vector", "scalar"}
    assert act.busy(np.array([1000.0, 1600.0, 1700.0, 1900.0, 2100.0, 2700.0])) == pytest.approx(
        [1 / 3, 0.0, 1 / 3, 0.0, 1 / 6])
