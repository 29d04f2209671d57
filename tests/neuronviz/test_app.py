"""The desktop app, driven offscreen: demo, playback, linked zoom, selection, files, run panel."""

import math

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QContextMenuEvent
from PySide6.QtWidgets import QApplication, QDockWidget, QMessageBox

from neuronviz.theme import ENGINE_COLORS, palette
from neuronviz.trace_view import window_stats
from sim import catalogue


def test_demo_opens_four_panes_on_four_generations(demo_window):
    assert len(demo_window.panes) == 4
    chips = [p.run.trace.meta["chip"] for p in demo_window.panes]
    assert chips == ["inf1", "inf2", "trn1", "trn2"]
    assert demo_window.windowTitle() == "neuronviz — demo comparison"
    assert "bert-large" in demo_window.panes[0].header.text()


def test_the_demo_is_kept_in_a_cache_folder_and_read_back_as_simulated(tmp_path, monkeypatch):
    import neuronviz.files as files

    simulated = files.demo_runs(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [f"demo-{files.demo_key()}.nvtrace"]
    monkeypatch.setattr(files, "simulate", lambda *_: pytest.fail("the demo was simulated again"))
    kept = files.demo_runs(tmp_path)
    assert [r.source for r in kept] == ["demo"] * 4
    for a, b in zip(simulated, kept, strict=True):
        assert a.trace.meta["chip"] == b.trace.meta["chip"] and a.trace.layer_names == b.trace.layer_names
        for name, column in a.trace.events.items():
            np.testing.assert_array_equal(column, b.trace.events[name])
        assert a.metrics == b.metrics


def test_a_damaged_stale_or_unwritable_demo_cache_is_simulated_around(tmp_path, monkeypatch):
    import neuronviz.files as files

    calls = []
    simulate = files.simulate
    monkeypatch.setattr(files, "simulate", lambda cfg: calls.append(cfg) or simulate(cfg))
    stale = tmp_path / "demo-0123456789abcdef.nvtrace"  # of another simulator
    stale.write_bytes(b"old")
    damaged = tmp_path / f"demo-{files.demo_key()}.nvtrace"
    damaged.write_bytes(b"PK\x03\x04 cut short")
    assert len(files.demo_runs(tmp_path)) == 4 and len(calls) == 7  # four runs, three of them again for requests
    assert [p.name for p in tmp_path.iterdir()] == [damaged.name] and len(files.demo_runs(tmp_path)) == 4
    assert len(calls) == 7  # read, not simulated
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    assert len(files.demo_runs(not_a_folder)) == 4 and sorted(tmp_path.iterdir()) == [damaged, not_a_folder]


def test_the_demo_cache_key_follows_every_file_of_the_simulator(tmp_path, monkeypatch):
    import neuronviz.files as files
    import sim

    (tmp_path / "hardware").mkdir()
    (tmp_path / "__init__.py").write_text("")
    chip = tmp_path / "hardware" / "trn2.toml"
    chip.write_text("tensor = 1")
    monkeypatch.setattr(sim, "__file__", str(tmp_path / "__init__.py"))
    key = files.demo_key()
    chip.write_text("tensor = 2")
    assert files.demo_key() != key
    chip.write_text("tensor = 1")
    assert files.demo_key() == key
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"compiled")  # not the simulator's own
    assert files.demo_key() == key


def test_playback_moves_the_playhead_and_the_chip_diagram_changes(demo_window, qtbot):
    session = demo_window.session
    pane = demo_window.panes[2]  # trn1: its run is short, so move within it
    session.set_playhead(0.0)
    before = dict(pane.diagram.state.activity)
    fraction = 0.5 * pane.run.duration_ns / session.max_duration_ns
    demo_window.playback.set_playing(True)
    qtbot.waitUntil(lambda: session.playhead > 0.01 * fraction, timeout=3000)
    demo_window.playback.set_playing(False)
    session.set_playhead(fraction)
    assert pane.playheads[0].value() == pytest.approx(0.5 * pane.run.duration_ns)
    after = pane.diagram.state.activity
    assert after != before
    assert max(after.values()) > 0


def test_zooming_one_pane_zooms_all(demo_window, qtbot):
    first, last = demo_window.panes[0], demo_window.panes[3]
    first.timeline.setXRange(1000.0, 5000.0, padding=0)
    qtbot.wait(10)
    assert last.timeline.viewRange()[0] == pytest.approx([1000.0, 5000.0], rel=1e-6)
    demo_window.zoom(0.5)
    (a0, a1), (b0, b1) = first.timeline.viewRange()[0], last.timeline.viewRange()[0]
    assert (a0, a1) == pytest.approx((b0, b1))
    assert a1 - a0 == pytest.approx(2000.0, rel=1e-6)


def test_panes_placed_differently_on_screen_still_show_the_same_time_range(demo_window, qtbot):
    """A pane without a chip diagram (a trace of another tool) under one with it: its plots start
    further left on screen, and zooming either pane gives both the same range."""
    from pathlib import Path

    from neuronviz.session import Run
    from sim.io import load_file

    (other,) = load_file(Path(__file__).parents[1] / "data" / "pytorch-profiler.json")
    session = demo_window.session
    session.set_runs([*session.runs[:2], Run(other)])
    qtbot.wait(10)
    top, _, below = demo_window.panes
    left = [p.timeline.getViewBox().screenGeometry().left() for p in (top, below)]
    assert left[1] < left[0] - 100  # no diagram: the plots start further left
    top.timeline.setXRange(1000.0, 5000.0, padding=0)
    assert below.timeline.viewRange()[0] == pytest.approx([1000.0, 5000.0], rel=1e-9)
    below.timeline.setXRange(2000.0, 3000.0, padding=0)
    for pane in demo_window.panes:
        assert pane.timeline.viewRange()[0] == pytest.approx([2000.0, 3000.0], rel=1e-9)
        assert pane.counters.viewRange()[0] == pytest.approx([2000.0, 3000.0], rel=1e-9)


def test_selecting_a_layer_highlights_it_in_every_pane_and_fills_the_details(demo_window):
    name = "layer5.mlp"
    demo_window.session.select_layer(name)
    for pane in demo_window.panes:
        assert pane.run.trace.layer_names[pane.layers.selected] == name
    table = demo_window.details.table
    assert table.rowCount() == 4
    assert {table.item(r, 0).text().split(" · ")[0] for r in range(4)} == {
        "Inferentia1", "Inferentia2", "Trainium1", "Trainium2"}


def test_clicking_the_layer_row_selects_that_layer(demo_window, qtbot):
    pane = demo_window.panes[1]
    span = 10
    t = (pane.run.trace.layer_start_ns[span] + pane.run.trace.layer_end_ns[span]) / 2
    pane.timeline.setXRange(pane.run.trace.layer_start_ns[span] - 1000, pane.run.trace.layer_end_ns[span] + 1000)
    qtbot.wait(10)
    vb = pane.timeline.getViewBox()
    view_pos = pane.graphics.mapFromScene(vb.mapViewToScene(QPointF(t, -0.5)))
    qtbot.mouseClick(pane.graphics.viewport(), Qt.MouseButton.LeftButton, pos=view_pos)
    assert demo_window.session.selected_layer == pane.run.trace.layer_names[span]


def test_corrupt_file_shows_the_reason_and_keeps_the_open_panes(demo_window, tmp_path, monkeypatch):
    bad = tmp_path / "broken.nvtrace"
    bad.write_bytes(b"PK\x03\x04 this is not really a zip")
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    panes = list(demo_window.panes)
    assert demo_window.open_files([str(bad)]) is False
    assert len(shown) == 1 and "broken.nvtrace" in shown[0] and "\n" not in shown[0]
    assert demo_window.panes == panes


def test_hostile_files_opened_in_the_app_each_give_one_warning_and_keep_the_open_panes(demo_window, tmp_path,
                                                                                        monkeypatch):
    import gzip
    import json
    import os
    import zipfile

    from sim.io import save_file
    from sim.run import RunConfig, simulate

    good = tmp_path / "good.nvtrace"
    save_file(str(good), [simulate(RunConfig(model="distilbert", chip="inf2", seq=64), max_events=0)])
    flipped = tmp_path / "flipped.nvtrace"
    data = bytearray(good.read_bytes())
    data[len(data) * 2 // 3] ^= 0x04
    flipped.write_bytes(bytes(data))

    def with_manifest(name, edit):
        """``good`` with its manifest edited (what a hand-made or damaged file holds)."""
        path = tmp_path / name
        with zipfile.ZipFile(good) as zin, zipfile.ZipFile(path, "w") as zout:
            for info in zin.infolist():
                body = zin.read(info.filename)
                if info.filename == "manifest.json":
                    manifest = json.loads(body)
                    edit(manifest)
                    body = json.dumps(manifest).encode()
                zout.writestr(info.filename, body)
        return path

    meta = with_manifest("meta.nvtrace", lambda m: m["runs"][0]["meta"].update(cores_active=[1, 2]))
    shared = with_manifest("shared.nvtrace", lambda m: m.update(runs=m["runs"] * 1000))
    fifo = tmp_path / "pipe.nvtrace"
    os.mkfifo(fifo)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as g:
        g.write(b"[" + b" " * (80 << 20) + b"]")
    nan = tmp_path / "nan.json"
    nan.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1e20, "dur": 1, "pid": 1, "tid": 1}]}')
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    panes = list(demo_window.panes)
    expected = {flipped: "checksum does not match", meta: "run metadata 'cores_active'",
                shared: "holds 1,000 runs", fifo: "not a regular file (a pipe)", bomb: "zip bomb",
                nan: "'ts' is not a finite number of at most"}
    for path, reason in expected.items():
        assert demo_window.open_files([str(path)]) is False
        assert reason in shown[-1] and path.name in shown[-1] and "\n" not in shown[-1], shown[-1]
        assert demo_window.panes == panes
    assert len(shown) == len(expected)


