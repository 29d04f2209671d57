"""One comparison pane: header, chip diagram, engine/layer timeline and counter tracks."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from functools import cached_property
from html import escape

import numpy as np
import pyqtgraph as pg
from pyqtgraph.graphicsItems.LegendItem import ItemSample
from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsItem, QHBoxLayout, QToolTip, QVBoxLayout, QWidget

from neuronviz.items.area import AreaViewBox, LinkedViewBox
from neuronviz.items.bands import Band, BandAxis, BandRules, ViewLine, band_transform
from neuronviz.items.curve import CurveRaster
from neuronviz.items.flows import FlowArrows
from neuronviz.items.raster import CACHE, SHADE_HELP, LayerRow, ShadeLegend, SliceRows, TrackRows
from neuronviz.items.time_axis import TimeAxis
from neuronviz.session import Run, Session
from neuronviz.theme import ENGINE_COLORS, ENGINE_LABELS, engine_color, name_color, palette
from neuronviz.trace_view import ENGINE_ORDER
from neuronviz.widgets.chip_diagram import CORE_ENGINES, ChipDiagram, ChipState
from neuronviz.widgets.chip_diagram import MIN_HEIGHT as DIAGRAM_MIN_HEIGHT
from neuronviz.widgets.header import PhraseHeader
from sim.catalogue import BY_KEY, duration, label, text, times, unit_of
from sim.description import RunDescription
from sim.integrals import CounterIntegral, IntegralStack, replayed
from sim.trace import Counter
from sim.validated import headline_errors, headline_text, software_label

COUNTER_BAND_HEIGHT = 70
AREA_COLOR = (0, 114, 178, 40)  # the selected window: translucent blue over the tracks
AREA_EDGE_COLOR = (0, 114, 178, 160)
UNSTORED_COLOR = (128, 128, 128, 28)  # over the counters where steps are replayed (not stored as events)
LEGEND_VEIL_ALPHA = 150  # counter legends sit on the background at this opacity, over the curves
LEGEND_SAMPLE_PX = (14, 10)  # a legend entry's line sample: a band is 38-70 px, its legend one short row
LEGEND_MARGIN_PX = 8  # a counter legend keeps this far inside its plot
COUNTER_BAND_MIN_HEIGHT = 38  # two tick labels and a title on two lines; a shorter band is left out instead
TRACK_ROW_MIN_PX = 16  # the timeline's rows at their tightest: a row label's height and a little air
GRAPHICS_MARGIN_PX = 3  # around the timeline and the counter bands
SIMULATOR_COUNTERS = ("sbuf_bytes", "psum_bytes", "hbm_read_bytes_per_s", "hbm_write_bytes_per_s",
                      "neuronlink_bytes_per_s", "efa_bytes_per_s",
                      "hbm_bytes_per_s", "dma_bytes_per_s")  # a device profile's read and write together
MAX_OTHER_COUNTERS = 4
OTHER_COUNTER_COLORS = tuple(ENGINE_COLORS[k] for k in ENGINE_ORDER)
LEFT_AXIS_WIDTH = 88
TIMELINE_MIN_WIDTH = LEFT_AXIS_WIDTH + 260  # the row names and a readable stretch of time beside them
ROW_LABEL_CHARS = 10
ACTIVITY_WINDOW = 0.01  # chip diagram activity: busy fraction over 1% of the run around the playhead
HOVER_SLACK_PX = 4  # hover and click pick the nearest event this close to the pointer
MAX_FLOWS_LISTED = 4  # flows a slice's hover names
FLOW_ALPHA = 200  # flow arrows: the foreground, nearly opaque


def _short(name: str, chars: int = ROW_LABEL_CHARS) -> str:
    """The last part of a "process / thread" track name, elided to fit the row labels."""
    tail = name.rsplit(" / ", 1)[-1]
    return tail if len(tail) <= chars else tail[: chars - 1] + "…"


def _row_label(name: str, depth: int) -> str:
    """A slice row's label: its thread's name (elided), and under it ``·1``, ``·2``... after it,
    so that a thread's rows stay recognisable."""
    if depth <= 0:
        return _short(name)
    suffix = f" ·{depth}"
    return _short(name.removesuffix(suffix), ROW_LABEL_CHARS - len(suffix) + 1) + suffix


def _fmt_si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _eager_transform(plot: pg.PlotItem) -> None:
    """Apply a new x range to the plot's transform at once. pyqtgraph defers it to the start of
    the next paint, where changing transforms schedules a second full repaint of the pane."""
    vb = plot.getViewBox()
    vb.sigXRangeChanged.connect(lambda *_: vb.updateMatrix())


def _fixed_labels(plot: pg.PlotItem) -> None:
    """No automatic SI prefixes on the axis labels: rewriting them on every range change would
    trigger a second repaint of the pane per zoom step (our axes print their own units)."""
    for name in ("left", "bottom", "right", "top"):
        plot.getAxis(name).enableAutoSIPrefix(False)


def _cached_y_axis(plot: pg.PlotItem) -> None:
    """Keep the y axis as a pixmap. Its ticks reach into the plot, so every x zoom or pan
    repaints it, and replaying its tick labels costs more than a blit; it changes only with its
    own range, ticks or label, which invalidate the pixmap."""
    plot.getAxis("left").setCacheMode(CACHE)


def _cache_tree(item: QGraphicsItem) -> None:
    """Keep ``item`` and everything under it (a legend's samples, labels and their text) as
    device pixmaps: an item's cache holds only its own painting, not its children's."""
    item.setCacheMode(CACHE)
    for child in item.childItems():
        _cache_tree(child)


def _under_load(values: Mapping, run: RunDescription) -> str:
    """What a request takes with every running copy busy, when that differs from alone (they
    share the chip's memory bandwidth); the throughput is measured that way."""
    n = run.deployment.copies
    decode = run.workload.generating and values.get("per_token_ms") is not None
    keys = ("per_token_ms", "per_token_under_load_ms") if decode else ("latency_ms", "latency_under_load_ms")
    alone, loaded = (values.get(k) for k in keys)
    if n <= 1 or loaded is None or alone is None or loaded <= alone * (1 + 1e-6):
        return ""
    unit = " ms/token" if decode else " ms"
    return f" alone <span style='color:gray'>· {text(keys[1], loaded)}{unit} with {n} copies busy</span>"


