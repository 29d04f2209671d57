"""The requests of serving runs (``--mode serve``): for each run, every request as a bar from
when it was sent to its first token (waiting for a slot and its prefill) and on to its last
token (decoding), with the playhead; beside them, the distributions of time to first token and
time per output token of every run, their p50 and p99 marked. Queueing, the price of a small
compiled batch, and one chip serving more requests than another show at a glance."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout

from neuronviz.session import Run, Session
from neuronviz.theme import palette
from neuronviz.widgets.lazy import LazyView
from neuronviz.widgets.roofline import run_color
from sim.serve import PERCENTILES

MAX_PLOTS = 4  # runs shown as request bars; the distributions take them all
WAIT_ALPHA = 90  # the bar before a request's first token: lighter than its decoding
LONG_MS = 10_000.0  # request bars of runs longer than this are drawn in seconds
NO_SERVING = "The Requests tab shows serving runs (neuronviz simulate --mode serve); this comparison has none."


def request_spans(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A serving run's requests: when each was sent, gave its first token and finished (ms), and
    its output tokens; in the order they were sent."""
    s = run.trace.meta["serving"]
    sent, first, finish = (np.asarray(s[k], np.float64) / 1e6 for k in ("sent_ns", "first_token_ns", "finish_ns"))
    return sent, first, finish, np.asarray(s["output_tokens"], np.float64)


def distributions(run: Run) -> dict[str, np.ndarray]:
    """Sorted time to first token and time per output token (ms) of a serving run's requests."""
    sent, first, finish, tokens = request_spans(run)
    many = tokens > 1
    return {"TTFT": np.sort(first - sent), "TPOT": np.sort((finish[many] - first[many]) / (tokens[many] - 1))}


class RequestsView(LazyView):
    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.message = QLabel(NO_SERVING)
        self.message.setWordWrap(True)
        self.gantt_row = QHBoxLayout()
        self.cdf = {name: pg.PlotWidget() for name in ("TTFT", "TPOT")}
        # each distribution's key below its plot, not inside it: a CDF has no corner that every
        # run's curve leaves empty (a slower run's rises through the bottom right)
        self.keys = {name: QLabel() for name in self.cdf}
        row = QHBoxLayout()
        row.addLayout(self.gantt_row, 2)
        for name, plot in self.cdf.items():
            plot.setLabel("bottom", f"{name} (ms)")
            plot.setLabel("left", "share of requests")
            plot.setYRange(0, 1.0, padding=0.02)
            plot.showGrid(x=True, y=True, alpha=0.2)
            self.keys[name].setWordWrap(True)
            column = QVBoxLayout()
            column.addWidget(plot, 1)
            column.addWidget(self.keys[name])
            row.addLayout(column, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.message)
        layout.addLayout(row, 1)
        self.gantts: list[pg.PlotWidget] = []
        self.playheads: list[tuple[pg.InfiniteLine, float]] = []  # and the unit per ms of its plot
        session.sig_runs_changed.connect(self.refresh)
        session.sig_playhead_moved.connect(self._move_playheads)

    def first_shown(self) -> None:
        self.refresh()

    def has_nothing_to_show(self) -> bool:
        """No serving run: the tab is one line of text (its dock need not grow for it)."""
        return not self.serving_runs()

    def serving_runs(self) -> list[tuple[int, Run]]:
        return [(i, r) for i, r in enumerate(self.session.runs)
                if r.trace.meta.get("mode") == "serve" and r.trace.meta.get("serving")]

    def refresh(self, *_: object) -> None:
        if not self.shown:
            return
        for plot in self.gantts:
            self.gantt_row.removeWidget(plot)
            plot.deleteLater()
        self.gantts, self.playheads = [], []
        for plot in self.cdf.values():
            plot.clear()
        runs = self.serving_runs()
        self.message.setVisible(not runs)
        for name, plot in self.cdf.items():
            plot.setVisible(bool(runs))
            self.keys[name].setVisible(bool(runs))
        for index, run in runs[:MAX_PLOTS]:
            self._gantt(index, run)
        # legends name a run as the small plots do: its instance and what tells it from the others
        chips = [r.short_title for r in self.session.runs]
        lines: dict[str, list[str]] = {name: [] for name in self.cdf}
        for index, run in runs:
            color = run_color(self.session, index)
            for name, values in distributions(run).items():
                if not len(values):
                    continue
                share = np.arange(1, len(values) + 1) / len(values)
                p = run.metrics.serving
                label = f"{chips[index]}: " + ", ".join(
                    f"p{q} {p[f'{name.lower()}_p{q}_s'] * 1e3:,.0f} ms" for q in PERCENTILES)
                self.cdf[name].plot(np.repeat(values, 2)[1:], np.repeat(share, 2)[:-1], pen=pg.mkPen(color, width=2))
                # a run's key is one piece: the line breaks only between runs
                lines[name].append(f'<span style="color:{QColor(color).name()}">&#9632;</span>&nbsp;'
                                   + label.replace(" ", "&nbsp;"))
        for name, key in self.keys.items():
            key.setText(" &nbsp; ".join(lines[name]))
        self._move_playheads()

    def _gantt(self, index: int, run: Run) -> None:
        sent, first, finish, _ = request_spans(run)
        scale, unit = (1e-3, "s") if finish.max() > LONG_MS else (1.0, "ms")
        sent, first, finish = sent * scale, first * scale, finish * scale
        color = QColor(run_color(self.session, index))
        light = QColor(color)
        light.setAlpha(WAIT_ALPHA)
        plot = pg.PlotWidget()
        plot.setTitle(run.short_title, size="9pt")
        plot.setLabel("bottom", f"time ({unit})")
        plot.setLabel("left", "request")
        plot.invertY(True)
        y = np.arange(len(sent), dtype=np.float64)
        plot.addItem(pg.BarGraphItem(x0=sent, x1=first, y=y, height=0.8, brush=light, pen=pg.mkPen(None)))
        plot.addItem(pg.BarGraphItem(x0=first, x1=finish, y=y, height=0.8, brush=color, pen=pg.mkPen(None)))
        line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(palette().playhead, width=1.5))
        plot.addItem(line, ignoreBounds=True)
        self.gantt_row.addWidget(plot, 1)
        self.gantts.append(plot)
        self.playheads.append((line, scale))

    def _move_playheads(self, *_: object) -> None:
        """The playhead in each run's own time (ms), as the panes place it; nothing to move before
        the tab is first looked at (its plots are made then)."""
        if not self.shown:
            return
        runs = self.serving_runs()[:MAX_PLOTS]
        for (line, unit), (_, run) in zip(self.playheads, runs, strict=True):
            span = run.duration_ns if self.session.normalised else self.session.max_duration_ns
            line.setValue(self.session.playhead * span / 1e6 * unit)