APP_FUZZ_CASES = 30  # per format: every file that opens builds its panes, so fewer than the loader's harness


def test_the_fuzz_corpus_opened_in_the_app_opens_or_warns_in_one_line(demo_window, tmp_path, monkeypatch):
    import json
    from itertools import chain

    from sim.io import save_file
    from sim.io.chrome import export_chrome
    from sim.run import RunConfig, simulate
    from tests.fuzz_corpus import chrome_cases, nvtrace_cases, nvtrace_meta_cases, write_zip

    traces = [simulate(RunConfig(model="distilbert", chip=c, seq=64), max_events=0) for c in ("inf2", "trn2")]
    seed = tmp_path / "seed.nvtrace"
    save_file(str(seed), traces)
    chrome = export_chrome(traces[:1])
    intact = [("intact.nvtrace", seed.read_bytes()), ("intact.json", json.dumps(chrome).encode())]

    def zipped(members):  # the run metadata the views read, odd
        write_zip(tmp_path / "members.nvtrace", members)
        return (tmp_path / "members.nvtrace").read_bytes()

    corpus = chain(intact, ((f"n{i}.nvtrace", data) for i, data in enumerate(nvtrace_cases(seed.read_bytes(), 0,
                                                                                    APP_FUZZ_CASES))),
                   ((f"c{i}.json", text.encode()) for i, text in enumerate(chrome_cases(chrome, 0,
                                                                                         APP_FUZZ_CASES))),
                   ((f"m{i}.nvtrace", zipped(members)) for i, members in enumerate(nvtrace_meta_cases(
                       seed, 0, APP_FUZZ_CASES))))
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    outcomes, opened = {"opened": 0, "refused": 0}, set()
    for name, data in corpus:
        path = tmp_path / name
        path.write_bytes(data)
        panes, warned = list(demo_window.panes), len(shown)
        if demo_window.open_files([str(path)]):
            outcomes["opened"] += 1
            opened.add(name)
            assert len(shown) == warned and demo_window.panes and demo_window.panes != panes
        else:
            outcomes["refused"] += 1
            assert len(shown) == warned + 1 and name in shown[-1] and "\n" not in shown[-1], shown[-1]
            assert demo_window.panes == panes
    # the intact files open; which damaged ones still do depends on where the damage lands
    assert {"intact.nvtrace", "intact.json"} <= opened and outcomes["refused"] >= 20, outcomes


def test_every_hostile_file_of_issue_49_opens_or_shows_its_one_line_reason(demo_window, tmp_path, monkeypatch):
    """File > Open of each: a dialog with exactly the reader's message, or panes; never an exception
    inside Qt (pytest-qt fails the test on one)."""
    import neuronviz.main_window as mw
    from neuronviz.files import MAX_PANES
    from sim.io import load_file, save_file
    from sim.run import RunConfig, simulate
    from tests.fuzz_corpus import HOSTILE

    monkeypatch.setattr(mw, "BACKGROUND_OPEN_BYTES", 1 << 40)  # each opens at once (the worker has its own test)
    seed = tmp_path / "seed.nvtrace"
    save_file(str(seed), [simulate(RunConfig(model="distilbert", chip="inf2", seq=64))])
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    for i, (name, case) in enumerate(n_c for n_c in HOSTILE.items() if not n_c[1].is_config):
        path = tmp_path / f"case{i}{case.suffix}"
        case.build(seed, path)
        expected = case.error.format(path=path) if case.error else None
        if expected is None and len(load_file(path)) > MAX_PANES:
            expected = f"{path}: {len(load_file(path))} runs, more than the {MAX_PANES} a comparison shows side by side"
        panes, warned = list(demo_window.panes), len(shown)
        opened = demo_window.open_files([str(path)])
        if expected is None:
            assert opened and len(shown) == warned and demo_window.panes != panes, name
        else:
            assert not opened and shown[warned:] == [expected] and demo_window.panes == panes, name
        path.unlink()


def test_a_reader_failing_in_a_way_nobody_foresaw_is_a_dialog_not_an_exception_in_qt(demo_window, monkeypatch):
    from pathlib import Path

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    monkeypatch.setattr("neuronviz.main_window.open_runs", lambda path: 1 / 0)
    golden = str(Path(__file__).parents[1] / "data" / "bert-base-trn1-inf2.nvtrace")
    assert demo_window.open_files([golden]) is False
    assert shown == [f"{golden}: cannot be shown (ZeroDivisionError: division by zero)"]
    assert len(demo_window.panes) == 4


def test_long_texts_are_cut_for_drawing_and_saved_whole(demo_window, tmp_path):
    from dataclasses import replace

    from neuronviz.files import MAX_DRAWN_CHARS
    from sim.io import load_file, save_file
    from sim.run import RunConfig, simulate

    trace = simulate(RunConfig(model="distilbert", chip="inf2", seq=64))
    model, layer = "m" * 5000, "l" * 5000
    path = tmp_path / "long.nvtrace"
    save_file(str(path), [replace(trace, meta={**trace.meta, "model": model},
                                  layer_names=(layer, *trace.layer_names[1:]))])
    assert demo_window.open_files([str(path)])
    shown = demo_window.panes[0].run.trace
    assert shown.meta["model"] == "m" * (MAX_DRAWN_CHARS - 1) + "…" and len(shown.layer_names[0]) == MAX_DRAWN_CHARS
    assert "m" * MAX_DRAWN_CHARS not in demo_window.panes[0].header.text()
    saved = tmp_path / "saved.nvtrace"
    assert demo_window.save_to(str(saved))
    (back,) = load_file(saved)
    assert back.meta["model"] == model and back.layer_names[0] == layer


def test_a_closed_comparison_is_freed(demo_window, qtbot, tmp_path):
    import gc
    import weakref
    from pathlib import Path

    golden = str(Path(__file__).parents[1] / "data" / "bert-base-trn1-inf2.nvtrace")
    assert demo_window.open_files([golden])
    closed = [weakref.ref(run) for run in demo_window.session.runs]
    closed_panes = [weakref.ref(pane) for pane in demo_window.panes]
    assert demo_window.open_files([golden])  # replaces them
    demo_window.close_pane(0)
    qtbot.waitUntil(lambda: (gc.collect(), all(r() is None for r in closed + closed_panes))[1], timeout=5000)
    assert len(demo_window.panes) == 1


def test_a_small_compressed_file_that_may_be_slow_to_read_opens_in_the_background(demo_window, qtbot, tmp_path):
    import gzip
    import json

    path = tmp_path / "small.json.gz"  # 1 MB of gzip may inflate to 100 MB: read off the GUI thread
    events = [{"ph": "X", "name": f"op{i % 7}", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {"pad": i * 7919}}
              for i in range(60_000)]
    path.write_bytes(gzip.compress(json.dumps(events).encode(), 1))
    assert path.stat().st_size > 400_000
    assert demo_window.open_files([str(path)])
    assert demo_window.opening is not None and len(demo_window.panes) == 4
    qtbot.waitUntil(lambda: len(demo_window.panes) == 1, timeout=20_000)


def test_save_then_open_round_trips_the_comparison(demo_window, tmp_path):
    path = str(tmp_path / "cmp.nvtrace")
    assert demo_window.save_to(path)
    assert demo_window.open_files([path])
    assert len(demo_window.panes) == 4
    assert demo_window.windowTitle() == "neuronviz — cmp.nvtrace"
    assert demo_window.settings.value("files/recent")[0].endswith("cmp.nvtrace")


def _grab(widget):
    img = widget.grab().toImage()
    w, h = img.width(), img.height()
    ptr = img.constBits()
    arr = np.frombuffer(ptr, dtype=np.uint8, count=img.sizeInBytes()).reshape(h, img.bytesPerLine())
    # a copy: the array must not outlive the image whose memory it views
    return arr[:, : 4 * w].reshape(h, w, 4)[:, :, :3][:, :, ::-1].copy()  # BGRA -> RGB


def test_tracks_draw_engine_colours_where_engines_are_busy(demo_window, qtbot):
    pane = demo_window.panes[2]
    pane.timeline.setXRange(0, pane.run.duration_ns, padding=0)
    qtbot.wait(20)
    pixels = _grab(pane.graphics)
    background = np.array(QColor(pane.graphics.backgroundBrush().color()).getRgb()[:3])
    assert (np.abs(pixels.astype(int) - background).sum(axis=2) > 30).mean() > 0.05
    for kind in ("tensor", "vector", "scalar", "dma_read"):
        rgb = np.array(QColor(ENGINE_COLORS[kind]).getRgb()[:3])
        close = (np.abs(pixels.astype(int) - rgb).sum(axis=2) < 40).sum()
        assert close > 50, kind