# a device profile's header: the figures Neuron Explorer's summary leads with
PROFILE_FIGURES = ("total_time_ms", "mfu_percent", "hfu_percent", "mbu_percent", "tensor_active_percent")
HOST_SHOWN = 0.1  # of a latency: the host's part of it said in the header


def _host_part(values: Mapping, run: RunDescription) -> str:
    """What the host's costs on the host track take of a latency (of each token after the first
    for decode) when they are a sizeable part: an inference's inputs and outputs crossing between
    host and device, an encoder-decoder's generate loop between its steps."""
    decode = run.workload.mode == "decode"
    part_key, whole_key = ("host_per_token_ms", "per_token_ms") if decode else ("host_ms", "latency_ms")
    part, whole = values.get(part_key) or 0.0, values.get(whole_key)
    if not whole or part < HOST_SHOWN * whole:
        return ""
    return f" <span style='color:gray'>(incl. {text(part_key, part)} ms on the host)</span>"


def _workload_text(run: RunDescription) -> str:
    """What ran: the model, mode, sizes, requests and data type."""
    w = run.workload
    out = f"{w.model or '?'} · {w.mode} · batch {w.batch} · seq {w.seq}"
    beams = run.software.config.beams if run.software.config is not None else 1
    if beams > 1:
        out += f" · {beams} beams"
    if w.grad_accum > 1:
        out += f" · {w.grad_accum} micro-batches per step"
    if w.requests > 1 and w.mode == "inference":
        out += f" · {w.requests:,} requests back to back"
    if w.mode == "serve":
        users = f"arriving at {w.rate:g}/s" if w.rate else f"from {w.concurrency or 1} users"
        out += f" · {w.requests:,} requests {users}"
    software = software_label(run.software.config) if run.software.config is not None else ""
    out += (f" · {w.dtype}" if w.dtype else "") + (f" · {software}" if software else "")
    spec = run.speculation
    if spec is not None:  # how it speculates, and whether its acceptance is its own or the published default
        said = "" if spec.stated else ", published default acceptance"
        out += (f" · {spec.method}{' fused' if spec.fused else ''} ×{spec.proposed} "
                f"({spec.tokens_per_step:.2f}&nbsp;tokens/step{said})")
    return out


def _trust(run: Run):
    """A function giving, for a headline figure's key, its class's validation error in the header's
    gray ("±17% (7 rows)", "not validated"; one unbreakable piece; the header's tooltip names each
    class), or nothing for a figure the validation does not compare."""
    errors = headline_errors(run.trace)

    def trust(key: str) -> str:
        if key not in errors:
            return ""
        e = errors[key]
        said = e.brief() if e is not None else "not validated"
        return f" <span style='color:gray'>{said.replace(' ', '&nbsp;')}</span>"

    return trust


def header_html(run: Run, baseline: Run | None) -> str:
    """The pane header: what ran where, and how fast and how cheap, every figure the catalogue's."""
    d, v = run.trace.run, run.measures
    mode = d.workload.mode

    def t(key: str) -> str:
        return text(key, v.get(key))

    if mode == "imported":  # a trace of another tool: no model or price to speak of
        source = run.trace.meta.get("source_file", d.workload.model)
        counts = f"{run.trace.n_events:,} events · {len(run.view.rows)} tracks"
        deeper = run.trace.meta.get("slices_beyond_depth")
        if type(deeper) is int and deeper > 0:
            counts += (f" · <span style='color:gray'>{deeper:,} slices nested deeper than "
                       f"{run.trace.meta.get('depth_rows')} levels are drawn in their thread's last row</span>")
        if not d.measured:
            return f"<b>{run.title}</b> &nbsp; {source}<br>duration {t('latency_ms')} ms · {counts}"
        # a device profile: what the device measured, under the catalogue's names
        where = d.deployment.instance or d.deployment.chip_name
        figures = " · ".join(f"{label(k)} {t(k)}{BY_KEY[k].unit if BY_KEY[k].unit == '%' else ' ' + BY_KEY[k].unit}"
                             for k in PROFILE_FIGURES if v.get(k) is not None)
        return (f"<b>{run.title}</b> &nbsp; {source} &nbsp; <span style='color:gray'>measured on {where}</span><br>"
                f"{figures} · {counts}")
    busy, trust = _under_load(v, d), _trust(run)
    if mode == "serve":
        lat = (f"TTFT p50 {t('ttft_p50_ms')} ms{trust('ttft_p50_ms')}, p99 {t('ttft_p99_ms')} · TPOT p50 "
               f"{t('tpot_p50_ms')} ms{trust('tpot_p50_ms')}, p99 {t('tpot_p99_ms')} · e2e p50 {t('e2e_p50_ms')} ms · "
               f"{t('output_tokens_per_s')} tok/s per copy{trust('output_tokens_per_s')}{busy}")
    elif mode == "decode":
        per_token = ("one token" if v.get("per_token_ms") is None
                     else f"{t('per_token_ms')} ms/token{trust('per_token_ms')}")
        lat = (f"TTFT {t('time_to_first_token_ms')} ms{trust('time_to_first_token_ms')} · {per_token}"
               f"{_host_part(v, d)}{busy} · e2e {t('latency_ms')} ms")
    elif mode == "training":  # one optimizer step of every micro-batch
        lat = f"step {t('latency_ms')} ms{busy}"
    else:
        lat = f"latency {t('latency_ms')} ms{trust('latency_ms')}{_host_part(v, d)}{busy}"
    throughput = f"{t('throughput_per_s')} {unit_of('throughput_per_s', mode)}{trust('throughput_per_s')}"
    # an instance without a published on-demand price (trn2.3xlarge, the UltraServers) says so
    cost = ("no published price" if v.get("cost_per_million_usd") is None
            else f"${t('cost_per_million_usd')} {unit_of('cost_per_million_usd', mode)[2:]}")
    if mode == "training" and v.get("cost_per_step_usd") is not None:
        cost += f" · ${t('cost_per_step_usd')} per step"
    speed = ""
    if baseline is not None and baseline is not run:
        ratio = baseline.metrics.latency_s / run.metrics.latency_s if run.metrics.latency_s else 0.0
        speed = f" · <b>{times(ratio)}</b> vs {baseline.trace.run.deployment.chip or 'baseline'}"  # as in the Summary
    elif baseline is run:
        speed = " · baseline"
    return (f"<b>{run.title}</b> &nbsp; {_workload_text(d)} &nbsp; <span style='color:gray'>"
            f"{_deployment_text(d)}</span><br>{lat} · {throughput} · {cost}{speed}")


