"""The terminal bar the CLI draws for sweeps and animations."""

import io

from neuronviz.progress import TerminalBar
from sim.progress import Progress


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_terminal_bar_redraws_in_place_at_most_every_interval_and_always_at_the_end():
    clock, out = _Clock(), io.StringIO()
    bar, state = TerminalBar("sweep", "configurations", out, every_s=0.2), Progress(24, clock=clock)
    bar(state)
    clock.now += 2.0
    state.advance(12)
    bar(state)
    clock.now += 0.1
    state.advance(6)
    bar(state)  # too soon after the last: not drawn
    clock.now += 0.05
    state.advance(6)
    bar(state)  # done: drawn, then a new line
    assert out.getvalue() == (
        "\rsweep [..............................] 0/24 configurations (0.0/s)  "
        f"\rsweep [{'#' * 15}{'.' * 15}] 12/24 configurations (6.0/s, 2 s left)  "
        f"\rsweep [{'#' * 30}] 24/24 configurations (11.2/s)  \n")


def test_work_that_counts_its_frames_gets_a_bar_that_never_cancels_it():
    clock, out = _Clock(), io.StringIO()
    bar = TerminalBar("rendering a.gif", "frames", out, clock=clock)
    assert bar.count(0, 3)
    clock.now += 1.0
    assert bar.count(1, 3)
    clock.now += 1.0
    assert bar.count(3, 3)
    assert out.getvalue() == (
        "\rrendering a.gif [..............................] 0/3 frames (0.0/s)  "
        f"\rrendering a.gif [{'#' * 10}{'.' * 20}] 1/3 frames (1.0/s, 2 s left)  "
        f"\rrendering a.gif [{'#' * 30}] 3/3 frames (1.5/s)  \n")