def test_counter_plots_are_bands_of_one_plot_each_with_its_ticks_and_curves(demo_window, qtbot):
    pane = demo_window.panes[0]  # inf1: busy %, SRAM % and GB/s
    assert [band.title for band in pane.bands] == ["busy %", "SRAM %", "GB/s"]
    axis = pane.band_axis
    (_, major), _ = axis.tickValues(0, 3, 300)
    labels = dict(zip(major, axis.tickStrings(major, 1.0, 1.0), strict=True))
    # inf1's copy alone reads its DDR at up to its core's DMA rate, 22.8 GB/s: a band to 25.1,
    # labelled every 10 at 17 px or more apart
    for k, (low, high) in enumerate((("0", "100"), ("0", "100"), ("0", "20"))):
        in_band = [labels[y] for y in sorted(major, reverse=True) if k <= y < k + 1]  # bottom up
        assert in_band[0] == low and in_band[-1] == high, k
    pane.timeline.setXRange(0, pane.run.duration_ns, padding=0)
    qtbot.wait(20)
    pixels = _grab(pane.graphics).astype(int)
    vb = pane.counters.getViewBox()
    x0, x1 = (round(pane.graphics.mapFromScene(vb.sceneBoundingRect().topLeft() + QPointF(dx, 0)).x())
              for dx in (0, vb.width() - 1))
    edges = [round(pane.graphics.mapFromScene(vb.mapViewToScene(QPointF(0, k))).y()) for k in range(4)]

    def lit(kind: str, band: int) -> int:
        rgb = np.array(QColor(ENGINE_COLORS[kind]).getRgb()[:3])
        area = pixels[edges[band] + 1:edges[band + 1] - 1, x0:x1]
        return int((np.abs(area - rgb).sum(axis=2) < 40).sum())

    assert lit("tensor", 0) > 50 and lit("tensor", 1) == lit("tensor", 2) == 0  # busy % in the top band
    assert lit("dma_read", 1) > 50 and lit("dma_read", 0) == 0  # SBUF fill in the second
    assert lit("dma_write", 1) > 50  # PSUM


def test_a_short_pane_leaves_out_the_counter_bands_that_do_not_fit(demo_window, qtbot):
    pane = demo_window.panes[0]
    vb = pane.counters.getViewBox()
    assert vb.viewRange()[1] == [0, 3]
    demo_window.resize(1600, 820)  # the demo's headers take two or three lines
    qtbot.waitUntil(lambda: vb.viewRange()[1] == [0, 2], timeout=2000)
    assert min(p.bands_fitting() for p in demo_window.panes) == 2  # every pane shows what fits in all
    assert [legend.isVisible() for legend in pane.legends] == [True, True, False]
    (_, major), _ = pane.band_axis.tickValues(0, 2, 100)
    assert max(major) < 2  # no ticks of the band left out
    demo_window.resize(1600, 600)
    qtbot.waitUntil(lambda: not pane.counters.isVisible(), timeout=2000)
    demo_window.resize(1600, 1000)
    qtbot.waitUntil(lambda: pane.counters.isVisible() and vb.viewRange()[1] == [0, 3], timeout=2000)
    assert all(legend.isVisible() for legend in pane.legends)


def test_at_1600x900_every_demo_pane_keeps_its_traffic_band_with_its_titles_across(demo_window, qtbot):
    # the screenshot size: Trainium2 draws seven rows (Layers, four engines, DMA read, Collective)
    # under a header on three lines, and still shows busy %, SRAM % and GB/s
    demo_window.resize(1600, 900)
    for pane in demo_window.panes:
        qtbot.waitUntil(lambda p=pane: p.counters.getViewBox().viewRange()[1] == [0, 3], timeout=2000)
        assert pane.legends[2].isVisible(), pane.run.title
    qtbot.wait(20)
    pane = demo_window.panes[3]
    axis = pane.band_axis
    pixels = _grab(pane.graphics).astype(int)
    left = round(pane.graphics.mapFromScene(axis.sceneBoundingRect().topLeft()).x())
    vb = pane.counters.getViewBox()
    edges = [round(pane.graphics.mapFromScene(vb.mapViewToScene(QPointF(0, k))).y()) for k in range(4)]
    background = np.array(QColor(palette().background).getRgb()[:3])
    for k in range(3):  # each title written across at the axis' left, inside its own band
        text = np.abs(pixels[edges[k] + 1:edges[k + 1] - 1, left:left + 40] - background).sum(axis=2) > 200
        rows = np.flatnonzero(text.any(axis=1))
        assert text.sum() > 30 and rows.max() - rows.min() < 16, k  # one line of text, not turned along


def test_at_1600x900_the_summary_shows_every_run_of_the_demo_whole(demo_window, qtbot):
    demo_window.resize(1600, 900)
    table = demo_window.summary
    qtbot.waitUntil(lambda: table.viewport().height() < 200, timeout=2000)
    last = table.visualRect(table.model().index(table.rowCount() - 1, 0))
    assert table.rowCount() == 4 and last.bottom() <= table.viewport().height()
    # a row is a line of text and a little air, not the style's 30 px
    assert table.rowHeight(0) == table.fontMetrics().height() + 6


def test_a_chrome_trace_of_another_tool_opens_as_a_generic_pane(demo_window, qtbot):
    from pathlib import Path

    path = Path(__file__).parents[1] / "data" / "pytorch-profiler.json"
    assert demo_window.open_files([str(path)])
    (pane,) = demo_window.panes
    assert demo_window.windowTitle() == "neuronviz — pytorch-profiler.json"
    assert "pytorch-profiler.json" in pane.header.text() and "events" in pane.header.text()
    assert not pane.diagram.isVisibleTo(pane)  # no chip to draw
    labels = [label for _, label in pane.timeline.getAxis("left")._tickLevels[0]]
    assert labels[0] == "Layers" and "stream 7" in labels
    assert [band.title for band in pane.bands] == ["% of peak"]  # the tool's two memory counters, no simulator bands
    legend = [label.text for _, label in pane.legends[0].items]
    assert legend == ["GPU Memory.allocated", "GPU Memory.reserved"]
    table = demo_window.summary
    row = [table.item(0, c).text() for c in range(table.columnCount())]
    assert table.columns == ["run", "instance", "latency_ms", "counts", "speed-up"]  # nothing else applies
    assert row[table.column("latency_ms")] == "1.000"  # how long it ran, in ms


def _right_click(pane, scene_pos: QPointF) -> None:
    """What a right click sends the plots' viewport on every platform (on press on Linux and
    macOS, on release on Windows): a context menu event."""
    viewport = pane.graphics.viewport()
    pos = pane.graphics.mapFromScene(scene_pos)
    QApplication.sendEvent(viewport, QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos, viewport.mapToGlobal(pos)))


def test_right_click_on_a_pane_offers_to_export_that_pane(demo_window, qtbot):
    pane = demo_window.panes[1]
    vb = pane.timeline.getViewBox()
    _right_click(pane, vb.sceneBoundingRect().center())
    menu = demo_window.pane_menu
    assert menu is not None and menu.isVisible()
    texts = [a.text() for a in menu.actions() if a.text()]
    assert texts[:3] == ["Add marker here", "Export this pane as image (PNG, SVG)…", "Copy image of this pane"]
    actions = {a.text(): a for a in menu.actions()}
    actions["Make this the baseline"].trigger()
    assert demo_window.session.baseline == 1
    menu.close()
    actions["Close this pane"].trigger()
    assert [p.run.trace.meta["chip"] for p in demo_window.panes] == ["inf1", "trn1", "trn2"]
    assert demo_window.session.baseline == 0  # the baseline was closed: back to the first run


def test_dark_theme_repaints_the_panes_dark_and_is_remembered(demo_window, qtbot):
    from neuronviz.theme import DARK, LIGHT

    try:
        demo_window.set_theme("dark")
        assert demo_window.settings.value("view/theme") == "dark"
        pane = demo_window.panes[0]
        assert len(demo_window.panes) == 4
        assert pane.graphics.backgroundBrush().color().name() == DARK.background
        img = pane.grab().toImage()
        dark = QColor(DARK.background)
        px = [img.pixelColor(x, y) for x in range(0, img.width(), 17) for y in range(0, img.height(), 17)]
        assert sum(abs(c.red() - dark.red()) < 24 for c in px) > len(px) / 3
        demo_window.set_theme("light")
        assert demo_window.panes[0].graphics.backgroundBrush().color().name() == LIGHT.background
    finally:
        demo_window.set_theme("system")