def _deployment_text(run: RunDescription) -> str:
    """How the run is laid out: cores per copy, pipeline stages, copies, and instances. A narrow
    header wraps only between these parts (a count stays with its noun)."""
    d = run.deployment
    n, cores = d.data_parallel, d.cores_per_copy  # a training run's copies over all its instances
    text = f"{cores}&nbsp;core{'' if cores == 1 else 's'}/copy"
    if d.pipeline > 1:
        text += f" × {d.pipeline}&nbsp;stages"
    text += f" × {n}&nbsp;cop{'y' if n == 1 else 'ies'}"
    if d.nodes > 1:
        text += f" on {d.nodes}&nbsp;×&nbsp;{d.instance or 'instances'}"
    return text


class _LegendPen:
    """What a legend entry's :class:`LineSample` reads of its curve: the pen, and a visibility
    a click on the sample toggles (a PlotDataItem made only for that took 1-2 ms, 31 of them in
    the demo's first frame)."""

    def __init__(self, pen) -> None:
        self.opts = {"pen": pen}
        self._visible = True

    def isVisible(self) -> bool:  # Qt's name, which ItemSample calls
        return self._visible

    def setVisible(self, visible: bool) -> None:
        self._visible = visible


class LineSample(ItemSample):
    """A counter legend's sample: a short line in the curve's pen, as low as a line of text (the
    default sample is a 20 px square, which made each legend cover most of its band)."""

    def __init__(self, item) -> None:
        super().__init__(item)
        self.setFixedWidth(LEGEND_SAMPLE_PX[0])  # the layout's size for it (the default is 20 x 20)
        self.setFixedHeight(LEGEND_SAMPLE_PX[1])

    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, *LEGEND_SAMPLE_PX)

    def paint(self, p, *args) -> None:
        p.setPen(pg.mkPen(self.item.opts["pen"]))
        w, h = LEGEND_SAMPLE_PX
        p.drawLine(QPointF(0, h / 2), QPointF(w, h / 2))


BUSY, SRAM, BANDWIDTH, LINKS, OTHERS = "busy %", "SRAM %", "GB/s", "link GB/s", "% of peak"
BAND_ORDER = (BUSY, SRAM, BANDWIDTH, LINKS, OTHERS)
SRAM_COUNTERS = (("sbuf_bytes", "dma_read", "SBUF"), ("psum_bytes", "dma_write", "PSUM"))
BANDWIDTH_COUNTERS = (("hbm_read_bytes_per_s", "dma_read", "read"), ("hbm_write_bytes_per_s", "dma_write", "write"),
                      ("hbm_bytes_per_s", "dma_read", "HBM"), ("dma_bytes_per_s", "dma_write", "DMA"))
LINK_COUNTERS = (("neuronlink_bytes_per_s", "neuronlink", "NeuronLink"), ("efa_bytes_per_s", "efa", "EFA"))
NOT_IN_RUN = "none in this run"  # the legend of a band a run of the comparison has and this one not


def _engine_rows(run: Run) -> list[tuple[int, str]]:
    """Each compute engine's first row on the run's first core (a foreign trace may name many alike)."""
    view = run.view
    first_core = run.trace.tracks[view.rows[0]].core if view.rows else 0
    rows_of: dict[str, int] = {}
    for r, (track, kind) in enumerate(zip(view.rows, view.row_kinds, strict=True)):
        if kind in CORE_ENGINES and run.trace.tracks[track].core == first_core:
            rows_of.setdefault(kind, r)
    return [(r, k) for k, r in rows_of.items()]


def _others(run: Run) -> list[Counter]:
    return [c for name, c in run.trace.counters.items()
            if name not in SIMULATOR_COUNTERS and len(c.value)][:MAX_OTHER_COUNTERS]


def _sram(run: Run) -> list[tuple[str, str, str]]:
    c, chip = run.trace.counters, run.hardware
    sizes = {"sbuf_bytes": getattr(chip, "sbuf_bytes", None), "psum_bytes": getattr(chip, "psum_bytes", None)}
    return [(n, k, label) for n, k, label in SRAM_COUNTERS if n in c and sizes[n]]


def bands_of(run: Run) -> list[str]:
    """The counter bands a run's pane draws, in their order: what its trace has data for."""
    c = run.trace.counters
    has = {BUSY: bool(_engine_rows(run)), SRAM: bool(_sram(run)),
           BANDWIDTH: any(n in c for n, _, _ in BANDWIDTH_COUNTERS),
           LINKS: any(n in c and len(c[n].value) for n, _, _ in LINK_COUNTERS), OTHERS: bool(_others(run))}
    return [b for b in BAND_ORDER if has[b]]


def comparison_bands(runs: list[Run]) -> tuple[str, ...]:
    """The bands every pane of a comparison draws: each that any of its runs has, so that the
    panes' bands line up (a band a run has no data for says so)."""
    have = {b for run in runs for b in bands_of(run)}
    return tuple(b for b in BAND_ORDER if b in have)


