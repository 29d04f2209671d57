"""`neuronviz screenshot`: headless PNGs of the demo or of files, with one-line errors."""

import numpy as np
import pytest
from PySide6.QtGui import QColor, QImage

from neuronviz.cli import main
from neuronviz.theme import ENGINE_COLORS


def _pixels(path):
    img = QImage(str(path)).convertToFormat(QImage.Format.Format_RGB888)
    arr = np.frombuffer(img.constBits(), np.uint8, img.sizeInBytes()).reshape(img.height(), img.bytesPerLine())
    return img, arr[:, : 3 * img.width()].reshape(img.height(), img.width(), 3)


def test_demo_screenshot_has_the_size_and_shows_engine_colours(tmp_path, capsys):
    out = tmp_path / "demo.png"
    assert main(["screenshot", "-o", str(out), "--size", "1400x900", "--at", "0.02"]) == 0
    img, px = _pixels(out)
    assert (img.width(), img.height()) == (1400, 900)
    colours = {tuple(c) for c in px[::7, ::7].reshape(-1, 3)}
    assert len(colours) > 200
    for kind in ("tensor", "vector", "scalar", "dma_read"):
        rgb = np.array(QColor(ENGINE_COLORS[kind]).getRgb()[:3])
        assert (np.abs(px.astype(int) - rgb).sum(axis=2) < 40).sum() > 100, kind


def test_one_pane_of_a_file(tmp_path):
    out = tmp_path / "pane.png"
    from pathlib import Path

    golden = Path(__file__).parents[1] / "data" / "bert-base-trn1-inf2.nvtrace"
    assert main(["screenshot", str(golden), "-o", str(out), "--size", "800x500", "--pane", "2"]) == 0
    img, _ = _pixels(out)
    assert (img.width(), img.height()) == (800, 500)


def test_a_serving_run_with_the_playhead_moved_before_its_requests_tab_is_looked_at(tmp_path):
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    served = tmp_path / "serve.nvtrace"
    save_file(str(served), [simulate(RunConfig(model="gpt2", chip="trn2", mode="serve", batch=2, concurrency=2,
                                               requests=4, seq=64, new_tokens=8), max_events=0)])
    out = tmp_path / "serve.png"
    assert main(["screenshot", str(served), "-o", str(out), "--size", "800x500", "--at", "0.3"]) == 0
    assert QImage(str(out)).width() == 800


@pytest.mark.parametrize("argv, message", [
    (["--size", "big"], "bad size 'big'"), (["--size", "50x50"], "bad size"),
    (["--pane", "9"], "--pane 9: the view has 4 pane(s)"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, message):
    assert main(["screenshot", "-o", str(tmp_path / "x.png"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_file_and_bad_output_path(tmp_path, capsys):
    bad = tmp_path / "bad.nvtrace"
    bad.write_text("nope")
    assert main(["screenshot", str(bad), "-o", str(tmp_path / "x.png")]) == 2
    assert "bad.nvtrace" in capsys.readouterr().err
    assert main(["screenshot", "-o", str(tmp_path / "missing" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.png"))


def test_dark_theme_screenshot_is_mostly_dark(tmp_path, capsys):
    out = tmp_path / "dark.png"
    try:
        assert main(["screenshot", "-o", str(out), "--size", "800x500", "--theme", "dark"]) == 0
    finally:
        from neuronviz.theme import apply_theme

        apply_theme("system")
    _, px = _pixels(out)
    assert (px.mean(axis=2) < 80).mean() > 0.5