def test_hovering_an_engine_bar_shows_the_event(demo_window, qtbot):
    from PySide6.QtWidgets import QToolTip

    pane = demo_window.panes[1]
    view = pane.view
    row = view.row_kinds.index("tensor")
    bi = view.integrals[row]
    i = int(np.argmax(bi.dur))  # the longest Tensor event
    t = bi.start[i] + bi.dur[i] / 2
    pane.timeline.setXRange(bi.start[i] - bi.dur[i], bi.start[i] + 2 * bi.dur[i], padding=0)
    qtbot.wait(10)
    scene_pos = pane.timeline.getViewBox().mapViewToScene(QPointF(t, row + 0.5))
    pane._hover(scene_pos)
    text = QToolTip.text()
    info = view.event_at(row, t)
    assert info is not None and info.op in text and info.layer in text
    assert "FLOP" in text and "duration" in text
    pane._hover(pane.timeline.getViewBox().mapViewToScene(QPointF(t, row + 0.5)) + QPointF(0, 10_000))
    qtbot.waitUntil(lambda: not QToolTip.isVisible(), timeout=2000)  # off the timeline: hidden


def test_hovering_a_few_pixels_off_an_event_picks_the_nearest(demo_window, qtbot):
    from PySide6.QtWidgets import QToolTip

    pane = demo_window.panes[1]
    view = pane.view
    row = view.row_kinds.index("vector")
    bi = view.integrals[row]  # the row's busy intervals: between two, the engine is idle
    ends = bi.start + bi.dur
    gap = int(np.argmax(bi.start[1:] - ends[:-1]))
    a, b = ends[gap], bi.start[gap + 1]
    pane.timeline.setXRange(a - (b - a), b + (b - a), padding=0)  # the gap a third of the view
    qtbot.wait(10)
    vb = pane.timeline.getViewBox()
    px = vb.viewPixelSize()[0]
    before, after = view.event_at(row, a - px / 100), view.event_at(row, b + px / 100)

    def hover(t_ns: float) -> str:
        pane._hover(vb.mapViewToScene(QPointF(t_ns, row + 0.5)))
        return QToolTip.text()

    assert view.event_at(row, a + 2 * px) is None  # not an exact hit
    assert f"<b>{before.op}</b>" in hover(a + 2 * px)  # two pixels after the one before the gap
    assert f"<b>{after.op}</b>" in hover(b - 3 * px)  # three pixels before the one after it
    middle = hover((a + b) / 2)  # far from both: no event, how busy the engine is there
    assert "<b>" not in middle and "Vector busy 0% of this pixel" in middle


def test_dropping_a_file_on_the_window_opens_it(demo_window, tmp_path):
    from PySide6.QtCore import QMimeData, QPoint, QUrl
    from PySide6.QtGui import QDropEvent

    path = tmp_path / "two.nvtrace"
    from sim.io.native import save_traces

    save_traces(path, [r.trace for r in demo_window.session.runs[:2]])
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    demo_window.dropEvent(event)
    assert len(demo_window.panes) == 2
    assert demo_window.windowTitle() == "neuronviz — two.nvtrace"


def test_big_files_open_in_the_background_and_can_fail_or_be_cancelled(demo_window, qtbot, tmp_path,
                                                                       monkeypatch):
    from pathlib import Path

    import neuronviz.main_window as mw

    monkeypatch.setattr(mw, "BACKGROUND_OPEN_BYTES", 0)  # every file counts as big
    golden = str(Path(__file__).parents[1] / "data" / "bert-base-trn1-inf2.nvtrace")
    assert demo_window.open_files([golden])
    assert len(demo_window.panes) == 4  # not yet: the demo stays until the file is read
    dialog = demo_window.opening
    assert dialog is not None and dialog.labelText() == "Opening bert-base-trn1-inf2.nvtrace…"
    qtbot.waitUntil(lambda: len(demo_window.panes) == 2, timeout=10_000)
    assert demo_window.opening is None
    assert demo_window.windowTitle() == "neuronviz — bert-base-trn1-inf2.nvtrace"

    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": "soon"}]}')
    demo_window.open_files([str(bad)])
    qtbot.waitUntil(lambda: bool(shown), timeout=10_000)
    assert "bad.json" in shown[0] and len(demo_window.panes) == 2

    before = list(demo_window.session.runs)
    demo_window.open_files([golden])
    demo_window.opening.canceled.emit()  # what the Cancel button does
    assert demo_window.opening is None
    qtbot.wait(500)
    assert demo_window.session.runs == before  # the same Run objects: the cancelled load was dropped

    # a file opened while another still loads wins, even when the slow one finishes later
    small = tmp_path / "small.json"
    small.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]')
    demo_window.open_files([golden])
    monkeypatch.setattr(mw, "BACKGROUND_OPEN_BYTES", 1 << 40)
    assert demo_window.open_files([str(small)])
    qtbot.wait(500)
    assert [r.source for r in demo_window.session.runs] == [str(small)]


def test_dragging_on_a_timeline_selects_a_window_in_every_pane(demo_window, qtbot):
    from PySide6.QtTest import QTest

    pane = demo_window.panes[1]
    vb = pane.timeline.getViewBox()
    d = demo_window.session.max_duration_ns
    demo_window.panes[0].timeline.setXRange(0, d, padding=0)
    qtbot.wait(10)
    a, b = (pane.graphics.mapFromScene(vb.mapViewToScene(QPointF(x, 1.5))) for x in (0.1 * d, 0.3 * d))
    viewport = pane.graphics.viewport()
    QTest.mousePress(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, a)
    for k in range(1, 11):
        QTest.mouseMove(viewport, a + (b - a) * k / 10)
    QTest.mouseRelease(viewport, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, b)
    lo, hi = demo_window.session.area
    assert lo == pytest.approx(0.1, abs=0.01) and hi == pytest.approx(0.3, abs=0.01)
    assert demo_window.panes[0].timeline.viewRange()[0][0] == pytest.approx(0, abs=1e-6 * d)  # no pan
    for p in demo_window.panes:
        region = p.area_items[0]
        assert region.isVisible()
        assert region.getRegion() == pytest.approx((lo * d, hi * d))
    table = demo_window.area_stats.table
    assert table.rowCount() == 4
    inf1 = demo_window.session.runs[0]  # inf1 is still busy in the window; the others finish before it
    stats = window_stats(inf1.view, lo * d, hi * d)
    assert stats.busy["tensor"] > 0 and stats.flops > 0
    assert table.item(0, 2).text() == f"{100 * stats.busy['tensor']:.0f}"
    demo_window.clear_selection()
    assert demo_window.session.area is None and not pane.area_items[0].isVisible()


def test_search_highlights_matching_layers_and_enter_walks_through_them(demo_window, qtbot):
    session = demo_window.session
    box = demo_window.playback.search
    box.setText("layer3.")
    run = session.runs[0]
    found = run.view.find_layers("layer3.")
    names = {run.trace.layer_names[i] for i in found}
    assert names and all(n.startswith("layer3.") for n in names)
    assert demo_window.playback.matches.text() == f"{len(found)} layers" and len(found) > 1
    for pane in demo_window.panes:
        marked = {pane.run.trace.layer_names[i] for i in np.flatnonzero(pane.layers.matches)}
        assert marked == names
    session.set_playhead(0.0)
    box.returnPressed.emit()
    first = run.trace.layer_names[found[0]]
    assert session.selected_layer == first
    assert session.time_of(run) == pytest.approx(run.trace.layer_start_ns[found[0]])
    demo_window.find_next()
    assert session.selected_layer == run.trace.layer_names[found[1]]
    demo_window.find_next(backwards=True)
    assert session.selected_layer == first
    box.setText("")
    assert not demo_window.panes[0].layers.matches.any()


def test_searching_an_op_name_marks_the_layers_that_run_it(demo_window):
    view = demo_window.session.runs[1].view
    tr = view.trace
    layers = view.find_layers("SOFTMAX_EXP")  # case-insensitive, an op of every attention block
    expected = {int(tr.op_layer[o]) for o, n in enumerate(tr.op_names) if n == "softmax_exp"}
    assert set(layers.tolist()) == expected and len(expected) == 24 * tr.meta["requests"]  # bert-large: 24 layers


