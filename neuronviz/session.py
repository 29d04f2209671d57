"""Application state: the open runs, the playhead, the view, the selection. Narrow signals.

Panes subscribe to the session; no pane reaches into another. Time is in nanoseconds of the
shared axis; in normalised mode every pane maps the same fraction of its own run instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from PySide6.QtCore import QObject, Signal

from neuronviz.naming import distinct_titles
from neuronviz.trace_view import TraceView
from sim.analysis import RunAnalysis, analyse
from sim.catalogue import measure
from sim.description import Hardware
from sim.hardware.chip import DEFAULT_OPT_LEVEL
from sim.metrics import RunMetrics, compute_metrics
from sim.trace import Trace

SIMULATED = "simulated"  # the source of a run simulated in the app, until it is saved


@dataclass(eq=False)
class Run:
    """One open trace with its derived metrics and where it came from. ``trace`` is what the views
    draw; a run read from a file keeps the trace as read in ``as_read`` (what saving it writes),
    whose texts may be longer than the views draw (:func:`neuronviz.files.drawable`)."""

    trace: Trace
    source: str = ""
    name: str = ""  # what the comparison calls it: its title and what tells it from runs of the same title
    as_read: Trace | None = None

    @cached_property
    def metrics(self) -> RunMetrics:
        return compute_metrics(self.trace)

    @property
    def hardware(self) -> Hardware | None:
        """What the run says it ran on; None for a trace of another tool."""
        return self.trace.run.hardware

    @cached_property
    def measures(self) -> dict[str, float | None]:
        """The catalogue's figures of the run (:func:`sim.catalogue.measure`): what every view shows."""
        return measure(self.trace, self.metrics)

    @cached_property
    def analysis(self) -> RunAnalysis:
        """Layers (with ops), summary and roofs, made on first use."""
        return analyse(self.trace)

    @cached_property
    def view(self) -> TraceView:
        return TraceView(self.trace)

    @property
    def duration_ns(self) -> float:
        """Length of the run's time axis: from 0 to its last event or counter sample, or to the
        end of the executions after them that were not stored as events."""
        return max(self.trace.run_end_ns, 1.0)

    @property
    def base_title(self) -> str:
        """Chip and instance, and the compiler's optimization level when not its default."""
        run = self.trace.run
        optlevel, d = run.software.optlevel, run.deployment
        level = f" · -O{optlevel}" if optlevel not in (None, DEFAULT_OPT_LEVEL) else ""
        return f"{d.chip_name or '?'} · {d.instance}".strip(" ·") + level

    @property
    def title(self) -> str:
        """How every pane, table and legend names the run: its :attr:`base_title`, and in a
        comparison with runs of the same title what differs (:mod:`neuronviz.naming`)."""
        return self.name or self.base_title

    @property
    def short_title(self) -> str:
        """The run as a small plot or a narrow column names it: its instance type (which names its
        chip), and what tells it from the runs of the same title."""
        differs = self.title[len(self.base_title):] if self.title.startswith(self.base_title) else ""
        return (self.trace.run.deployment.instance or self.base_title) + differs


class Session(QObject):
    sig_runs_changed = Signal()
    sig_playhead_moved = Signal(float)  # fraction of the longest run, 0..1
    sig_selection_changed = Signal(str)  # layer name, "" for none
    sig_time_mode_changed = Signal(bool)  # True: each pane normalised to its own duration
    sig_baseline_changed = Signal(int)
    sig_area_changed = Signal()  # the area selection (a time window) was drawn, moved or cleared
    sig_search_changed = Signal(str)  # text to find in layer and op names ("" for none)
    sig_markers_changed = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []
        self.playhead = 0.0
        self.selected_layer = ""
        self.normalised = False
        self.baseline = 0
        self.path = ""  # the file the comparison was opened from or saved to
        self.area: tuple[float, float] | None = None  # selected window, fractions like the playhead
        self.search = ""
        self.markers: list[float] = []  # fractions of the shared axis, in the order they were dropped

    @property
    def unsaved(self) -> bool:
        """True while runs simulated in the app have not been saved to a file."""
        return any(r.source == SIMULATED for r in self.runs)

    def mark_saved(self, path: str) -> None:
        for r in self.runs:
            r.source = path
        self.path = path

    @property
    def max_duration_ns(self) -> float:
        return max((r.duration_ns for r in self.runs), default=1.0)

    def time_of(self, run: Run, fraction: float | None = None) -> float:
        """The playhead (or ``fraction`` of the shared axis) as a time (ns) in ``run``."""
        f = self.playhead if fraction is None else fraction
        if self.normalised:
            return f * run.duration_ns
        return f * self.max_duration_ns

    def area_of(self, run: Run) -> tuple[float, float] | None:
        """The selected window as times (ns) in ``run``."""
        if self.area is None:
            return None
        return self.time_of(run, self.area[0]), self.time_of(run, self.area[1])

    def set_area(self, a: float, b: float) -> None:
        """Select the window between fractions ``a`` and ``b`` of the shared axis (any order)."""
        lo, hi = sorted((min(1.0, max(0.0, a)), min(1.0, max(0.0, b))))
        area = (lo, hi) if hi > lo else None
        if area != self.area:
            self.area = area
            self.sig_area_changed.emit()

    def add_marker(self, fraction: float) -> None:
        """Drop a marker; with two or more, the window between the last two is selected, so the
        Selection tab shows the time between them and what each run did in it."""
        self.markers.append(min(1.0, max(0.0, fraction)))
        self.sig_markers_changed.emit()
        if len(self.markers) >= 2:
            self.set_area(*self.markers[-2:])

    def clear_markers(self) -> None:
        if self.markers:
            self.markers = []
            self.sig_markers_changed.emit()

    def set_search(self, text: str) -> None:
        text = text.strip()
        if text != self.search:
            self.search = text
            self.sig_search_changed.emit(text)

    def clear_area(self) -> None:
        if self.area is not None:
            self.area = None
            self.sig_area_changed.emit()

    def set_runs(self, runs: list[Run], path: str = "") -> None:
        self.runs = list(runs)
        self.path = path
        self.baseline = 0
        self.selected_layer = ""
        self.area = None
        self.markers = []
        self._runs_changed()

    def add_runs(self, runs: list[Run]) -> None:
        self.runs.extend(runs)
        self._runs_changed()

    def _runs_changed(self) -> None:
        """Name the runs by what differs among them, and tell the views."""
        names = distinct_titles([r.base_title for r in self.runs], [r.trace.meta for r in self.runs])
        for run, name in zip(self.runs, names, strict=True):
            run.name = name
        self.sig_runs_changed.emit()

    def remove_run(self, index: int) -> None:
        """Close run ``index``; the baseline stays on the same run, or goes to the first one."""
        del self.runs[index]
        if index == self.baseline:
            self.baseline = 0
        elif index < self.baseline:
            self.baseline -= 1
        self._runs_changed()

    def set_playhead(self, fraction: float) -> None:
        fraction = min(1.0, max(0.0, fraction))
        if fraction != self.playhead:
            self.playhead = fraction
            self.sig_playhead_moved.emit(fraction)

    def select_layer(self, name: str) -> None:
        if name != self.selected_layer:
            self.selected_layer = name
            self.sig_selection_changed.emit(name)

    def set_normalised(self, on: bool) -> None:
        if on != self.normalised:
            self.normalised = on
            self.sig_time_mode_changed.emit(on)

    def set_baseline(self, index: int) -> None:
        if 0 <= index < len(self.runs) and index != self.baseline:
            self.baseline = index
            self.sig_baseline_changed.emit(index)
