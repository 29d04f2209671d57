"""The analysis in the app: the roofline, the operator table with its deltas, insights that zoom the
panes, and regions compared across runs."""

import math

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget

from neuronviz.widgets.operators import delta_color
from neuronviz.widgets.regions import COLLECTIVES, KIND_PREFIX, WHOLE, WINDOW
from sim.catalogue import number


def show(window, title):
    window.findChild(QDockWidget, title).raise_()
    QGuiApplication.processEvents()


def test_a_tab_behind_another_is_analysed_only_when_brought_forward(demo_window):
    """The window opens on the Summary; the tabs behind it are shown with the window but nothing
    of them is on screen, so their analysis waits (it took 0.6 s of the demo's launch)."""
    views = {"Roofline": demo_window.roofline, "Operators": demo_window.operators,
             "Regions": demo_window.regions, "Requests": demo_window.requests}
    QGuiApplication.processEvents()
    assert not any(v.shown for v in views.values()) and demo_window.roofline.marks == []
    show(demo_window, "Roofline")
    assert demo_window.roofline.shown and demo_window.roofline.marks
    assert not demo_window.operators.shown
    show(demo_window, "Operators")
    assert demo_window.operators.shown


def test_a_tab_behind_another_is_made_only_when_brought_forward(demo_window):
    """The Scaling, Sweep, Roofline and Requests views are made when their tab is first shown (or
    a view of the window asks for one), not with the window."""
    from neuronviz.widgets.scaling import ScalingView
    from neuronviz.widgets.sweep_view import SweepView

    QGuiApplication.processEvents()
    dock = {title: demo_window.findChild(QDockWidget, title) for title in ("Scaling", "Sweep", "Roofline", "Requests")}
    assert not any(isinstance(d.widget(), ScalingView | SweepView) for d in dock.values())
    show(demo_window, "Scaling")
    assert isinstance(dock["Scaling"].widget(), ScalingView) and dock["Scaling"].widget().isVisible()
    assert dock["Scaling"].widget() is demo_window.scaling and not isinstance(dock["Sweep"].widget(), SweepView)
    assert isinstance(demo_window.sweep, SweepView) and dock["Sweep"].widget() is demo_window.sweep


def test_the_roofline_marks_every_layer_of_every_run_under_its_roofs(demo_window):
    show(demo_window, "Roofline")
    view = demo_window.roofline
    runs = demo_window.session.runs
    assert {m.run for m in view.marks} == set(range(len(runs)))
    for m in view.marks:  # no mark above its run's roofs
        roofs = runs[m.run].analysis.roofs
        peak = roofs.compute[runs[m.run].trace.meta["matmul_dtype"]]
        assert m.flops_per_s <= min(peak, m.intensity * roofs.memory_bytes_per_s) * 1.001
    layers = {m.name for m in view.marks if m.run == 0}
    assert "layer5.mlp" in layers and len(view.scatter.data) == len(view.marks)


def test_clicking_a_roofline_mark_selects_the_layer_in_the_table_and_the_panes(demo_window, qtbot):
    show(demo_window, "Operators")  # the table fills when first shown
    show(demo_window, "Roofline")
    view = demo_window.roofline
    mark = max((m for m in view.marks if m.run == 3 and m.name.endswith(".mlp")), key=lambda m: m.share)
    pos = view.view_pos_of(mark)
    qtbot.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(round(pos.x()), round(pos.y())))
    under = {m.layer for m in view.marks if (view.view_pos_of(m) - pos).manhattanLength() < 3}
    assert demo_window.session.selected_layer in under  # identical layers share one spot: one of them
    mark = next(m for m in view.marks if m.layer == demo_window.session.selected_layer)
    session = demo_window.session
    assert session.selected_layer == mark.layer
    for pane in demo_window.panes:
        assert pane.run.trace.layer_names[pane.layers.selected] == mark.layer
    table = demo_window.operators
    assert table.tree.currentIndex().data() == mark.layer
    assert len(view.op_marks) > 0 and {m.layer for m in view.op_marks} == {mark.layer}


def test_the_operator_table_lists_layers_and_ops_with_deltas_against_the_run(demo_window):
    show(demo_window, "Operators")
    table = demo_window.operators
    base = demo_window.session.runs[0]
    assert table.model.rowCount() == len(base.analysis.layers)
    headers = [table.model.headerData(c, Qt.Orientation.Horizontal) for c in range(table.model.columnCount())]
    assert headers[:3] == ["layer / op", "time µs", "share %"] and "Δ 4 vs 1" in headers
    row = next(r for r in range(table.model.rowCount()) if table.model.item(r, 0).text() == "layer5.mlp")
    layer = next(s for s in base.analysis.layers if s.name == "layer5.mlp")
    assert table.model.item(row, 1).text() == number(layer.time_ns / 1e3)  # as the Regions tab writes it
    assert table.model.item(row, 0).rowCount() == len(layer.ops) > 1
    other = next(s for s in demo_window.session.runs[3].analysis.layers if s.name == "layer5.mlp")
    delta = table.model.item(row, headers.index("Δ 4 vs 1"))
    assert f"({100 * (other.time_ns / layer.time_ns - 1):+.0f}%)" in delta.text()
    assert delta.background().color().green() > delta.background().color().red()  # trn2 is faster: green