def test_clicking_an_engine_event_selects_its_layer(demo_window, qtbot):
    pane = demo_window.panes[2]
    view = pane.view
    row = view.row_kinds.index("vector")
    bi = view.integrals[row]
    i = int(np.argmax(bi.dur))
    t = bi.start[i] + bi.dur[i] / 2
    pane.timeline.setXRange(bi.start[i] - bi.dur[i], bi.start[i] + 2 * bi.dur[i], padding=0)
    qtbot.wait(10)
    pos = pane.graphics.mapFromScene(pane.timeline.getViewBox().mapViewToScene(QPointF(t, row + 0.5)))
    qtbot.mouseClick(pane.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert demo_window.session.selected_layer == view.event_at(row, t).layer != ""
    assert demo_window.details.table.rowCount() == 4


def test_w_zooms_around_the_mouse_when_it_is_over_a_timeline(demo_window, qtbot, monkeypatch):
    import neuronviz.main_window as mw

    d = demo_window.session.max_duration_ns
    demo_window.panes[0].timeline.setXRange(0, d, padding=0)
    qtbot.wait(10)
    pane = demo_window.panes[3]
    vb = pane.timeline.getViewBox()
    at = pane.graphics.viewport().mapToGlobal(pane.graphics.mapFromScene(vb.mapViewToScene(QPointF(0.25 * d, 1.0))))
    monkeypatch.setattr(mw.QCursor, "pos", staticmethod(lambda: at))
    demo_window.zoom(0.5)
    (x0, x1), _ = demo_window.panes[0].timeline.viewRange()
    c = vb.mapSceneToView(pane.graphics.mapToScene(pane.graphics.viewport().mapFromGlobal(at))).x()
    assert (x1 - x0) == pytest.approx(0.5 * d, rel=1e-3)
    assert x0 == pytest.approx(c - 0.5 * c, rel=1e-2)  # the time under the pointer stays put


def test_closing_with_unsaved_simulated_runs_asks_first(demo_window, qtbot, monkeypatch, tmp_path):
    from neuronviz.session import SIMULATED, Run
    from sim.run import RunConfig, simulate

    session = demo_window.session
    session.add_runs([Run(simulate(RunConfig(model="bert-base", chip="inf2", seq=32)), source=SIMULATED)])
    assert session.unsaved and demo_window.windowTitle().endswith(" *")
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *args: asked.append(1) or QMessageBox.StandardButton.Cancel)
    assert not demo_window.close()  # cancelled: the window stays, the runs too
    assert demo_window.isVisible() and len(demo_window.panes) == 5 and asked
    asked.clear()
    assert not demo_window.open_files([str(tmp_path / "other.nvtrace")])  # replacing asks too
    assert asked and len(demo_window.panes) == 5
    asked.clear()
    demo_window.close_pane(4)  # closing that one pane asks
    assert asked and len(demo_window.panes) == 5
    asked.clear()
    demo_window.close_pane(0)  # a demo run is not lost work: no question
    assert not asked and len(demo_window.panes) == 4
    panel = demo_window.run_panel
    panel.keep.setChecked(False)
    panel.start()  # results would replace the open runs: asks, and the answer Cancel stops it
    assert asked and not demo_window.runner.busy and panel.run_button.isEnabled()
    panel.keep.setChecked(True)
    path = str(tmp_path / "kept.nvtrace")
    assert demo_window.save_to(path)
    assert not session.unsaved and not demo_window.windowTitle().endswith(" *")
    asked.clear()
    assert demo_window.close() and not asked  # saved: closes without a question


@pytest.mark.parametrize("plot", [0, 1])  # the timeline, the counter bands under it
def test_right_click_on_a_timeline_adds_a_marker_at_the_clicked_time(demo_window, qtbot, plot):
    session = demo_window.session
    pane = demo_window.panes[0]
    vb = pane.plots[plot].getViewBox()
    rect = vb.sceneBoundingRect()
    click = QPointF(rect.left() + 0.3 * rect.width(), rect.center().y())
    t_ns = vb.mapSceneToView(click).x()
    _right_click(pane, click)
    add = {a.text(): a for a in demo_window.pane_menu.actions()}["Add marker here"]
    add.trigger()
    demo_window.pane_menu.close()
    ns_per_px = pane.timeline.getViewBox().viewPixelSize()[0]
    assert len(session.markers) == 1
    assert session.markers[0] * session.max_duration_ns == pytest.approx(t_ns, abs=1.5 * ns_per_px)
    assert pane.marker_lines[0].value() == pytest.approx(t_ns, abs=1.5 * ns_per_px)
    _right_click(pane, pane.timeline.getAxis("left").sceneBoundingRect().center())  # the row names: no time there
    assert "Add marker here" not in [a.text() for a in demo_window.pane_menu.actions()]
    assert "Clear markers" in [a.text() for a in demo_window.pane_menu.actions()]
    demo_window.pane_menu.close()


def test_two_markers_select_the_window_between_them(demo_window, qtbot):
    session = demo_window.session
    d = session.max_duration_ns
    session.set_playhead(0.1)
    qtbot.keyClick(demo_window, Qt.Key.Key_M)
    pane = demo_window.panes[0]
    demo_window._pane_menu(pane, pane.mapToGlobal(pane.rect().center()), 0.3)
    add = next(a for a in demo_window.pane_menu.actions() if a.text() == "Add marker here")
    add.trigger()
    demo_window.pane_menu.close()
    assert session.markers == pytest.approx([0.1, 0.3])
    assert session.area == pytest.approx((0.1, 0.3))
    xs = sorted({round(line.value()) for line in pane.marker_lines})
    assert xs == [round(0.1 * d), round(0.3 * d)]
    assert len(pane.plots) == 2 and len(pane.marker_lines) == 2 * len(pane.plots)  # timeline and counter bands
    session.clear_markers()
    assert pane.marker_lines == []


def test_the_app_has_its_icon_and_an_about_box(demo_window, monkeypatch):
    from PySide6.QtWidgets import QApplication

    from neuronviz import __version__

    icon = QApplication.instance().windowIcon()
    assert not icon.isNull()
    assert icon.pixmap(32, 32).toImage().pixelColor(12, 12) == QColor(ENGINE_COLORS["tensor"])
    shown = []
    monkeypatch.setattr(QMessageBox, "about", lambda parent, title, text: shown.append(text))
    demo_window.show_about()
    assert f"neuronviz {__version__}" in shown[0]


def test_the_progress_dialog_of_a_slow_open_shows_itself(demo_window, qtbot, monkeypatch):
    import time
    from pathlib import Path

    import neuronviz.main_window as mw

    monkeypatch.setattr(mw, "BACKGROUND_OPEN_BYTES", 0)
    real = demo_window.loader._open_runs
    demo_window.loader._open_runs = lambda path, progress: (time.sleep(5.0), real(path, progress))[1]
    demo_window.open_files([str(Path(__file__).parents[1] / "data" / "bert-base-trn1-inf2.nvtrace")])
    # the open is still running while the dialog is awaited (a loaded machine may be slow to show it)
    qtbot.waitUntil(lambda: demo_window.opening is not None and demo_window.opening.isVisible(), timeout=4800)
    qtbot.waitUntil(lambda: len(demo_window.panes) == 2, timeout=10_000)
    assert demo_window.opening is None


def test_a_background_open_shows_how_far_it_has_read_and_a_cancel_stops_it(demo_window, qtbot, tmp_path,
                                                                           monkeypatch):
    import json
    import time

    import neuronviz.main_window as mw
    import sim.io.chrome as chrome

    monkeypatch.setattr(mw, "BACKGROUND_OPEN_BYTES", 0)
    monkeypatch.setattr(chrome, "CHUNK_BYTES", 2048)  # a small file read in many pieces
    path = tmp_path / "pieces.json"
    path.write_text(json.dumps([{"ph": "X", "name": f"op{i % 7}", "pid": 1, "tid": 1 + i % 3, "ts": i, "dur": 1}
                                for i in range(3000)]))
    seen = []
    demo_window.loader.sig_progress.connect(
        lambda gen, share: seen.append((share, demo_window.opening.value() if demo_window.opening else None)))
    assert demo_window.open_files([str(path)])
    qtbot.waitUntil(lambda: len(demo_window.panes) == 1, timeout=10_000)
    shares = [share for share, _ in seen]
    assert len(shares) > 20 and shares == sorted(shares) and 0 < shares[0] < 0.1 and shares[-1] == 1.0
    # the progress bar follows, its last step kept for building the panes
    assert [value for _, value in seen][len(seen) // 2] == round(shares[len(seen) // 2] * mw.OPEN_PROGRESS_STEPS)
    assert max(value for _, value in seen) == mw.OPEN_PROGRESS_STEPS - 1

    # slowed to a twentieth of a second a piece the load takes seconds; a cancel stops it at its next piece
    real = demo_window.loader._open_runs
    demo_window.loader._open_runs = lambda p, progress: real(p, lambda share: (time.sleep(0.05), progress(share)))
    seen.clear()
    before = list(demo_window.session.runs)
    demo_window.open_files([str(path)])
    qtbot.waitUntil(lambda: len(seen) >= 2, timeout=5000)
    demo_window.opening.canceled.emit()  # what the Cancel button does
    qtbot.waitUntil(lambda: not demo_window.loader.busy, timeout=1000)
    assert len(seen) < 10 and demo_window.session.runs == before


def test_an_unexpected_error_in_a_background_open_is_reported_not_swallowed(demo_window, qtbot, monkeypatch):
    import neuronviz.main_window as mw

    monkeypatch.setattr(mw, "BACKGROUND_OPEN_BYTES", 0)
    shown = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: shown.append(text))

    def broken(path, progress):
        raise ZeroDivisionError("float division by zero")

    from pathlib import Path

    golden = str(Path(__file__).parents[1] / "data" / "bert-base-trn1-inf2.nvtrace")
    demo_window.loader._open_runs = broken
    demo_window.open_files([golden])
    qtbot.waitUntil(lambda: bool(shown), timeout=5000)
    assert shown == [f"{golden}: cannot be shown (ZeroDivisionError: float division by zero)"]
    assert demo_window.opening is None and len(demo_window.panes) == 4