class ComparisonPane(QWidget):
    """Draws one run; reads the session, never other panes."""

    sig_layer_clicked = Signal(str)
    # right click anywhere on the pane: global position, and the fraction of the shared axis under
    # the pointer (-1 outside the tracks)
    sig_context_menu = Signal(QPoint, float)
    sig_band_room = Signal()  # the counter bands that fit under the timeline changed (bands_fitting)

    def __init__(self, session: Session, run: Run, parent: QWidget | None = None,
                 bands: tuple[str, ...] | None = None) -> None:
        super().__init__(parent)
        self.session, self.run = session, run
        # the comparison's bands (comparison_bands), this run's own when it is shown alone
        self.band_titles = tuple(bands_of(run)) if bands is None else bands
        self.view = run.view
        self.marker_lines: list[pg.InfiniteLine] = []
        self._band_cap: int | None = None  # see set_band_cap
        self._fitting = -1  # the bands that fitted at the last resize
        counters = run.trace.counters
        # executions not stored as events are drawn from their stored twins (sim.metrics.ReplayedIntegral)
        self._counter_integrals = {name: replayed(CounterIntegral(counters[name].t_ns, counters[name].value),
                                                  run.trace)
                                   for name in SIMULATOR_COUNTERS if name in counters and len(counters[name].t_ns)}
        self.header = PhraseHeader()  # a narrow pane reflows its header between phrases, at most cut short
        self.diagram = ChipDiagram()
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(palette().background)
        # the plots' own axes frame them: pyqtgraph's default 9 px around them would cost a short
        # pane its traffic band (1600x900, four panes)
        self.graphics.ci.layout.setContentsMargins(*(GRAPHICS_MARGIN_PX,) * 4)
        self._build_plots()
        self.graphics.installEventFilter(self)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        # a right click reaches the pane as a context menu event (on press or release, as the
        # platform has it), which the plots leave to it
        self.customContextMenuRequested.connect(self._context_menu)
        body = QHBoxLayout()
        body.setContentsMargins(0, 0, 0, 0)
        body.addWidget(self.diagram)
        self.diagram.setVisible(self.run.hardware is not None)  # a trace of another tool has no chip to draw
        body.addWidget(self.graphics, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addLayout(body, 1)
        session.sig_playhead_moved.connect(self.show_playhead)
        session.sig_selection_changed.connect(self.layers.set_selected)
        session.sig_time_mode_changed.connect(self.apply_time_mode)
        session.sig_baseline_changed.connect(self.refresh_header)
        session.sig_area_changed.connect(self.show_area)
        session.sig_search_changed.connect(self.show_search)
        session.sig_markers_changed.connect(self.show_markers)
        self.refresh_header()
        self.apply_time_mode(session.normalised)
        self.layers.set_selected(session.selected_layer)
        self.show_search(session.search)
        self.show_markers()
        self.show_playhead()

    # --- construction -------------------------------------------------------------------
    def _build_plots(self) -> None:
        pal = palette()
        tr, view = self.run.trace, self.view
        n_rows = len(view.rows)
        self.time_axis = TimeAxis()
        self.timeline = self.graphics.addPlot(row=0, col=0, axisItems={"bottom": self.time_axis},
                                              viewBox=AreaViewBox())
        self.timeline.getViewBox().sig_area.connect(self._area_dragged)
        # the axis and a row per track (Layers too), tight enough that a Trn2's extra Collective row
        # leaves room for all three counter bands of a quarter-screen pane
        self.timeline.setMinimumHeight(24 + TRACK_ROW_MIN_PX * (n_rows + 1))
        self.graphics.setMinimumHeight(int(self.timeline.minimumHeight()) + 2 * GRAPHICS_MARGIN_PX)  # never squeezed
        self.timeline.setMouseEnabled(x=True, y=False)
        self.timeline.invertY(True)
        self.timeline.hideButtons()
        self.timeline.setMenuEnabled(False)
        self.timeline.setYRange(-1, n_rows, padding=0.02)
        # a row is its engine's name, or its track's where several rows are of one kind (the DMA
        # queues and the cores of a device profile)
        kinds = collections.Counter(view.row_kinds)
        ticks = [(-0.5, "Layers")] + [(i + 0.5, _row_label(n, depth) if depth >= 0 else ENGINE_LABELS.get(k)
                                       if kinds[k] == 1 and k in ENGINE_LABELS else _short(n)) for i, (k, n, depth) in
                                      enumerate(zip(view.row_kinds, view.row_names, view.row_depth, strict=True))]
        left = self.timeline.getAxis("left")
        left.setTicks([ticks, []])
        left.setWidth(LEFT_AXIS_WIDTH)
        _fixed_labels(self.timeline)
        _cached_y_axis(self.timeline)
        _eager_transform(self.timeline)
        self.timeline.getAxis("bottom").setStyle(showValues=True)
        self._slices_and_flows()
        engine_rows = [r for r, depth in enumerate(view.row_depth) if depth < 0]
        stack = view.row_stack if len(engine_rows) == n_rows else IntegralStack(
            [view.integrals[r] for r in engine_rows])
        self.rows_item = TrackRows(stack, [engine_color(view.row_kinds[r]) for r in engine_rows],
                                   self.run.duration_ns, engine_rows)
        self.timeline.addItem(self.rows_item)
        self.layers = LayerRow(tr.layer_names, tr.layer_start_ns, tr.layer_end_ns, -1.0,
                               (QColor(pal.layer_a), QColor(pal.layer_b)), QColor("#d1495b"), QColor(pal.foreground))
        self.timeline.addItem(self.layers)
        if engine_rows:  # the rows' scale in the corner under their names, left of the time axis
            self.timeline.layout.addItem(ShadeLegend(QColor(pal.background), QColor(pal.foreground),
                                                     QColor(pal.foreground)), 3, 0)
        self.bands: list[Band] = []
        self.curves: list[CurveRaster] = []
        self.legends: list[pg.LegendItem] = []
        self.counters: pg.PlotItem | None = None  # made with the first band
        self._shown_bands = 0
        self._plotted_counters: list[CounterIntegral] = []
        self._engine_band()
        self._memory_bands()
        self._other_counters_band()
        self._counter_stack = IntegralStack(self._plotted_counters)
        self.plots = (self.timeline,)
        if self.counters is not None:
            self.plots += (self.counters,)
            self.band_axis.set_bands(self.bands)
            for legend in self.legends:  # legends are static: cached pixmaps, not repainted per frame
                _cache_tree(legend)
            self._show_bands(len(self.bands))
            self.counters.getViewBox().sigResized.connect(self._fit_legends)
        self._mark_unstored()
        self.area_items = []
        for plot in self.plots:
            region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(AREA_COLOR),
                                         pen=pg.mkPen(AREA_EDGE_COLOR, width=1))
            region.setZValue(-5)
            region.hide()
            plot.addItem(region, ignoreBounds=True)
            self.area_items.append(region)
        pen = pg.mkPen(pal.playhead, width=1.5)
        self.playheads = [pg.InfiniteLine(angle=90, movable=False, pen=pen)]
        self.timeline.addItem(self.playheads[0], ignoreBounds=True)
        if self.counters is not None:  # over the legends, which sit over the curves
            self.playheads.append(ViewLine(self.counters.getViewBox(), pen))
        scene = self.graphics.scene()
        scene.sigMouseMoved.connect(self._hover)
        scene.sigMouseClicked.connect(self._click)

    def _slices_and_flows(self) -> None:
        """Another tool's slices, coloured by name on their rows, and the flows between them."""
        view, tr = self.view, self.run.trace
        ev = tr.events
        rows = view.slice_rows
        events = [view.row_events(r) for r in rows]
        self.slices_item = SliceRows(rows, [ev["start_ns"][e] for e in events],
                                     [ev["start_ns"][e] + ev["dur_ns"][e] for e in events],
                                     [ev["op"][e] for e in events], tr.op_names,
                                     [name_color(n) for n in tr.op_names] if rows else [],  # a simulation has none
                                     self.run.duration_ns)
        self.timeline.addItem(self.slices_item)
        a, b = view.flow_from, view.flow_to
        y = view.row_of_track[ev["track"]] + 0.5 if tr.n_events else np.zeros(0)
        color = QColor(palette().foreground)
        color.setAlpha(FLOW_ALPHA)
        self.flows_item = FlowArrows(ev["start_ns"][a] + ev["dur_ns"][a], y[a], ev["start_ns"][b], y[b], color)
        self.timeline.addItem(self.flows_item)

    def _mark_unstored(self) -> None:
        """Mark the stretches of steps that ran but were not kept as events (a long decode or
        serving run past the events a trace keeps): their rows, curves and chip diagram are drawn
        from an identical stored step. The Layers row says so over each stretch (hover tells
        which steps repeat which); the counter bands are lightly shaded there."""
        pal = palette()
        spans = self.run.trace.unstored_spans
        self.replayed = LayerRow(tuple(f"↻ replayed ×{n:,}" for _, _, n in spans),
                                 np.array([a for a, _, _ in spans]), np.array([b for _, b, _ in spans]), -1.0,
                                 (QColor(pal.grid), QColor(pal.grid)), QColor(pal.grid), QColor(pal.foreground))
        self.timeline.addItem(self.replayed)
        self.unstored_items: list[tuple[pg.LinearRegionItem, float, float]] = []
        for start, end, _ in spans:
            for plot in self.plots[1:]:
                region = pg.LinearRegionItem((start, end), movable=False, brush=pg.mkBrush(UNSTORED_COLOR),
                                             pen=pg.mkPen(None))
                region.setZValue(-6)
                plot.addItem(region, ignoreBounds=True)
                self.unstored_items.append((region, start, end))

    def _counter_bands(self) -> pg.PlotItem:
        """One plot for all counter plots, stacked as bands (see :mod:`neuronviz.items.bands`)."""
        self.band_axis = BandAxis()
        plot = pg.PlotItem(axisItems={"left": self.band_axis}, viewBox=LinkedViewBox())
        plot.setXLink(self.timeline)
        plot.setMouseEnabled(x=True, y=False)
        plot.invertY(True)
        plot.hideButtons()
        plot.setMenuEnabled(False)
        self.band_axis.setWidth(LEFT_AXIS_WIDTH)
        plot.hideAxis("bottom")
        self.band_rules = BandRules(plot.getViewBox(), QColor(palette().grid))
        _fixed_labels(plot)
        _cached_y_axis(plot)
        _eager_transform(plot)
        return plot

    def _band(self, title: str, y_max: float) -> int:
        """Add a band for values in ``[0, y_max]`` under the others; its index."""
        if self.counters is None:
            self.counters = self._counter_bands()
        k = len(self.bands)
        self.bands.append(Band(title, y_max))
        raster = CurveRaster(self.run.duration_ns, y_max)
        raster.setTransform(band_transform(k, y_max))
        self.counters.addItem(raster)
        self.curves.append(raster)
        # on a veil of the background, so the names stay readable where curves run under them
        veil = QColor(palette().background)
        veil.setAlpha(LEGEND_VEIL_ALPHA)
        legend = pg.LegendItem(labelTextSize="7pt", colCount=4, brush=veil, sampleType=LineSample)
        legend.layout.setContentsMargins(2, 0, 2, 0)  # one row of text: the curves under it stay in sight
        legend.setParentItem(self.counters.getViewBox())
        self.legends.append(legend)
        return k

    def _curve(self, band: int, values, kind: str, name: str, color: QColor | None = None) -> None:
        pen = pg.mkPen(color or engine_color(kind), width=1)
        self.curves[band].add(values, color or engine_color(kind))
        legend = self.legends[band]
        legend.addItem(_LegendPen(pen), name)
        label = legend.items[-1][1]
        label.item.document().setDocumentMargin(0)  # the text's own height, not 4 px of air around it
        label.updateMin()
        label.setMaximumHeight(label.minimumHeight())  # not stretched to the legend's earlier height
        legend.updateSize()

    def _counter_series(self, counter: Counter, scale: float):
        """``counter``'s mean per window times ``scale``, as a plot series. The counters of all
        bands are evaluated together, in one stack made once the bands are (``_build_plots``)."""
        k = len(self._plotted_counters)
        self._plotted_counters.append(self._counter_integrals.get(counter.name)
                                      or replayed(CounterIntegral(counter.t_ns, counter.value), self.run.trace))
        return lambda e, tol: scale * self._counter_stack.means(e, tol)[k]

    def _wanted(self, title: str, data: bool) -> int | None:
        """The band ``title`` when the comparison draws it (its index), else None; one this run
        has no data for is drawn empty and says so."""
        if title not in self.band_titles:
            return None
        band = self._band(title, 105.0 if title in (BUSY, SRAM, OTHERS) or not data else self._peak_gbps(title))
        if not data:
            legend = self.legends[band]
            legend.addItem(_LegendPen(pg.mkPen(None)), NOT_IN_RUN)
            legend.updateSize()
        return band

    def _peak_gbps(self, title: str) -> float:
        c = self.run.trace.counters
        names = [n for n, _, _ in (BANDWIDTH_COUNTERS if title == BANDWIDTH else LINK_COUNTERS)
                 if n in c and len(c[n].value)]
        return max(1.0, 1.1 * max((float(c[n].value.max()) for n in names), default=0.0) / 1e9)

    def _engine_band(self) -> None:
        """Busy % of each compute engine (the first core's, like the chip diagram); the rows'
        integrals answer it, with the same columns the rows were just drawn with."""
        rows = self.view.row_stack
        engines = _engine_rows(self.run)
        band = self._wanted(BUSY, bool(engines))
        for r, kind in engines if band is not None else ():
            self._curve(band, lambda e, tol, r=r: 100 * np.clip(rows.means(e, tol)[r], 0.0, 1.0), kind,
                        ENGINE_LABELS[kind])

    def _memory_bands(self) -> None:
        """SBUF/PSUM fill as % of their size, HBM/DDR read and write bandwidth, and the
        collectives' NeuronLink and EFA traffic."""
        c = self.run.trace.counters
        chip = self.run.hardware
        sram = _sram(self.run)
        band = self._wanted(SRAM, bool(sram))
        for name, kind, shown in sram if band is not None else ():
            size = chip.sbuf_bytes if name == "sbuf_bytes" else chip.psum_bytes
            self._curve(band, self._counter_series(c[name], 100 / size), kind, shown)
        bandwidth = [(n, k, shown) for n, k, shown in BANDWIDTH_COUNTERS if n in c]
        band = self._wanted(BANDWIDTH, bool(bandwidth))
        for name, kind, shown in bandwidth if band is not None else ():
            self._curve(band, self._counter_series(c[name], 1e-9), kind, shown)
        links = [(n, k, shown) for n, k, shown in LINK_COUNTERS if n in c and len(c[n].value)]
        band = self._wanted(LINKS, bool(links))  # collective traffic leaving the chip and the instance
        for name, kind, shown in links if band is not None else ():
            self._curve(band, self._counter_series(c[name], 1e-9), kind, shown)

    def _other_counters_band(self) -> None:
        """Counters of other tools (a trace imported from Chrome JSON), each as % of its own peak."""
        others = _others(self.run)
        band = self._wanted(OTHERS, bool(others))
        for i, ctr in enumerate(others if band is not None else ()):
            peak = float(np.max(np.abs(ctr.value))) or 1.0
            self._curve(band, self._counter_series(ctr, 100 / peak), "other", _short(ctr.name, 24),
                        QColor(OTHER_COUNTER_COLORS[i % len(OTHER_COUNTER_COLORS)]))

    def eventFilter(self, watched, event) -> bool:
        if watched is self.graphics and event.type() == QEvent.Type.Resize:
            # the chip diagram, as tall as the plots, is left out where its gauges would not fit or
            # it would leave the timeline too narrow to read
            self.diagram.setVisible(self.run.hardware is not None and event.size().height() >= DIAGRAM_MIN_HEIGHT
                                    and self.width() >= self.diagram.sizeHint().width() + TIMELINE_MIN_WIDTH)
            if self.bands:
                fitting = self.bands_fitting()
                self._show_bands(fitting if self._band_cap is None else min(fitting, self._band_cap))
                if fitting != self._fitting:
                    self._fitting = fitting
                    self.sig_band_room.emit()
        return False

    def retire(self) -> None:
        """Stop reacting to resizes and saying so: the pane is about to be deleted, and its plots
        may go before its view does."""
        self.graphics.removeEventFilter(self)
        self.sig_band_room.disconnect()

    def bands_fitting(self) -> int:
        """How many of the counter bands fit under the timeline, in order."""
        layout = self.graphics.ci.layout
        margins = layout.getContentsMargins()
        room = self.graphics.height() - self.timeline.minimumHeight() - margins[1] - margins[3]
        return max(0, min(len(self.bands), int(room // (COUNTER_BAND_MIN_HEIGHT + layout.verticalSpacing()))))

    def set_band_cap(self, n: int | None) -> None:
        """Show at most ``n`` counter bands (None: as many as fit), so that the panes of a
        comparison show the same ones: the window gives each the fewest that fit in any."""
        self._band_cap = n
        if self.bands:
            self._show_bands(self.bands_fitting() if n is None else min(n, self.bands_fitting()))
            self.graphics.ci.layout.activate()  # laid out now, not at the next turn of the event loop

    def _fit_legends(self, *_: object) -> None:
        """Counter legends in as many columns as fit the bands' width: a narrow pane stacks their
        entries in rows instead of cutting off the first ones at its left edge."""
        room = self.counters.getViewBox().width() - LEGEND_MARGIN_PX
        for legend in self.legends:
            columns = len(legend.items)
            legend.setColumnCount(columns)
            while columns > 1 and legend.boundingRect().width() > room:
                columns = -(-columns // 2)
                legend.setColumnCount(columns)
            legend.layout.activate()  # its rows at their labels' heights before it measures them
            legend.updateSize()

    def _show_bands(self, n: int) -> None:
        if n == self._shown_bands:
            return
        if n == 0:
            self.graphics.ci.removeItem(self.counters)
        elif self._shown_bands == 0:
            self.graphics.ci.addItem(self.counters, row=1, col=0)
        self.counters.setVisible(n > 0)
        if n:  # as tall as separate plots would be: a band each and the spacing between them
            spacing = self.graphics.ci.layout.verticalSpacing()
            self.counters.setMinimumHeight(n * COUNTER_BAND_MIN_HEIGHT + (n - 1) * spacing)
            self.counters.setMaximumHeight(n * COUNTER_BAND_HEIGHT + (n - 1) * spacing)
            self.counters.setPreferredHeight(self.counters.maximumHeight())
            self.counters.setYRange(0, n, padding=0)
            self.band_rules.set_bands(n)
        for k, legend in enumerate(self.legends):
            legend.setVisible(k < n)
            if k < n:
                legend.anchor(itemPos=(1, 0), parentPos=(1, k / n), offset=(-4, 2))
        self._shown_bands = n

    # --- session reactions --------------------------------------------------------------
    def refresh_header(self, *_: object) -> None:
        runs = self.session.runs
        baseline = runs[self.session.baseline] if runs else None
        validated = headline_text(self.run.trace)  # each figure's class, named in full
        self.header.set_text(header_html(self.run, baseline),
                             f"<p>Validated against published measurements: {validated}</p>" if validated else "")

    def apply_time_mode(self, normalised: bool) -> None:
        scale = 1.0 / self.run.duration_ns if normalised else 1.0
        self.time_axis.set_normalised(normalised)
        self.rows_item.set_x_scale(scale)
        self.slices_item.set_x_scale(scale)
        self.flows_item.set_x_scale(scale)
        self.layers.set_x_scale(scale)
        self.replayed.set_x_scale(scale)
        for item in self.curves:
            item.set_x_scale(scale)
        for region, start, end in self.unstored_items:
            region.setRegion((start * scale, end * scale))
        self.show_playhead()
        self.show_area()
        self.show_markers()

    def show_search(self, text: str) -> None:
        self.layers.set_matches(self.view.find_layers(text))

    def show_area(self, *_: object) -> None:
        area = self.session.area_of(self.run)
        for region in self.area_items:
            region.setVisible(area is not None)
            if area is not None:
                region.setRegion((area[0] * self.x_scale(), area[1] * self.x_scale()))

    def _to_fraction(self) -> float:
        """Factor from this run's time (ns) to a fraction of the shared axis."""
        return 1.0 / self.run.duration_ns if self.session.normalised else 1.0 / self.session.max_duration_ns

    def _area_dragged(self, a: float, b: float, finished: bool) -> None:
        """A drag on the timeline selects that window in every pane (x is in this pane's units)."""
        to_fraction = 1.0 if self.session.normalised else 1.0 / self.session.max_duration_ns
        self.session.set_area(a * to_fraction, b * to_fraction)

    def show_markers(self, *_: object) -> None:
        for line in self.marker_lines:
            if line.getViewBox() is not None:
                line.getViewBox().removeItem(line)
        self.marker_lines = []
        pal = palette()
        pen = pg.mkPen(pal.foreground, width=1, style=Qt.PenStyle.DashLine)
        label = {"position": 0.03,  # the timeline counts rows downwards: near its top
                  "color": pal.foreground, "fill": pal.background}
        for n, f in enumerate(self.session.markers, 1):
            x = self.session.time_of(self.run, f) * self.x_scale()
            for k, plot in enumerate(self.plots):
                line = pg.InfiniteLine(x, angle=90, movable=False, pen=pen,
                                       label=str(n) if k == 0 else None, labelOpts=label)
                plot.addItem(line, ignoreBounds=True)
                self.marker_lines.append(line)

    def x_scale(self) -> float:
        return 1.0 / self.run.duration_ns if self.session.normalised else 1.0

    def show_playhead(self, *_: object) -> None:
        t = self.session.time_of(self.run)
        x = t * self.x_scale()
        for line in self.playheads:
            line.setValue(x)
        self.diagram.set_state(self.chip_state(t))

    def chip_state(self, t_ns: float) -> ChipState:
        """The chip diagram at time ``t_ns`` of this run; past its end (a longer run of the
        comparison still playing), the run's last moments, said to be done."""
        chip = self.run.hardware  # what the run says it ran on
        window = ACTIVITY_WINDOW * self.run.duration_ns
        done = t_ns >= self.run.duration_ns
        at_ns = min(t_ns, self.run.duration_ns - window / 2)  # a window that ends with the run holds its last state
        activity = self.view.activity(at_ns, window)

        def mean(name: str) -> float:
            """The counter's mean over the same window as the engines' activity (not its value at one
            instant, which flickers between a transfer and the gap after it)."""
            ci = self._counter_integrals.get(name)
            return ci.window_mean(at_ns - window / 2, at_ns + window / 2) if ci is not None else 0.0

        sbuf = mean("sbuf_bytes") / chip.sbuf_bytes if chip else 0.0
        psum = mean("psum_bytes") / chip.psum_bytes if chip else 0.0
        # the trace's core stands for every core of the chip running the same work: the chip's traffic
        on_chip = self.run.trace.run.deployment.cores_active if chip else 1
        peak = chip.memory_bytes_per_s if chip else 1e12
        engines = tuple(k for k in ("tensor", "vector", "scalar", "gpsimd") if k in self.view.row_kinds
                        or (chip is not None and (k != "gpsimd" or chip.gpsimd)))
        return ChipState(
            title=self.run.title, cores=chip.cores if chip else 1,
            active=on_chip if chip else None, engines=engines,
            activity=activity, sbuf_fill=sbuf, psum_fill=psum,
            memory_kind=chip.memory_kind if chip else "memory",
            read_bytes_per_s=on_chip * mean("hbm_read_bytes_per_s"),
            write_bytes_per_s=on_chip * mean("hbm_write_bytes_per_s"),
            peak_bytes_per_s=peak, **self._topology_state(chip, mean), **self._requests_state(t_ns), done=done,
        )

    def _requests_state(self, t_ns: float) -> dict:
        """For a stream of requests back to back: how many each copy has finished by ``t_ns``; for
        a serving run, how many of its requests and how many tokens its copy has produced."""
        m = self.run.trace.meta
        if m.get("mode") == "serve" and m.get("serving"):
            finish, first, steps, made = self._served
            done = int(np.searchsorted(finish, t_ns, side="right"))
            tokens = int(np.searchsorted(first, t_ns, side="right"))
            k = int(np.searchsorted(steps, t_ns, side="right"))
            tokens += int(made[k - 1]) if k else 0
            return {"requests_done": done, "requests_total": len(finish), "request_items": 1,
                    "tokens_done": max(tokens, 0)}
        w = self.run.trace.run.workload
        total = w.requests if w.mode == "inference" else 1
        phases = m.get("phases") or []
        if total <= 1 or not phases:
            return {}
        start, end = phases[0]["start_ns"], phases[0]["end_ns"]
        period = (end - start) / total if end > start else 1.0
        done = int(min(total, max(0.0, (t_ns - start) / period + 1e-9)))
        return {"requests_done": done, "requests_total": total, "request_items": w.batch}

    @cached_property
    def _served(self) -> tuple[np.ndarray, ...]:
        """A serving run's finish and first-token times sorted, its token steps' ends and the
        tokens produced by each (cumulative)."""
        s = self.run.trace.meta["serving"]
        return (np.sort(np.asarray(s["finish_ns"], float)), np.sort(np.asarray(s["first_token_ns"], float)),
                np.asarray(s["step_end_ns"], float), np.cumsum(np.asarray(s["step_tokens"], np.int64)))

    def _topology_state(self, chip, mean) -> dict:
        """The instance's chips and links for a run over several chips (or instances), else nothing."""
        run = self.run.trace.run
        d = run.deployment
        if chip is None or chip.topology is None:
            return {}
        shards = d.shards * d.pipeline
        copies = d.data_parallel // max(1, d.nodes) if run.workload.mode == "training" else 1
        used = min(chip.instance_chips, -(-shards * max(1, copies) // chip.cores))
        if chip.instance_chips < 2 or (used < 2 and d.nodes < 2):
            return {}
        return dict(topology=chip.topology, topology_dims=chip.topology_dims, chips_used=used,
                    link_bytes_per_s=mean("neuronlink_bytes_per_s"), link_peak_bytes_per_s=chip.link_bytes_per_s,
                    nodes=d.nodes, efa_bytes_per_s=mean("efa_bytes_per_s"),
                    efa_peak_bytes_per_s=chip.efa_bytes_per_s or 1.0)

    # --- mouse --------------------------------------------------------------------------
    def _context_menu(self, pos: QPoint) -> None:
        at = self._fraction_at(self.graphics.viewport().mapFrom(self, pos))
        self.sig_context_menu.emit(self.mapToGlobal(pos), at)

    def _fraction_at(self, viewport_pos: QPoint) -> float:
        """The fraction of the shared axis at a point of the plots' viewport; -1 off the tracks."""
        scene_pos = self.graphics.mapToScene(viewport_pos)
        for plot in self.plots:
            vb = plot.getViewBox()
            if vb.sceneBoundingRect().contains(scene_pos):
                t_ns = vb.mapSceneToView(scene_pos).x() / self.x_scale()
                return min(1.0, max(0.0, t_ns * self._to_fraction()))
        return -1.0

    def _data_point(self, scene_pos: QPointF) -> tuple[float, float] | None:
        vb = self.timeline.getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = vb.mapSceneToView(scene_pos)
        return p.x() / self.x_scale(), p.y()

    def _ns_per_px(self) -> float:
        return self.timeline.getViewBox().viewPixelSize()[0] / self.x_scale()

    def _event_near(self, row: int, t_ns: float):
        """The event of ``row`` under the pointer at ``t_ns``, or the nearest a few pixels off it."""
        return self.view.event_at(row, t_ns, HOVER_SLACK_PX * self._ns_per_px())

    def _hover(self, scene_pos: QPointF) -> None:
        hit = self._data_point(scene_pos)
        if hit is None:
            QToolTip.hideText()
            return
        t, y = hit
        text = ""
        if -1.0 <= y < 0.0:
            i = self.layers.span_at(t)
            if i >= 0:
                tr = self.run.trace
                text = (f"<b>{tr.layer_names[i]}</b><br>start {duration(tr.layer_start_ns[i])}"
                        f"<br>duration {duration(tr.layer_end_ns[i] - tr.layer_start_ns[i])}<br>click to compare")
            else:
                text = self._replay_text(t)
        elif 0 <= int(np.floor(y)) < len(self.view.rows):
            text = self._row_text(int(np.floor(y)), t)
        if text:
            QToolTip.showText(self.graphics.mapToGlobal(self.graphics.mapFromScene(scene_pos)), text, self.graphics)
        else:
            QToolTip.hideText()

    def _slice_text(self, row: int, t_ns: float) -> str:
        """A slice row under the pointer: the slice there (or nearest it), the slices holding it and
        the flows leaving and entering it."""
        info = self._event_near(row, t_ns)
        if info is None:
            return ""
        text = (f"<b>{escape(info.op)}</b> ({escape(_short(info.track, 40))})<br>start {duration(info.start_ns)}"
                f" · duration {duration(info.dur_ns)}<br>category {escape(info.layer)}")
        ancestors = self.view.ancestors(row, info)
        if ancestors:
            text += "<br>in " + " ‹ ".join(f"<b>{escape(a.op)}</b>" if k == 0 else escape(a.op)
                                           for k, a in enumerate(ancestors))
        flows = self.view.flows_at(info.event)
        for f in flows[:MAX_FLOWS_LISTED]:
            where = f"{escape(f.other.op)} ({escape(_short(f.other.track, 40))}) at {duration(f.other.start_ns)}"
            text += f"<br>flow {escape(f.name)} {'→ to' if f.outgoing else '← from'} {where}"
        if len(flows) > MAX_FLOWS_LISTED:
            text += f"<br>and {len(flows) - MAX_FLOWS_LISTED:,} more flows"
        return text

    def _row_text(self, row: int, t_ns: float) -> str:
        """An engine row under the pointer: the event there (or nearest it), how busy the engine is
        in the pixel under the pointer, and whether that step was replayed."""
        if self.view.row_depth[row] >= 0:
            return self._slice_text(row, t_ns)
        info = self._event_near(row, t_ns)
        text = "" if info is None else (
            f"<b>{info.op}</b> ({info.track})<br>layer {info.layer}<br>start {duration(info.start_ns)}"
            f" · duration {duration(info.dur_ns)}<br>{_fmt_si(info.flops, 'FLOP')} · {_fmt_si(info.nbytes, 'B')}<br>")
        px = self._ns_per_px()
        busy = min(1.0, max(0.0, self.view.integrals[row].window_mean(t_ns - px / 2, t_ns + px / 2)))
        name = ENGINE_LABELS.get(self.view.row_kinds[row]) or _short(self.view.row_names[row])
        text += (f"{name} busy {100 * busy:.3g}% of this pixel's {duration(px)}"
                 f"<br><span style='color:gray'>{SHADE_HELP}</span>")
        replay = self._replay_text(t_ns)
        return text + (f"<br>{replay}" if replay else "")

    def _replay_text(self, t_ns: float) -> str:
        """What a newcomer needs to know about a step that was replayed, not stored, at ``t_ns``."""
        r = self.view.replay_at(t_ns)
        if r is None:
            return ""
        twin = ("its step 1" if r.twin_phase == r.phase and r.first > 1
                else f"step 1 of “{r.twin_phase}” at {duration(r.twin_start_ns)}")
        return (f"<b>Replayed</b>: steps {r.first:,}–{r.last:,} of “{r.phase}” repeat the events of {twin} "
                f"(stored once, drawn again for each; not stored as events of their own). This is step {r.step:,}; "
                "the time and work of every step count in every figure.")

    def _click(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        hit = self._data_point(event.scenePos())
        if hit is None:
            return
        t, y = hit
        if -1.0 <= y < 0.0:
            i = self.layers.span_at(t)
            name = self.run.trace.layer_names[i] if i >= 0 else ""
        else:  # an engine event selects the layer it belongs to
            info = self._event_near(int(np.floor(y)), t)
            name = info.layer if info is not None else ""
        self.session.select_layer(name)
        self.sig_layer_clicked.emit(name)