def test_the_operator_table_shows_a_decode_runs_layer_names_whole(demo_window, tmp_path):
    """A decode run's rows are named by phase and layer ("decode ctx 1152/layer18.mlp"): the name
    column was 160 px wide whatever its names, and cut them to "decode ctx 1152/la..."."""
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    path = tmp_path / "decode.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="gpt2", chip="inf2", mode="decode", seq=1000, new_tokens=4))])
    assert demo_window.open_files([str(path)])
    demo_window.resize(1600, 900)
    show(demo_window, "Operators")
    table = demo_window.operators
    names = [table.model.item(r, 0).text() for r in range(table.model.rowCount())]
    widest = max(table.tree.fontMetrics().horizontalAdvance(n) for n in names)
    assert widest > 160 and table.tree.columnWidth(0) > widest


def test_delta_colours_saturate_at_twice_the_time():
    assert delta_color(0.5).alphaF() == pytest.approx(delta_color(0.1).alphaF())
    assert delta_color(2.0).alphaF() == pytest.approx(delta_color(9.0).alphaF())
    assert delta_color(1.2).alphaF() < delta_color(1.9).alphaF()
    assert delta_color(0.5).name() != delta_color(2.0).name()


def test_the_operator_table_filters_sorts_and_copies(demo_window):
    show(demo_window, "Operators")
    table = demo_window.operators
    table.filter.setText("layer7.")
    assert table.proxy.rowCount() == 2
    table.filter.setText("softmax")  # an op name: its layers stay, to be expanded
    assert table.proxy.rowCount() == 24
    table.filter.clear()
    table.tree.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    times = [table.proxy.index(r, 1).data(Qt.ItemDataRole.UserRole + 1) for r in range(table.proxy.rowCount())]
    assert times == sorted(times, reverse=True)
    table.tree.selectionModel().select(table.proxy.index(0, 0), table.tree.selectionModel().SelectionFlag.Rows
                                       | table.tree.selectionModel().SelectionFlag.ClearAndSelect)
    table.copy_selection()
    lines = QGuiApplication.clipboard().text().splitlines()
    assert lines[0].startswith("layer / op\ttime µs") and len(lines) == 2
    assert lines[1].split("\t")[0] == table.proxy.index(0, 0).data()


def test_clicking_an_insight_zooms_the_panes_to_its_layers(demo_window):
    show(demo_window, "Operators")
    table = demo_window.operators
    assert table.insight_list.count() >= 1 and table.found
    first = table.found[0]
    table._insight_clicked(table.insight_list.item(0))
    session = demo_window.session
    assert session.selected_layer == first.layers[0]
    run = session.runs[0]
    a, b = session.area_of(run)
    assert (a, b) == (pytest.approx(first.start_us * 1e3), pytest.approx(first.end_us * 1e3))
    (x0, x1), _ = demo_window.panes[0].timeline.viewRange()
    assert x0 <= a and b <= x1 and (x1 - x0) < 1.2 * (b - a)


def test_regions_compare_across_runs_and_add_up_to_their_events(demo_window):
    show(demo_window, "Regions")
    view = demo_window.regions
    session = demo_window.session
    session.set_area(0.1, 0.3)
    view.set_regions(WINDOW, KIND_PREFIX + "mlp", WHOLE)
    runs = session.runs
    assert view.table.columnCount() == 3 * len(runs)
    from neuronviz.widgets.regions import region

    run = runs[0]
    a, b = session.area_of(run)
    window = region(run, WINDOW, session)
    ev = run.trace.events
    overlap = np.clip(np.minimum(ev["start_ns"] + ev["dur_ns"], b) - np.maximum(ev["start_ns"], a), 0, None)
    expected = np.sum(ev["flops"] * overlap / np.where(ev["dur_ns"] > 0, ev["dur_ns"], 1)) * run.trace.meta["lnc"]
    assert window.flops == pytest.approx(expected, rel=1e-9) and window.time_ns == pytest.approx(b - a)
    whole = region(run, WHOLE, session)
    assert whole.time_ns == pytest.approx(run.trace.meta["total_ns"])
    assert whole.flops == pytest.approx(sum(s.flops for s in run.analysis.layers))
    assert view.table.item(0, 2 * len(runs)).text() == number(whole.time_ns / 1e3)
    for other in runs:  # the whole run reads as the catalogue gives it everywhere (the Summary, the header)
        assert region(other, WHOLE, session).mfu == pytest.approx(other.metrics.mfu, rel=1e-12)
        assert region(other, WHOLE, session).time_ns == pytest.approx(other.metrics.span_s * 1e9, rel=1e-12)
    mlp = region(run, KIND_PREFIX + "mlp", session)
    assert mlp.time_ns == pytest.approx(sum(s.time_ns for s in run.analysis.layers if s.kind == "mlp"))
    assert not math.isnan(mlp.arithmetic_intensity)
    assert region(runs[3], COLLECTIVES, session) is not None