def test_summary_table_sorts_copies_and_explains_its_columns(demo_window):
    from PySide6.QtGui import QGuiApplication

    table = demo_window.summary
    assert table.rowCount() == 4
    latency = table.column("latency_ms")
    table.sortItems(latency, Qt.SortOrder.AscendingOrder)
    shown = [table.item(r, latency).value for r in range(4)]
    expected = sorted(run.metrics.latency_s * 1e3 for run in demo_window.session.runs)
    assert shown == expected
    assert [table.item(r, latency).text() for r in range(4)] == [catalogue.text("latency_ms", v) for v in expected]
    assert table.item(0, 0).text().startswith("Trainium2")  # the fastest of the demo's four
    table.selectRow(1)
    table.copy_selection()
    lines = QGuiApplication.clipboard().text().splitlines()
    titles = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert lines[0].split("\t") == titles and len(lines) == 2 and titles[2] == "latency ms"
    assert lines[1].split("\t")[0] == table.item(1, 0).text()
    # a column explains itself from the catalogue: its definition and what it is of
    assert "drawn span of its events" in table.horizontalHeaderItem(latency).toolTip()
    assert "Of: request." in table.horizontalHeaderItem(latency).toolTip()
    assert "TTFT ms" not in titles  # no run of the demo generates


def test_keys_drive_the_playhead_zoom_pan_playback_and_time_mode(demo_window, qtbot, monkeypatch):
    from neuronviz.main_window import PAN_STEP, PLAYHEAD_STEP, ZOOM_STEP

    session, timeline = demo_window.session, demo_window.panes[0].timeline
    monkeypatch.setattr(demo_window, "_mouse_x", lambda: None)  # zoom around the playhead, not the pointer
    key = lambda k: qtbot.keyClick(demo_window, k)  # noqa: E731
    key(Qt.Key.Key_End)
    assert session.playhead == 1.0
    key(Qt.Key.Key_Home)
    assert session.playhead == 0.0
    key(Qt.Key.Key_Right)
    key(Qt.Key.Key_Right)
    key(Qt.Key.Key_Left)
    assert session.playhead == pytest.approx(PLAYHEAD_STEP)
    (a0, a1), _ = timeline.viewRange()
    key(Qt.Key.Key_Plus)
    (b0, b1), _ = timeline.viewRange()
    assert b1 - b0 == pytest.approx((a1 - a0) / ZOOM_STEP)
    key(Qt.Key.Key_D)
    (c0, c1), _ = timeline.viewRange()
    assert c0 - b0 == pytest.approx(PAN_STEP * (b1 - b0))
    key(Qt.Key.Key_Minus)
    (d0, d1), _ = timeline.viewRange()
    assert d1 - d0 == pytest.approx(a1 - a0)
    key(Qt.Key.Key_Space)
    assert demo_window.playback.playing
    key(Qt.Key.Key_Space)
    assert not demo_window.playback.playing
    key(Qt.Key.Key_N)  # each run on its own duration: the shared axis is a fraction of the run
    assert session.normalised
    for pane in demo_window.panes:
        (x0, x1), _ = pane.timeline.viewRange()
        assert x0 < 0.0 < 1.0 < x1 < 1.05
        assert pane.time_axis.tickStrings([0.5], 1.0, 0.1) == ["50%"]
    key(Qt.Key.Key_N)
    assert not session.normalised
    assert timeline.viewRange()[0][1] == pytest.approx(1.01 * session.max_duration_ns, rel=0.02)


def test_window_size_and_docks_are_remembered_between_launches(demo_window, qtbot, settings):
    from PySide6.QtCore import QSize
    from PySide6.QtWidgets import QDockWidget

    from neuronviz.app import build_window

    def dock(window, name):
        return next(d for d in window.findChildren(QDockWidget) if d.objectName() == name)

    demo_window.resize(780, 700)  # within the offscreen screen (800x800): Qt fits a restored window to its screen
    dock(demo_window, "Summary").hide()
    qtbot.waitUntil(lambda: dock(demo_window, "Layer details").isVisible())
    assert demo_window.close()
    again = build_window(None, settings)
    qtbot.addWidget(again)
    again.show()
    qtbot.waitExposed(again)
    assert again.size() == QSize(780, 700)
    assert not dock(again, "Summary").isVisible() and dock(again, "Layer details").isVisible()


def test_counter_legends_fold_into_rows_to_stay_inside_narrow_panes(demo_window, qtbot):
    demo_window.resize(620, 800)  # panes without their chip diagram (too narrow for it)
    qtbot.wait(50)
    pane = demo_window.panes[1]
    view = pane.counters.getViewBox()
    busy = pane.legends[0]
    assert view.width() < 300  # narrower than the four engines' legend on one line
    assert busy.columnCount < 4 and busy.pos().x() >= 0
    assert busy.pos().x() + busy.boundingRect().width() <= view.width()
    demo_window.resize(1600, 1000)
    qtbot.wait(50)
    assert busy.columnCount == 4  # wide again: one line


def test_a_counter_legend_is_one_short_row_that_leaves_its_band_in_sight(demo_window, qtbot):
    """A legend on one line covers the top of its band only: the default 20 px samples and 9 px
    margins made it 38 px of a 53 px band, and the curves under its veil looked like they ended
    where it began."""
    demo_window.resize(1600, 900)
    qtbot.wait(50)
    for pane in demo_window.panes:
        band_px = pane.counters.getViewBox().height() / pane._shown_bands
        for legend in pane.legends[:pane._shown_bands]:
            assert legend.boundingRect().height() <= band_px * 0.35, pane.run.title


def test_a_training_run_over_instances_plots_its_neuronlink_and_efa_traffic(demo_window, qtbot, tmp_path):
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    path = tmp_path / "cluster.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="bert-base", instance="trn1.32xlarge", mode="training", batch=8,
                                             nodes=2))])
    assert demo_window.open_files([str(path)])
    (pane,) = demo_window.panes
    assert [band.title for band in pane.bands] == ["busy %", "SRAM %", "GB/s", "link GB/s"]
    assert [label.text for _, label in pane.legends[3].items] == ["NeuronLink", "EFA"]
    assert "1&nbsp;core/copy × 64&nbsp;copies on 2&nbsp;×&nbsp;trn1.32xlarge" in pane.header.text()
    # the gradient all-reduces light the band where they run, at the end of the backward pass
    pane.timeline.setXRange(0, pane.run.duration_ns, padding=0)
    qtbot.wait(20)
    pixels = _grab(pane.graphics).astype(int)
    efa = np.array(QColor(ENGINE_COLORS["efa"]).getRgb()[:3])
    assert (np.abs(pixels - efa).sum(axis=2) < 40).sum() > 20
    # the chip diagram draws the instance's 4x4 torus, every chip in use, and its EFA to the other
    # instance, lit while the last gradient all-reduce crosses it
    coll = pane.run.trace.events["track"] == pane.run.trace.track_index("collective")
    busy = pane.run.trace.events["start_ns"][coll][-1] + pane.run.trace.events["dur_ns"][coll][-1] / 2
    state = pane.chip_state(busy)
    assert (state.topology, state.topology_dims, state.chips_used, state.nodes) == ("torus", (4, 4), 16, 2)
    assert state.efa_bytes_per_s > 0 and state.link_peak_bytes_per_s == 384e9
    pane.diagram.set_state(state)
    qtbot.wait(20)
    diagram = _grab(pane.diagram).astype(int)
    assert (np.abs(diagram - efa).sum(axis=2) < 40).sum() > 50  # the EFA box, filled by its traffic
    idle = pane.chip_state(0.0)
    assert idle.efa_bytes_per_s == 0.0 and idle.topology == "torus"


def test_a_single_chip_run_draws_no_topology(demo_window):
    assert all(pane.chip_state(0.0).topology is None for pane in demo_window.panes)


def test_the_scaling_tab_sweeps_the_training_runs_over_1_to_64_instances(demo_window, qtbot, tmp_path):
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    view = demo_window.scaling
    assert not view.button.isEnabled() and "needs a training run" in view.status.text()  # the demo is inference
    path = tmp_path / "train.nvtrace"
    trace = simulate(RunConfig(model="bert-base", instance="trn1.32xlarge", mode="training", batch=8))
    save_file(str(path), [trace])
    assert demo_window.open_files([str(path)])
    assert view.button.isEnabled() and view.status.text().startswith("1 training run(s)")
    view.start()
    qtbot.waitUntil(lambda: view.button.isEnabled(), timeout=120_000)
    points = view.points[0]
    assert [p.nodes for p in points] == [1, 2, 4, 8, 16, 32, 64]
    efficiency = [p.efficiency for p in points]
    assert efficiency[0] == 1.0 and efficiency == sorted(efficiency, reverse=True)
    # every instance costs the same per hour: a step on n instances costs n times its time's worth of one
    price = trace.meta["price_usd_per_hour"]
    for p in points:
        assert p.cost_per_step_usd == pytest.approx(price * p.nodes * p.step_s / 3600)
    assert len(view.plots["step"].listDataItems()) == 1


