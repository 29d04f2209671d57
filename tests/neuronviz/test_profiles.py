"""A Neuron Explorer profile through every way a user opens one: the command line, File > Open
(its directory or one of its tables), drag and drop; its measured figures in the header."""

import csv
import json

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from neuronviz.cli import main
from neuronviz.session import SIMULATED, Run
from sim.io import load_file
from sim.run import RunConfig, simulate
from tests.neuronviz.test_analysis_views import show
from tests.profiles import rank_profile, small_profile


@pytest.fixture
def profile(tmp_path):
    return small_profile(tmp_path / "mlp@latest")


def test_info_and_report_read_a_profile_directory(profile, capsys):
    assert main(["info", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "Trainium1" in out and "trn1.2xlarge" in out and "mlp_nki_mm" in out
    assert main(["report", "--json", str(profile)]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["summary"]["mfu_estimated_percent"] == 12.5
    assert run["summary"]["tensor_engine_active_time_percent"] == 15.0


def test_the_command_line_opens_a_profile_in_the_app(profile, monkeypatch):
    opened = []
    monkeypatch.setattr("neuronviz.app.run_app", lambda files: opened.append(files) or 0)
    assert main([str(profile)]) == 0
    assert opened == [[str(profile)]]


def test_a_profile_exports_and_screenshots(profile, tmp_path, capsys):
    assert main(["export", str(profile), "-o", str(tmp_path / "p.json")]) == 0
    assert main(["screenshot", str(profile), "-o", str(tmp_path / "p.png"), "--size", "900x600"]) == 0
    assert (tmp_path / "p.png").stat().st_size > 0


def test_the_pane_header_shows_what_the_device_measured(demo_window, profile):
    # two tables of one profile picked in the file dialog open it once
    assert demo_window.open_files([str(profile / "Summary.parquet"), str(profile / "Instruction.parquet")])
    (pane,) = demo_window.panes
    header = pane.header.text()
    assert "measured on trn1.2xlarge" in header
    assert "MFU 12.5% · HFU 14.0% · MBU 3.2% · Tensor 15.0%" in header
    labels = [label for _, label in pane.timeline.getAxis("left")._tickLevels[0]]
    assert labels == ["Layers", "Tensor", "Vector", "Scalar", "DMA read", "DMA write", "CC ops", "CC-core 1",
                      "NC0 Sync", "NC0 waits", "Throttle", "nrt"]


def test_a_profile_directory_dropped_on_the_window_opens(demo_window, profile):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(profile))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                      Qt.KeyboardModifier.NoModifier)
    demo_window.dropEvent(drop)
    assert [run.trace.run.workload.model for run in demo_window.session.runs] == ["mlp_nki_mm"]


def test_export_writes_a_simulation_as_a_profile_explorer_opens(tmp_path, capsys):
    trace = tmp_path / "run.nvtrace"
    assert main(["simulate", "--model", "bert-base", "--chips", "trn1", "-o", str(trace)]) == 0
    capsys.readouterr()
    out = tmp_path / "bert@latest"
    assert main(["export", str(trace), "-o", str(out), "--format", "explorer"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out} (explorer, 1 run(s), ")
    assert main(["info", str(out)]) == 0 and "bert-base" in capsys.readouterr().out
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    assert main(["export", str(trace), "-o", str(tmp_path / "notes"), "--format", "explorer"]) == 2
    assert capsys.readouterr().err == (f"neuronviz: error: cannot write {tmp_path / 'notes'}: it exists and is not "
                                       "a Neuron Explorer profile directory (choose a new name)\n")


def test_compare_prints_and_writes_the_profile_beside_its_simulation(tmp_path, capsys):
    trace = tmp_path / "run.nvtrace"
    assert main(["simulate", "--model", "bert-base", "--chips", "trn1", "-o", str(trace)]) == 0
    assert main(["export", str(trace), "-o", str(tmp_path / "p"), "--format", "explorer"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "p"), "--model", "bert-base", "-o", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"measured: {tmp_path / 'p'} (trn1.2xlarge) · simulated: bert-base inference batch 1 "
                          "seq 128 on trn1.2xlarge")
    mfu = next(line for line in out.splitlines() if line.startswith("MFU %"))
    assert mfu.split()[-1] == "1.00x"
    rows = list(csv.DictReader((tmp_path / "c.csv").read_text().splitlines()))
    assert rows[0].keys() == {"kind", "name", "unit", "measured", "simulated", "simulated_over_measured"}
    layer3 = next(r for r in rows if r["name"] == "layer 3")
    assert float(layer3["simulated_over_measured"]) == pytest.approx(1.0, abs=0.01)


def test_compare_without_an_instance_is_a_one_line_error(tmp_path, capsys):
    d = small_profile(tmp_path / "p", metadata={"instance_type": None})
    assert main(["compare", str(d), "--model", "bert-base"]) == 2
    assert capsys.readouterr().err == ("neuronviz: error: the profile names no instance neuronviz has data of: set "
                                       "--instance\n")


def test_simulate_this_sets_the_run_panel_up_and_operators_meet_by_block(demo_window, profile, qtbot):
    assert demo_window.open_files([str(profile)])
    demo_window._pane_menu(demo_window.panes[0], demo_window.mapToGlobal(demo_window.rect().center()))
    actions = [a.text() for a in demo_window.pane_menu.actions()]
    assert "Simulate this…" in actions and "Edit and re-run…" not in actions
    demo_window.pane_menu.close()
    demo_window.simulate_this(0)
    panel = demo_window.run_panel
    assert panel.fields["instance"].value() == "trn1.2xlarge"
    assert panel.status.text().startswith("Measured on trn1.2xlarge: choose the model it ran")
    sim = simulate(RunConfig(model="bert-base", instance="trn1.2xlarge", seq=64))
    demo_window.session.add_runs([Run(sim, source=SIMULATED)])
    show(demo_window, "Operators")
    ops = demo_window.operators
    assert ops.group_box.currentText() == "model blocks"  # a profile and a simulation share no layer name
    names = [ops.model.item(r, 0).text() for r in range(ops.model.rowCount())]
    assert names[:2] == ["layer 1", "layer 2"]
    headers = [ops.model.headerData(c, Qt.Orientation.Horizontal) for c in range(ops.model.columnCount())]
    delta = ops.model.item(0, headers.index("Δ 2 vs 1")).text()
    measured, simulated = analyse_block(profile, sim, "layer 1")
    assert delta.startswith(f"{(simulated - measured) / 1e3:+,.2f} µs")


def test_simulate_this_from_the_pane_menu_opens_the_simulation_beside_the_profile(demo_window, profile, qtbot):
    assert demo_window.open_files([str(profile)])
    demo_window._pane_menu(demo_window.panes[0], demo_window.mapToGlobal(demo_window.rect().center()))
    next(a for a in demo_window.pane_menu.actions() if a.text() == "Simulate this…").trigger()
    demo_window.pane_menu.close()
    panel = demo_window.run_panel
    assert demo_window.run_dock.isVisible()
    panel.fields["model"].widget.setCurrentText("bert-base")  # what the user says the profile ran
    panel.fields["seq"].widget.setValue(64)
    with qtbot.waitSignal(demo_window.runner.sig_finished, timeout=20000):
        panel.start()
    qtbot.waitUntil(lambda: len(demo_window.panes) == 2, timeout=5000)
    measured, simulated = (p.run.trace.run for p in demo_window.panes)
    assert measured.measured and simulated.deployment.instance == "trn1.2xlarge"
    assert simulated.workload.model == "bert-base" and simulated.workload.seq == 64


def analyse_block(profile_dir, sim, block):
    from sim.compare import block_times

    (profile,) = load_file(profile_dir)
    return block_times(profile)[block], block_times(sim)[block]


def test_ranks_opened_together_share_a_clock_and_mark_each_collectives_straggler(demo_window, tmp_path):
    # rank 1's clock started 2 µs after rank 0's; on the shared clock rank 1 reaches the first
    # AllReduce last (11,300 ns against 11,000) and rank 0 the second (13,500 against 13,200)
    dirs = [rank_profile(tmp_path / "r0", 0, 0, [11_000, 13_500]),
            rank_profile(tmp_path / "r1", 1, 2, [9_300, 11_200])]
    assert demo_window.open_files([str(d) for d in dirs])
    runs = demo_window.session.runs
    assert [r.trace.meta.get("clock_offset_ns", 0.0) for r in runs] == [0.0, 2000.0]
    assert [r.title for r in runs] == ["Trainium1 · trn1.2xlarge · r0", "Trainium1 · trn1.2xlarge · r1"]
    show(demo_window, "Ranks")
    view = demo_window.ranks
    assert view.overview.rowCount() == 2 and view.collectives.rowCount() == 2
    last = [view.overview.item(r, view.overview.columnCount() - 1).text() for r in range(2)]
    assert last == ["1", "1"]
    arrivals = [[view.collectives.item(k, 3 + r).text() for r in range(2)] for k in range(2)]
    assert arrivals == [["0", "0.3000"], ["0.3000", "0"]]
    marked = [[view.collectives.item(k, 3 + r).background().style() != Qt.BrushStyle.NoBrush for r in range(2)]
              for k in range(2)]
    assert marked == [[False, True], [True, False]]
    view._collective_clicked(0, 0)  # shows the first collective, first arrival to last end, in the panes
    assert demo_window.session.area_of(runs[0]) == pytest.approx((11_000.0, 11_400.0))


def test_add_to_comparison_keeps_the_open_runs(demo_window, profile, monkeypatch):
    before = [r.trace for r in demo_window.session.runs]
    monkeypatch.setattr("neuronviz.main_window.QFileDialog.getOpenFileNames",
                        lambda *args: ([str(profile / "Metadata.parquet")], ""))
    add = next(a for a in demo_window.menuBar().actions()[0].menu().actions() if a.text() == "&Add to comparison…")
    assert add.shortcut().toString() == "Ctrl+Shift+A"
    add.trigger()
    runs = demo_window.session.runs
    assert [r.trace for r in runs[:len(before)]] == before and runs[-1].trace.run.workload.model == "mlp_nki_mm"
    assert runs[2].title == "Trainium1 · trn1.2xlarge · bert-large · inference"  # told from the profile beside it
    assert len(demo_window.panes) == len(before) + 1


@pytest.fixture
def two_ranks(demo_window, tmp_path):
    """The two ranks of the test above, open, with the Ranks tab shown."""
    dirs = [rank_profile(tmp_path / "r0", 0, 0, [11_000, 13_500]),
            rank_profile(tmp_path / "r1", 1, 2, [9_300, 11_200])]
    show(demo_window, "Ranks")
    assert not demo_window.ranks.strip.isVisible()  # the demo's runs are no ranks of one job
    assert demo_window.open_files([str(d) for d in dirs])
    show(demo_window, "Ranks")
    return demo_window


def _pixel(strip, x, y):
    """The colour the strip shows at ``x`` (ns) on the row height ``y``."""
    from PySide6.QtCore import QPointF

    at = strip.mapFromScene(strip.getViewBox().mapViewToScene(QPointF(x, y)))
    return strip.viewport().grab().toImage().pixelColor(at.x(), at.y())


def _near(color, hex_color, tolerance=40):
    from PySide6.QtGui import QColor

    want = QColor(hex_color)
    return all(abs(a - b) <= tolerance for a, b in zip(color.getRgb()[:3], want.getRgb()[:3], strict=True))


def test_the_ranks_strip_is_a_row_per_rank_on_the_panes_clock(two_ranks, qtbot):
    from neuronviz.widgets.ranks import STRAGGLER_PX

    view, timeline = two_ranks.ranks, two_ranks.panes[0].timeline
    strip = view.strip
    assert strip.isVisible()
    assert [label for _, label in strip.getAxis("left")._tickLevels[0]] == ["1: trn1.2xlarge · r0",
                                                                           "2: trn1.2xlarge · r1"]
    timeline.setXRange(10_500.0, 14_000.0, padding=0)  # the panes zoomed: the strip shows their range
    assert strip.viewRange()[0] == pytest.approx([10_500.0, 14_000.0])
    strip.setXRange(10_800.0, 13_800.0, padding=0)  # and the strip zoomed zooms the panes
    assert timeline.viewRange()[0] == pytest.approx([10_800.0, 13_800.0])
    qtbot.wait(10)
    # the first AllReduce's straggler is rank 2 (arrived at 11,300 ns), the second's rank 1 (13,500):
    # the mark sits on the top edge of its bar on the straggler's row, and on no other
    mark_y = -0.25 - 0.1 * STRAGGLER_PX / strip.getViewBox().height()  # inside the triangle, below its tip
    for x, straggler in ((11_300.0, 1), (13_500.0, 0)):
        assert _near(_pixel(strip, x, straggler + mark_y), "#D55E00")
        assert not _near(_pixel(strip, x, 1 - straggler + mark_y), "#D55E00")
    # each rank's bar from its arrival; the earlier rank waited for the straggler
    assert _near(_pixel(strip, 11_050.0, 0.0), "#F0E442")
    assert strip.describe(11_050.0, 0.0) == ("1: trn1.2xlarge · r0 · AllReduce #1\narrived 0 µs after the first "
                                             "rank; waited 0.3000 µs for the straggler (2)\nclick to show it in "
                                             "the panes")
    assert strip.describe(11_350.0, 1.0).startswith("2: trn1.2xlarge · r1 · AllReduce #1\nthe straggler: arrived "
                                                    "last, 0.3000 µs after the first rank")


def test_the_ranks_strip_shades_busy_engines_and_a_click_shows_the_collective(two_ranks, qtbot):
    from PySide6.QtCore import QPointF

    view, strip = two_ranks.ranks, two_ranks.ranks.strip
    # rank 1's MATMUL before the first AllReduce, 10,950 to 11,000 ns: its row's upper half (busy)
    # is the Tensor colour there (its one engine busy throughout), its lower half (waits) blank
    strip.setXRange(10_900.0, 11_100.0, padding=0)
    qtbot.wait(10)
    assert _near(_pixel(strip, 10_975.0, -0.25), "#0072B2")
    assert _near(_pixel(strip, 10_975.0, 0.25), "#FFFFFF", tolerance=5)
    assert _near(_pixel(strip, 10_925.0, -0.25), "#FFFFFF", tolerance=5)  # before it: idle
    assert "engines busy 100%" in strip.describe(10_975.0, -0.1)
    strip.setXRange(10_500.0, 14_000.0, padding=0)
    qtbot.wait(10)
    at = strip.mapFromScene(strip.getViewBox().mapViewToScene(QPointF(11_350.0, 1.0)))  # rank 2's first bar
    qtbot.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=at)
    assert view.collectives.currentRow() == 0
    assert two_ranks.session.area_of(two_ranks.session.runs[0]) == pytest.approx((11_000.0, 11_400.0))


def test_hovering_beside_a_collectives_bar_tells_of_the_shading_not_the_collective(two_ranks, qtbot):
    """Rank 1's first AllReduce spans 11,000 to 11,400 ns, its bar a quarter row above and below
    the row's middle: its waits' shading below the bar is not the collective, nor is the top edge
    of a bar without the straggler's mark (rank 2's is marked: its mark's lower half covers it)."""
    from PySide6.QtCore import QPointF

    view, strip = two_ranks.ranks, two_ranks.ranks.strip
    strip.setXRange(10_500.0, 14_000.0, padding=0)
    qtbot.wait(10)
    assert strip.collective_at(11_050.0, 0.2) == 0 and strip.collective_at(11_350.0, 1.2) == 0  # on the bars
    assert strip.describe(11_050.0, 0.4).startswith("1: trn1.2xlarge · r0\nengines busy")
    assert strip.collective_at(11_050.0, 0.4) == -1 and strip.collective_at(11_050.0, -0.4) == -1
    assert strip.collective_at(11_350.0, 1 - 0.3, mark=0.1) == 0  # on the straggler's mark
    assert strip.collective_at(11_050.0, 0 - 0.3, mark=0.1) == -1  # the same height on an unmarked bar
    clicked = []
    strip.sig_collective_clicked.connect(clicked.append)
    at = strip.mapFromScene(strip.getViewBox().mapViewToScene(QPointF(11_050.0, 0.45)))
    qtbot.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=at)
    assert clicked == [] and view.collectives.currentRow() == -1


def test_the_ranks_strip_draws_the_bars_in_view_and_merges_those_narrower_than_a_pixel():
    """Two rows of 1,000 bars [10k, 10k + 4]: zoomed out to 100 px across, every pixel column
    holds a bar, so a row is one rect; zoomed in on [95, 125], the three bars there, as they are."""
    import numpy as np

    from neuronviz.widgets.ranks import COLLECTIVE_HEIGHT, CollectiveBars

    start = np.arange(1000) * 10.0
    bars = CollectiveBars()
    bars.set_bars([start, start], [start + 4, start + 4])
    rects, dense = bars.visible(0.0, 10_000.0, 0.01)
    h = COLLECTIVE_HEIGHT
    assert rects.tolist() == [[0.0, -h / 2, 10_000.0, h], [0.0, 1 - h / 2, 10_000.0, h]] and dense.all()
    rects, dense = bars.visible(95.0, 125.0, 10.0)
    assert rects.tolist() == [[s, r - h / 2, 4.0, h] for r in (0, 1) for s in (100.0, 110.0, 120.0)]
    assert not dense.any()  # 30 px apart: outlined


@pytest.fixture
def ranks_tab_made_late(monkeypatch):
    """The Ranks tab's view made when it is first shown, as the tabs not made with the window are."""
    import neuronviz.main_window as main_window

    monkeypatch.setattr(main_window, "EAGER_TABS", tuple(t for t in main_window.EAGER_TABS if t != "Ranks"))


def test_a_ranks_tab_made_after_the_panes_shows_their_range(ranks_tab_made_late, demo_window, tmp_path):
    dirs = [rank_profile(tmp_path / "r0", 0, 0, [11_000, 13_500]),
            rank_profile(tmp_path / "r1", 1, 2, [9_300, 11_200])]
    assert demo_window.open_files([str(d) for d in dirs])
    assert "Ranks" not in demo_window._views
    show(demo_window, "Ranks")
    strip, timeline = demo_window.ranks.strip, demo_window.panes[0].timeline
    timeline.setXRange(10_500.0, 14_000.0, padding=0)
    assert strip.viewRange()[0] == pytest.approx([10_500.0, 14_000.0])
    strip.setXRange(10_800.0, 13_800.0, padding=0)
    assert timeline.viewRange()[0] == pytest.approx([10_800.0, 13_800.0])
