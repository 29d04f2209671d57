"""The progress of long work: rate and time left from a clock."""

from sim.progress import Progress


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_and_time_left_count_only_the_work_done_since_the_start():
    clock = _Clock()
    state = Progress(100, done=40, clock=clock)  # a resumed sweep: 40 rows were in the file
    assert state.rate == 0.0 and state.eta_s is None
    clock.now += 4.0
    state.advance(20)
    assert state.rate == 5.0 and state.eta_s == 8.0