def test_log_axes_tick_at_one_two_and_five_times_powers_of_ten_or_fewer_over_many_decades():
    from neuronviz.axes import log_ticks

    assert [label for _, label in log_ticks(0.0002, 0.015, "$")] == [
        "$0.0001", "$0.0002", "$0.0005", "$0.001", "$0.002", "$0.005", "$0.01", "$0.02"]
    assert log_ticks(3.0, 40.0, "$")[0] == (pytest.approx(math.log10(2)), "$2")
    assert [label for _, label in log_ticks(700, 3000)] == ["500", "1,000", "2,000", "5,000"]
    # many decades (a Roofline from an embedding's 0.0002 TFLOP/s to the peak): labels that do not touch
    assert [label for _, label in log_ticks(0.5, 3000)] == ["1", "10", "100", "1,000"]
    assert [label for _, label in log_ticks(0.0002, 10_000)] == ["0.0001", "0.01", "1", "100", "10,000"]


def test_the_demo_streams_requests_so_every_pane_works_all_through_the_playback(demo_window):
    runs = demo_window.session.runs
    assert [r.trace.meta["requests"] > 1 for r in runs] == [False, True, True, True]  # inf1 takes longest
    longest = demo_window.session.max_duration_ns
    for pane in demo_window.panes:
        assert pane.run.duration_ns > 0.9 * longest
        state = pane.chip_state(0.5 * longest)
        assert state.activity["tensor"] > 0.05 and max(state.activity.values()) > 0.2, pane.run.title
    trn2 = demo_window.panes[3].chip_state(0.5 * longest)
    per_request = runs[3].trace.meta["total_ns"] / runs[3].trace.meta["requests"]
    n = runs[3].trace.meta["requests"]  # as many as fit in Inferentia1's one: Trn2 is over 15x faster
    assert n >= 15 and trn2.requests_done == int(0.5 * longest / per_request) and trn2.requests_total == n
    assert f"{n} requests back to back" in demo_window.panes[3].header.text()


def test_a_training_panes_header_gives_the_step_time_and_samples_per_second():
    from neuronviz.session import Run
    from neuronviz.widgets.pane import header_html
    from sim.run import RunConfig, simulate

    run = Run(simulate(RunConfig(model="distilbert", chip="trn1", mode="training", batch=8)))
    text = header_html(run, None)
    assert f"step {catalogue.text('latency_ms', run.metrics.latency_s * 1e3)} ms" in text and "latency" not in text
    assert f"{catalogue.text('throughput_per_s', run.metrics.throughput_per_s)} samples/s" in text
    assert f"${catalogue.text('cost_per_step_usd', run.metrics.cost_per_step_usd)} per step" in text
    assert "1&nbsp;core/copy" in text  # one core, singular; a copy over two cores, plural
    base = Run(simulate(RunConfig(model="distilbert", chip="inf2", mode="training", batch=8)))
    ratio = base.metrics.latency_s / run.metrics.latency_s
    assert f"<b>{catalogue.times(ratio)}</b> vs inf2" in header_html(run, base)  # written as the Summary writes it
    two = Run(simulate(RunConfig(model="distilbert", chip="trn1", mode="training", batch=8, cores=2)))
    assert "2&nbsp;cores/copy" in header_html(two, None)


def test_an_inference_panes_header_says_when_host_copies_are_much_of_its_latency():
    from neuronviz.session import Run
    from neuronviz.widgets.pane import header_html
    from sim.run import RunConfig, simulate

    run = Run(simulate(RunConfig(model="xlm-roberta-base", chip="inf2", head="mlm")))
    ev = run.trace.events
    copies = float(ev["dur_ns"][ev["track"] == run.trace.track_index("host")].sum())  # in and out, drawn
    assert f"(incl. {catalogue.text('host_ms', copies * 1e-6)} ms on the host)" in header_html(run, None)
    assert "on the host" not in header_html(Run(simulate(RunConfig(model="xlm-roberta-base", chip="inf2"))), None)


def test_a_t5_panes_header_says_how_much_of_a_token_is_the_host_generate_loop():
    from neuronviz.session import Run
    from neuronviz.widgets.pane import header_html
    from sim.hardware.chip import get_chip
    from sim.run import RunConfig, simulate

    run = Run(simulate(RunConfig(model="t5-3b", chip="inf2", mode="decode", seq=128, new_tokens=16, cores=8,
                                 beams=4, max_seq=128), max_events=0))
    host = get_chip("inf2").efficiency.generate_step_s
    html = header_html(run, None)
    loop = catalogue.text("host_per_token_ms", host * 1e3)
    # its time per token carries its class's validation error first (T5's pages publish only a whole
    # generation's latency per token: not validated), then the host's part
    assert (f"ms/token <span style='color:gray'>not&nbsp;validated</span> <span style='color:gray'>(incl. {loop} ms "
            "on the host)</span>") in html
    llama = Run(simulate(RunConfig(model="llama-2-7b", chip="inf2", mode="decode", seq=128, new_tokens=8, cores=8),
                         max_events=0))
    assert "on the host" not in header_html(llama, None)  # its host costs are the request's, before the first token


def test_a_serving_pane_counts_requests_and_tokens_and_greys_the_steps_not_stored(demo_window, tmp_path):
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    trace = simulate(RunConfig(model="gpt2", chip="trn2", mode="serve", batch=4, concurrency=4, requests=8, seq=128,
                               new_tokens=64), max_events=60_000)
    path = tmp_path / "serve.nvtrace"
    save_file(str(path), [trace])
    assert demo_window.open_files([str(path)])
    pane = demo_window.panes[0]
    assert "8 requests from 4 users" in pane.header.text() and "TTFT p50" in pane.header.text()
    serving = trace.meta["serving"]
    end = max(serving["finish_ns"])
    assert pane.run.duration_ns == pytest.approx(end)  # the axis spans the run, not only its stored events
    spans = trace.unstored_spans  # split where the server waits for the users' next requests
    assert spans[-1][1] == pytest.approx(end) and sum(n for *_, n in spans) > 100
    regions = [item for item, *_ in pane.unstored_items if isinstance(item, pg.LinearRegionItem)]
    assert regions and regions[0].getRegion() == pytest.approx(spans[0][:2])
    start, stop, _ = spans[0]
    # halfway through the unstored stretch: the counters follow the run, the engines an identical stored step
    t = (start + stop) / 2
    state = pane.chip_state(t)
    assert state.requests_done == sum(f <= t for f in serving["finish_ns"]) and state.requests_total == 8
    first = sum(f <= t for f in serving["first_token_ns"])
    steps = sum(k for e, k in zip(serving["step_end_ns"], serving["step_tokens"], strict=True) if e <= t)
    assert state.tokens_done == first + steps > 0
    assert state.activity["tensor"] > 0.05


