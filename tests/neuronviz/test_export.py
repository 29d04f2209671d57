"""Export: SVG with its text, animated GIFs and PNG frames, the summary as CSV, from the CLI and the app."""

import csv
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image, ImageSequence
from PySide6.QtGui import QGuiApplication

from neuronviz.cli import main
from neuronviz.export import ExportCancelled, write_animation, write_image, write_summary_csv
from neuronviz.theme import ENGINE_COLORS


def _svg_texts(path):
    root = ET.parse(path).getroot()
    return ["".join(e.itertext()) for e in root.iter() if e.tag.endswith("text")]


def test_screenshot_svg_is_xml_with_the_pane_titles_as_text(tmp_path, capsys):
    out = tmp_path / "view.svg"
    assert main(["screenshot", "-o", str(out), "--size", "1400x900"]) == 0
    root = ET.parse(out).getroot()
    assert root.attrib["viewBox"] == "0 0 1400 900"
    texts = _svg_texts(out)
    for title in ("Inferentia1 · inf1.xlarge", "Inferentia2 · inf2.xlarge", "Trainium1 · trn1.2xlarge",
                  "Trainium2 · trn2.48xlarge"):
        assert title in texts
    assert any(t.startswith("latency ") for t in texts)
    fills = {e.attrib.get("fill", "").lower() for e in root.iter()}
    assert ENGINE_COLORS["tensor"].lower() in fills  # the chip diagram's engines are vector shapes


def _gif_frames(path):
    with Image.open(path) as im:
        return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)], im.info


def test_animate_gif_has_the_frames_asked_for_and_they_change(tmp_path, capsys):
    out = tmp_path / "demo.gif"
    assert main(["animate", "-o", str(out), "--fps", "4", "--seconds", "1.5", "--size", "800x500"]) == 0
    frames, info = _gif_frames(out)
    assert len(frames) == 6
    assert frames[0].shape == (500, 800, 3)
    assert info["duration"] == 250 and info["loop"] == 0
    changed = [np.any(a != b, axis=2).sum() for a, b in zip(frames, frames[1:], strict=False)]
    assert min(changed) > 50  # the playhead (and the chip diagram) moved between every pair of frames
    err = capsys.readouterr().err
    assert "6/6 frames" in err


def test_animate_to_a_folder_writes_numbered_pngs(tmp_path, capsys):
    folder = tmp_path / "frames"
    assert main(["animate", "-o", f"{folder}/", "--fps", "2", "--seconds", "1.5", "--size", "640x400",
                 "--pane", "1"]) == 0
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["frame_1.png", "frame_2.png", "frame_3.png"]
    with Image.open(folder / "frame_1.png") as first:
        assert first.size == (640, 400)


@pytest.mark.parametrize("argv, message", [
    (["-o", "x.gif", "--fps", "0"], "--fps: must be a positive whole number"),
    (["-o", "x.gif", "--seconds", "-1"], "--seconds: must be a positive number"),
    (["-o", "x.gif", "--fps", "60", "--seconds", "100"], "6000 frames"),
    (["-o", "x.mp4"], "unsupported output type (use .gif)"),
    (["-o", "x.gif", "--size", "10x10"], "bad size"),
])
def test_animate_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["animate", *argv])
    except SystemExit as exc:  # argparse's own checks
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err
    assert not list(tmp_path.iterdir())


def test_screenshot_rejects_an_unknown_image_type(tmp_path, capsys):
    assert main(["screenshot", "-o", str(tmp_path / "x.bmp")]) == 2
    assert "unsupported output type (use .png, .svg)" in capsys.readouterr().err


def test_app_exports_one_pane_as_svg_and_png(demo_window, tmp_path):
    pane = demo_window.panes[2]
    write_image(pane, tmp_path / "pane.svg")
    # the header's spaces within a phrase are non-breaking, and word joiners hold "bert-large" together
    texts = [t.replace("\xa0", " ").replace("\u2060", "") for t in _svg_texts(tmp_path / "pane.svg")]
    assert "Trainium1 · trn1.2xlarge" in texts and "Inferentia1 · inf1.xlarge" not in texts
    write_image(pane, tmp_path / "pane.png")
    with Image.open(tmp_path / "pane.png") as png:
        assert png.size == (pane.width(), pane.height())


def test_copy_image_puts_the_window_on_the_clipboard(demo_window):
    demo_window.exports.copy_image()
    image = QGuiApplication.clipboard().image()
    assert (image.width(), image.height()) == (demo_window.width(), demo_window.height())


def test_summary_csv_has_one_row_per_run(demo_window, tmp_path):
    path = tmp_path / "summary.csv"
    assert write_summary_csv(demo_window.session, path) == 4
    rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    assert [r["chip"] for r in rows] == ["inf1", "inf2", "trn1", "trn2"]
    for row, run in zip(rows, demo_window.session.runs, strict=True):
        assert float(row["latency_ms"]) == pytest.approx(run.metrics.latency_s * 1e3, rel=1e-12)  # full precision
        assert row["model"] == "bert-large" and row["batch"] == "1"


def test_cancelled_animation_writes_nothing_and_restores_the_playhead(demo_window, tmp_path):
    demo_window.session.set_playhead(0.3)
    seen = []

    def progress(done, total):
        seen.append(done)
        return done < 3

    with pytest.raises(ExportCancelled):
        write_animation(demo_window.session, demo_window, tmp_path / "a.gif", 10, 2.0, progress=progress)
    assert seen == [0, 1, 2, 3]
    assert list(tmp_path.iterdir()) == []
    assert demo_window.session.playhead == pytest.approx(0.3)


def test_app_animation_export_with_progress_dialog(demo_window, tmp_path):
    path = demo_window.exports.write_animation(str(tmp_path / "a.gif"), 4, 1.0)
    assert path is not None
    frames, _ = _gif_frames(path)
    assert len(frames) == 4


def test_a_frame_folder_is_replaced_whole_and_left_alone_when_cancelled(demo_window, tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "frame_9.png").write_bytes(b"an older, longer export")
    (folder / "notes.txt").write_text("mine")
    write_animation(demo_window.session, demo_window.panes[0], f"{folder}/", 2, 1.5)
    assert sorted(p.name for p in folder.iterdir()) == ["frame_1.png", "frame_2.png", "frame_3.png", "notes.txt"]
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    with pytest.raises(ExportCancelled):
        write_animation(demo_window.session, demo_window.panes[0], f"{folder}/", 2, 2.0,
                        progress=lambda done, total: done < 2)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]  # no staging folder left


def test_an_animation_too_big_to_hold_is_refused_before_rendering(capsys, tmp_path):
    code = main(["animate", "-o", str(tmp_path / "big.gif"), "--fps", "60", "--seconds", "30", "--size", "4000x3000"])
    assert code == 2
    assert "1800 frames of 4000x3000 are too many to hold: at this size at most 125" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
