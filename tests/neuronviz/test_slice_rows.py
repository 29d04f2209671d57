"""Another tool's slices drawn as Perfetto draws them: stacked rows, colour by name, flows, hover."""

import json

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QToolTip

from neuronviz.items.flows import FlowArrows
from neuronviz.items.raster import SliceRows, TrackRows
from neuronviz.theme import SLICE_COLORS, name_color
from neuronviz.trace_view import TraceView
from sim.integrals import BusyIntegral, IntegralStack
from sim.io.chrome import load_chrome
from tests.neuronviz.test_app import _grab


def _profile(tmp_path):
    """ProfilerStep > aten::linear > aten::addmm > cudaLaunchKernel, a kernel, a flow and an async slice."""
    x = {"ph": "X", "pid": 1, "tid": 1, "cat": "cpu_op"}
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "MainThread"}},
        {**x, "name": "ProfilerStep#1", "ts": 0, "dur": 1000},
        {**x, "name": "aten::linear", "ts": 100, "dur": 600},
        {**x, "name": "aten::addmm", "ts": 150, "dur": 400},
        {**x, "name": "cudaLaunchKernel", "ts": 200, "dur": 50},
        {"ph": "X", "name": "kernel", "pid": 2, "tid": 7, "ts": 300, "dur": 200},
        {"ph": "s", "id": 1, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 200},
        {"ph": "f", "id": 1, "cat": "ac2g", "name": "ac2g", "pid": 2, "tid": 7, "ts": 300, "bp": "e"},
        {"ph": "b", "id": 5, "cat": "io", "name": "fetch", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "e", "id": 5, "cat": "io", "name": "fetch", "pid": 1, "tid": 1, "ts": 800},
    ]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_name_colours_are_stable_and_ignore_numbers():
    assert name_color("ProfilerStep#1") == name_color("ProfilerStep#27")
    assert name_color("aten::addmm").name().upper() in SLICE_COLORS
    assert len({name_color(n).name() for n in ("aten::addmm", "aten::linear", "cudaLaunchKernel", "kernel")}) > 1


def test_a_slice_view_keeps_the_importers_rows_and_finds_parents_and_flows(tmp_path):
    [trace] = load_chrome(_profile(tmp_path))
    view = TraceView(trace)
    assert view.row_names == ["Process 1 / fetch", "Process 1 / MainThread", "Process 1 / MainThread ·1",
                              "Process 1 / MainThread ·2", "Process 1 / MainThread ·3", "Process 2 / Thread 7"]
    assert view.row_depth == [0, 0, 1, 2, 3, 0] and view.slice_rows == [0, 1, 2, 3, 4, 5]
    launch = view.event_at(4, 225_000.0)
    assert launch.op == "cudaLaunchKernel"
    assert [a.op for a in view.ancestors(4, launch)] == ["aten::addmm", "aten::linear", "ProfilerStep#1"]
    [flow] = view.flows_at(launch.event)
    assert flow.outgoing and flow.name == "ac2g" and flow.other.op == "kernel"
    [back] = view.flows_at(flow.other.event)
    assert not back.outgoing and back.other.op == "cudaLaunchKernel"


def test_a_damaged_slice_layout_is_ignored(tmp_path):
    from sim.trace import Trace

    [trace] = load_chrome(_profile(tmp_path))
    for bad in ({"track_depth": [0, 2, 1, 0, 0, 0]}, {"flows": {"from": [0], "to": [999], "names": ["x"], "name": [0]}},
                {"flows": {"from": "x"}}, {"track_depth": "deep"}):
        meta = {**trace.meta, **bad}
        view = TraceView(Trace(meta=meta, tracks=trace.tracks, events=trace.events, op_names=trace.op_names,
                               op_layer=trace.op_layer, layer_names=trace.layer_names, layer_kinds=trace.layer_kinds,
                               layer_start_ns=trace.layer_start_ns, layer_end_ns=trace.layer_end_ns))
        assert not len(view.flow_from)
        assert view.row_depth == ([-1] * 6 if "track_depth" in bad else [0, 0, 1, 2, 3, 0])


def _plot(item, width=400, height=100, x_range=(0.0, 1000.0), rows=1):
    view = pg.PlotWidget()
    view.setBackground("#ffffff")
    view.hideAxis("left")
    view.hideAxis("bottom")
    view.invertY(True)  # row 0 on top, as on the timeline
    view.addItem(item)
    view.setXRange(*x_range, padding=0)
    view.setYRange(0, rows, padding=0)
    view.resize(width, height)
    return view