def test_replayed_steps_are_named_in_the_layers_row_and_leave_the_rows_shades_alone(demo_window, qtbot, tmp_path):
    """Steps not stored as events are marked in the Layers row, where hovering says which steps
    repeat which; the engine rows there keep the background where the engines are idle."""
    from PySide6.QtWidgets import QToolTip

    from sim.io import save_file
    from sim.run import RunConfig, simulate

    trace = simulate(RunConfig(model="gpt2", chip="trn2", mode="serve", batch=4, concurrency=4, requests=8, seq=128,
                               new_tokens=64), max_events=60_000)
    path = tmp_path / "serve.nvtrace"
    save_file(str(path), [trace])
    assert demo_window.open_files([str(path)])
    pane = demo_window.panes[0]
    start, end, n = trace.unstored_spans[0]
    assert pane.replayed.names[0] == f"↻ replayed ×{n:,}"
    assert pane.replayed.span_at((start + end) / 2) == 0 and pane.layers.span_at((start + end) / 2) == -1
    pane.timeline.setXRange(start, end, padding=0)
    qtbot.wait(20)
    vb = pane.timeline.getViewBox()
    t = start + 0.4 * (end - start)
    pane._hover(vb.mapViewToScene(QPointF(t, -0.5)))
    phase = trace.meta["phases"][int(trace.replay_phases[0])]
    stored = phase["stored"]
    step = stored + int((t - start) // ((phase["end_ns"] - phase["start_ns"]) / phase["repeat"])) + 1
    assert (f"steps {stored + 1:,}–{phase['repeat']:,} of “{phase['name']}” repeat the events of its step 1"
            in QToolTip.text()) and f"This is step {step:,}" in QToolTip.text()
    # a pixel of the replayed stretch where an engine row is idle is the background, not a grey veil
    img = pane.graphics.grab().toImage()
    px = vb.viewPixelSize()[0]
    idle = [(x, row) for row, bi in enumerate(pane.view.integrals) for x in np.linspace(start, end, 200)[1:-1]
            if bi.window_mean(x - 2 * px, x + 2 * px) == 0]
    assert idle
    x, row = idle[len(idle) // 2]
    p = pane.graphics.mapFromScene(vb.mapViewToScene(QPointF(x, row + 0.5)))
    assert img.pixelColor(p).name() == palette().background


def test_the_requests_tab_draws_every_request_of_a_serving_run_and_their_distributions(demo_window, tmp_path):
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    requests_dock = demo_window.findChild(QDockWidget, "Requests")
    view = demo_window.requests
    summary_height = demo_window.findChild(QDockWidget, "Summary").height()
    requests_dock.raise_()
    QApplication.processEvents()
    assert view.message.isVisible() and "serving runs" in view.message.text()  # the demo serves none
    # a line of text: the dock keeps the panes' room instead of growing to the plots' height
    assert requests_dock.height() == summary_height < 200
    traces = [simulate(RunConfig(model="gpt2", chip=c, mode="serve", batch=2, concurrency=4, requests=6, seq=64,
                                 new_tokens=8), max_events=0) for c in ("inf2", "trn2")]
    path = tmp_path / "serve.nvtrace"
    save_file(str(path), traces)
    assert demo_window.open_files([str(path)])
    QApplication.processEvents()
    assert not view.message.isVisible() and len(view.gantts) == 2
    assert requests_dock.height() > summary_height + 100  # now it has plots to show, its dock grows for them
    bars = [item for item in view.gantts[1].getPlotItem().items if isinstance(item, pg.BarGraphItem)]
    served = traces[1].meta["serving"]
    waiting, decoding = (np.asarray(b.opts["x1"]) - np.asarray(b.opts["x0"]) for b in bars)
    sent, first, finish = (np.asarray(served[k]) / 1e6 for k in ("sent_ns", "first_token_ns", "finish_ns"))
    assert waiting == pytest.approx(first - sent) and decoding == pytest.approx(finish - first)  # ms
    curves = view.cdf["TTFT"].getPlotItem().listDataItems()
    assert len(curves) == 2 and curves[1].yData[-1] == pytest.approx(1.0)
    assert curves[1].xData.max() == pytest.approx(max(np.asarray(served["first_token_ns"]) -
                                                      np.asarray(served["sent_ns"])) / 1e6)
    # the percentiles are keyed below the plot, where no curve can cover them, one run a piece
    assert view.cdf["TTFT"].getPlotItem().legend is None
    serving = demo_window.session.runs[1].metrics.serving
    key = view.keys["TTFT"].text()
    assert (f"trn2.48xlarge:&nbsp;p50&nbsp;{serving['ttft_p50_s'] * 1e3:,.0f}&nbsp;ms,&nbsp;p99&nbsp;"
            f"{serving['ttft_p99_s'] * 1e3:,.0f}&nbsp;ms") in key and key.count("&#9632;") == 2


def test_a_run_compiled_at_another_level_says_so_in_its_title(demo_window, tmp_path):
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    path = tmp_path / "levels.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="bert-base", instance="trn1.2xlarge", optlevel=o)) for o in (1, 2)])
    assert demo_window.open_files([str(path)])
    o1, o2 = demo_window.panes
    assert o1.header.text().startswith("<b>Trainium1 · trn1.2xlarge · -O1</b>")
    assert o2.header.text().startswith("<b>Trainium1 · trn1.2xlarge</b>")
    # the summary table tells the two runs apart too
    table = demo_window.summary
    assert [table.item(r, 0).text() for r in range(table.rowCount())] == [
        "Trainium1 · trn1.2xlarge · -O1", "Trainium1 · trn1.2xlarge"]


def test_every_demo_pane_shows_all_its_counter_bands_at_the_default_size(demo_window, qtbot):
    # the Trn2 pane has one more track (Collective) than the others and a header that wraps
    # (its 64 copies): it still keeps room for busy %, SRAM % and GB/s
    qtbot.wait(50)
    for pane in demo_window.panes:
        assert [band.title for band in pane.bands] == ["busy %", "SRAM %", "GB/s"]
        assert all(legend.isVisible() for legend in pane.legends), pane.run.label


def test_a_panes_header_gives_the_cost_or_says_the_instance_has_no_published_price():
    from neuronviz.session import Run
    from neuronviz.widgets.pane import header_html
    from sim.run import RunConfig, simulate

    priced = Run(simulate(RunConfig(model="bert-base", instance="trn2.48xlarge")))
    cost = catalogue.text("cost_per_million_usd", priced.metrics.cost_per_million_usd)
    assert f"${cost} per million inferences" in header_html(priced, None)
    unpriced = Run(simulate(RunConfig(model="bert-base", instance="trn2.3xlarge")))
    assert unpriced.metrics.cost_per_million_usd is None
    text = header_html(unpriced, None)
    assert "no published price" in text and "per million" not in text and "n/a" not in text


def test_a_run_that_has_ended_holds_its_last_state_in_the_diagram_and_says_done(demo_window, qtbot):
    from neuronviz.widgets.pane import ACTIVITY_WINDOW

    session = demo_window.session
    panes = sorted(demo_window.panes, key=lambda p: p.run.duration_ns)
    short, longest = panes[0], panes[-1]
    assert short.run.duration_ns < longest.run.duration_ns  # the longest still plays when it ends
    session.set_playhead((1.0 + short.run.duration_ns / longest.run.duration_ns) / 2)
    end = short.run.duration_ns
    held = short.view.activity(end - ACTIVITY_WINDOW * end / 2, ACTIVITY_WINDOW * end)
    state = short.diagram.state
    assert state.done and state.activity == held and max(state.activity.values()) > 0.05  # not all 0%
    assert not longest.diagram.state.done
    short.diagram.resize(230, 300)
    lit = short.diagram.grab().toImage()
    tensor = QColor(ENGINE_COLORS["tensor"])
    assert any(abs(lit.pixelColor(x, y).blue() - tensor.blue()) + abs(lit.pixelColor(x, y).red() - tensor.red()) < 30
               for x in range(10, 220, 3) for y in range(20, 120, 3))  # its Tensor cell still lit


def test_every_pane_of_a_comparison_draws_the_same_counter_bands(demo_window):
    from neuronviz.session import SIMULATED, Run
    from neuronviz.widgets.pane import NOT_IN_RUN
    from sim.run import RunConfig, simulate

    alone = simulate(RunConfig(model="bert-base", chip="trn1"))  # one core: no NeuronLink traffic
    spread = simulate(RunConfig(model="gpt2", instance="inf2.24xlarge", cores=4, mode="decode", seq=64,
                                new_tokens=2))  # over two chips: the ring's traffic
    demo_window.session.set_runs([Run(alone, source=SIMULATED), Run(spread, source=SIMULATED)])
    titles = [[b.title for b in pane.bands] for pane in demo_window.panes]
    assert titles == [["busy %", "SRAM %", "GB/s", "link GB/s"]] * 2
    legend = demo_window.panes[0].legends[3]
    assert [label.text for _, label in legend.items] == [NOT_IN_RUN]
    assert [label.text for _, label in demo_window.panes[1].legends[3].items] == ["NeuronLink"]


def test_a_panes_header_gives_each_headline_figure_its_validation_error():
    # "TTFT 252 ms ±17% (7 ... rows)": the class's median absolute error over the published rows
    # (sim/calibration/errors.toml), and "not validated" where none is of the class (Trainium3)
    from neuronviz.session import Run
    from neuronviz.widgets.pane import header_html
    from sim.run import RunConfig, simulate
    from sim.validated import class_of, error_table, headline_text

    cfg = RunConfig(model="llama-2-7b", chip="inf2", mode="decode", seq=128, new_tokens=8, cores=8,
                    stack="transformers-neuronx")
    errors = error_table()
    ttft, tpot = (errors[class_of(cfg, "inf2", m)] for m in ("ttft_ms", "tpot_ms"))
    html = header_html(Run(simulate(cfg, max_events=0)), None)
    for e in (ttft, tpot):
        said = f"±{100 * e.median_abs_error:.0f}% ({e.rows} rows)".replace(" ", "&nbsp;")
        assert f"<span style='color:gray'>{said}</span>" in html
    assert " · bf16 · TNX" in html  # the stack whose rows they are, named once
    text = headline_text(Run(simulate(cfg, max_events=0)).trace)  # the header's tooltip, the Summary, report
    assert text == (f"TTFT ±{100 * ttft.median_abs_error:.0f}% ({ttft.rows} TNX inf2 rows) · TPOT "
                    f"±{100 * tpot.median_abs_error:.0f}% ({tpot.rows} TNX inf2 rows)")
    trn3 = header_html(Run(simulate(RunConfig(model="llama-2-7b", chip="trn3", mode="decode", seq=128, new_tokens=8),
                                    max_events=0)), None)
    assert trn3.count("not&nbsp;validated") == 2  # its TTFT and its time per token


def test_a_speculating_panes_header_says_how_and_whether_its_acceptance_is_the_published_default():
    from neuronviz.session import Run
    from neuronviz.widgets.pane import header_html
    from sim.run import RunConfig, simulate

    kw = dict(model="llama-3.1-8b", chip="trn2", mode="decode", seq=128, new_tokens=8, cores=8, spec_method="eagle3",
              spec_k=3)
    default = header_html(Run(simulate(RunConfig(**kw), max_events=0)), None)
    # the EAGLE3 tutorial's 86.49/72.47/63.46%: 1 + 2.2242 tokens a step
    assert "eagle3 ×3 (3.22&nbsp;tokens/step, published default acceptance)" in default
    stated = header_html(Run(simulate(RunConfig(**kw, spec_acceptance=(0.5,)), max_events=0)), None)
    assert "eagle3 ×3 (2.50&nbsp;tokens/step)" in stated  # a mean rate of 0.5 over 3 drafts: 1.5 accepted
