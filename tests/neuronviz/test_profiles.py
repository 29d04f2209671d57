"""A Neuron Explorer profile through every way a user opens one: the command line, File > Open
(its directory or one of its tables), drag and drop; its measured figures in the header."""

import json

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from neuronviz.cli import main
from tests.profiles import small_profile


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
    assert labels == ["Layers", "Host", "Tensor", "Vector", "Scalar", "DMA read", "DMA write", "CC ops", "CC-core 1",
                      "NC0 Sync", "NC0 waits", "Throttle"]


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
