"""The Sweep tab: a results file as latency against cost, its frontier, the brush and table, a
click that opens a configuration as a pane, and a small sweep of the comparison."""

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QDockWidget, QMessageBox

from sim.sweep import grid, pareto_front, sweep


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "r.parquet"
    sweep(grid(["bert-base"], ["inf1.xlarge", "inf2.xlarge", "trn1.2xlarge", "trn2.3xlarge"], [1, 4, 16],
               [128], dtypes=["bf16", "fp8"]), path, workers=1)
    return path


@pytest.fixture
def view(demo_window, results):
    demo_window.findChild(QDockWidget, "Sweep").raise_()
    assert demo_window.sweep.open_results(str(results))
    return demo_window.sweep


def test_a_results_file_plots_every_priced_configuration_and_its_frontier(view):
    ok = [r for r in view.rows if r["status"] == "ok"]
    assert len(view.rows) == 24 and len(ok) < 24  # fp8 is refused on the chips without it
    priced = [r for r in ok if r["cost_per_million_inferences_usd"] is not None]
    assert len(view.plotted) == len(priced) == len(view.scatter.data)
    front = pareto_front([r["latency_ms"] for r in priced], [r["cost_per_million_inferences_usd"] for r in priced])
    assert view.frontier == [priced[i] for i in front]
    assert "could not run" in view.status.text() and "no price: trn2.3xlarge" in view.status.text()
    colors = {r["chip"]: spot.brush().color().name() for r, spot in zip(view.plotted, view.scatter.points(),
                                                                          strict=True)}
    assert len(set(colors.values())) == len(colors) == 3  # inf1, inf2, trn1: one colour each


def test_the_brush_filters_the_table(view):
    assert view.model.rowCount() == 24
    view.brush_button.setChecked(True)
    low, high, cheap, dear = view.brushed()
    inside = [r for r in view.plotted if low <= r["latency_ms"] <= high
              and cheap <= r["cost_per_million_inferences_usd"] <= dear]
    assert view.model.rowCount() == len(inside) >= len(view.frontier)
    view.brush.setSize((0.001, 0.001))
    assert view.model.rowCount() == 0
    view.brush_button.setChecked(False)
    assert view.model.rowCount() == 24


def test_clicking_a_frontier_point_opens_that_configuration_as_a_pane(view, demo_window, qtbot):
    target = view.frontier[-1]
    before = len(demo_window.session.runs)
    pos = view.scene_pos_of(target)
    qtbot.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(round(pos.x()), round(pos.y())))
    qtbot.waitUntil(lambda: len(demo_window.session.runs) == before + 1, timeout=30_000)
    meta = demo_window.session.runs[-1].trace.meta
    assert (meta["instance"], meta["batch"], meta["dtype"]) == (target["instance"], target["batch"], target["dtype"])
    assert len(demo_window.panes) == before + 1


def test_a_bad_results_file_is_a_dialog_and_keeps_the_rows(view, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 and then nothing")
    assert not view.open_results(str(bad))
    assert "not a readable Parquet results file" in shown[0] and len(view.rows) == 24


def test_sweeping_the_comparison_runs_its_model_on_its_instances_in_the_background(demo_window, qtbot):
    view = demo_window.sweep
    points = view.comparison_points()
    instances = {r.trace.meta["instance"] for r in demo_window.session.runs}
    assert {p.instance for p in points} == instances and {p.batch for p in points} == {1, 2, 4, 8, 16, 32}
    view.sweep_comparison()
    qtbot.waitUntil(lambda: view.sweep_button.isEnabled(), timeout=120_000)
    assert len(view.rows) == len(points) and view.source == "this comparison"
    assert view.scatter.data.size > 0


def test_the_run_panel_sweeps_its_configuration_over_batch_sizes(demo_window, qtbot):
    panel = demo_window.run_panel
    panel.fields["model"].widget.setCurrentText("distilbert")
    panel.sweep_button.click()
    view = demo_window.sweep
    assert view.source == "Run panel"
    qtbot.waitUntil(lambda: len(view.rows) == 4 * 6, timeout=120_000)
    assert {r["model"] for r in view.rows} == {"distilbert"}
    assert {r["instance"] for r in view.rows} == {"inf1.xlarge", "inf2.xlarge", "trn1.2xlarge", "trn2.48xlarge"}
    panel.fields["model"].widget.setCurrentText("no-such-model")
    panel.sweep_button.click()
    assert "unknown model 'no-such-model'" in panel.status.text() and view.source == "Run panel"


def test_the_run_panels_sweep_keeps_its_quantization(demo_window):
    panel = demo_window.run_panel
    panel.fields["model"].widget.setCurrentText("llama-3-8b")
    panel.fields["mode"].widget.setCurrentText("decode")
    panel.fields["instance"].widget.setCurrentText("inf2.48xlarge")
    panel.fields["quant"].widget.setCurrentText("int8-weights")
    points = panel.sweep_points()
    assert {(p.instance, p.mode, p.quant) for p in points} == {("inf2.48xlarge", "decode", "int8-weights")}
    assert [p.batch for p in points] == [1, 2, 4, 8, 16, 32]


def test_opening_another_comparison_resets_the_sweep_and_the_search(view, demo_window, tmp_path):
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    assert view.plotted and view.model.rowCount() == 24
    demo_window.playback.search.setText("softmax")
    assert demo_window.session.search == "softmax" and demo_window.playback.matches.text() != ""
    path = tmp_path / "other.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="gpt2", chip="inf2"))])
    assert demo_window.open_files([str(path)])
    assert view.rows == [] and view.plotted == [] and len(view.scatter.data) == 0 and view.model.rowCount() == 0
    assert view.status.text().startswith("Open a file of `neuronviz sweep`")
    assert view.sweep_button.isEnabled()  # a sweep of the new comparison may start
    assert demo_window.playback.search.text() == "" and demo_window.session.search == ""
    assert demo_window.playback.matches.text() == ""
    assert not demo_window.panes[0].layers.matches.any()  # nothing highlighted in the new panes


def test_the_cost_axis_says_what_the_mode_costs(view):
    assert view.plot.getAxis("left").labelText == "$ per million inferences"
    view.rows = [{**r, "mode": "training"} for r in view.rows]
    view._redraw()
    assert view.plot.getAxis("left").labelText == "$ per million samples"
    view.rows = [{**r, "mode": m} for r, m in zip(view.rows, ["decode", "inference"] * 12, strict=True)]
    view._redraw()
    assert view.plot.getAxis("left").labelText == "$ per million inferences, requests or samples (by mode)"