def test_slices_are_drawn_in_their_names_colour_at_full_opacity_and_nothing_between(qapp):
    colors = [QColor("#4E79A7"), QColor("#E15759")]
    rows = SliceRows([0], [np.array([0.0, 600.0])], [np.array([300.0, 900.0])], [np.array([0, 1])],
                     ("a", "b"), colors, 1000.0)
    pixels = _grab(_plot(rows)).astype(int)
    h, w = pixels.shape[:2]
    middle = pixels[h // 2]
    assert (middle[int(0.15 * w)] == [0x4E, 0x79, 0xA7]).all()  # all of "a"'s colour, not a shade of it
    assert (middle[int(0.75 * w)] == [0xE1, 0x57, 0x59]).all()
    assert (middle[int(0.45 * w)] == [255, 255, 255]).all()  # no slice: the background
    assert (middle[int(0.95 * w)] == [255, 255, 255]).all()


def test_a_slice_far_narrower_than_a_pixel_still_colours_its_pixel(qapp):
    rows = SliceRows([0], [np.array([500.0])], [np.array([500.0])], [np.array([0])], ("mark",),
                     [QColor("#59A14F")], 1000.0)
    image = rows.rasterise(0.0, 1000.0, 100)
    assert np.flatnonzero(image[0]).tolist() == [50] and image[0, 50] == 0xFF59A14F


def test_an_engine_rows_idle_pixels_stay_the_background_beside_slice_rows(qapp):
    """An engine row under a slice row: idle time is the background, busy time its colour."""
    busy = IntegralStack([BusyIntegral(np.array([0.0]), np.array([500.0]))])
    engine = TrackRows(busy, [QColor("#0072B2")], 1000.0, ys=[1])
    slices = SliceRows([0], [np.array([0.0])], [np.array([1000.0])], [np.array([0])], ("step",), [QColor("#F28E2B")],
                       1000.0)
    view = _plot(engine, rows=2)
    view.addItem(slices)
    pixels = _grab(view).astype(int)
    h, w = pixels.shape[:2]
    top, bottom = pixels[h // 4], pixels[3 * h // 4]
    assert (top[int(0.75 * w)] == [0xF2, 0x8E, 0x2B]).all()
    assert (bottom[int(0.25 * w)] == [0x00, 0x72, 0xB2]).all()
    assert (bottom[int(0.75 * w)] == [255, 255, 255]).all()


def test_flow_arrows_in_view_are_the_earliest_and_capped(qapp, monkeypatch):
    import neuronviz.items.flows as flows

    n = 10
    arrows = FlowArrows(np.arange(n) * 100.0, np.zeros(n), np.arange(n) * 100.0 + 50, np.ones(n), QColor("black"))
    assert arrows.in_view(120.0, 360.0).tolist() == [1, 2, 3]
    monkeypatch.setattr(flows, "MAX_ARROWS", 2)
    assert arrows.in_view(0.0, 1000.0).tolist() == [0, 1]
    pixels = _grab(_plot(arrows, x_range=(0.0, 200.0))).astype(int)
    assert (pixels.sum(axis=2) < 200).sum() > 20  # the lines are drawn


def test_a_profile_opens_as_stacked_rows_and_hover_names_the_parent(demo_window, qtbot, tmp_path):
    assert demo_window.open_files([str(_profile(tmp_path))])
    (pane,) = demo_window.panes
    labels = [label for _, label in pane.timeline.getAxis("left")._tickLevels[0]]
    assert labels == ["Layers", "fetch", "MainThread", "MainThr… ·1", "MainThr… ·2", "MainThr… ·3", "Thread 7"]
    assert pane.slices_item.ys == [0, 1, 2, 3, 4, 5] and pane.rows_item.ys == []
    assert len(pane.flows_item.x0) == 1 and pane.flows_item.x0[0] == 250_000.0  # from the launch's end
    pane.timeline.setXRange(0, 1_000_000, padding=0)
    qtbot.wait(10)
    pane._hover(pane.timeline.getViewBox().mapViewToScene(QPointF(400_000.0, 3.5)))
    text = QToolTip.text()
    assert "<b>aten::addmm</b>" in text and "in <b>aten::linear</b> ‹ ProfilerStep#1" in text
    pane._hover(pane.timeline.getViewBox().mapViewToScene(QPointF(225_000.0, 4.5)))
    assert "flow ac2g → to kernel" in QToolTip.text()
    # the colour of aten::addmm fills its row at full opacity
    pixels = _grab(pane.graphics).astype(int)
    rgb = np.array(name_color("aten::addmm").getRgb()[:3])
    assert (np.abs(pixels - rgb).sum(axis=2) == 0).sum() > 500
