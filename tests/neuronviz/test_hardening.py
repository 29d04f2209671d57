"""Outputs never damaged by a failing command, only regular files written, stale temporaries of
killed saves cleaned, mistyped commands and impossible sizes refused."""

import os

import pytest

from neuronviz.cli import main
from sim.io import save_file
from sim.run import RunConfig, simulate


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("hard") / "two.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="bert-base", chip=c)) for c in ("inf2", "trn1")])
    return path


def test_a_mistyped_command_is_an_error_naming_the_commands(capsys):
    assert main(["reprot", "run.nvtrace"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neuronviz: error: unknown command 'reprot'") and "report" in err and err.count("\n") == 1


@pytest.mark.parametrize("target", ["/dev/null", "dir"])
def test_output_goes_only_to_regular_files(tmp_path, capsys, target):
    out = str(tmp_path) if target == "dir" else target
    assert main(["simulate", "--model", "bert-base", "--chips", "inf2", "-o", out]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")  # the device is still a device


def test_a_failed_screenshot_leaves_the_existing_image_alone(trace_file, tmp_path, capsys):
    out = tmp_path / "view.png"
    out.write_bytes(b"a good image from yesterday")
    assert main(["screenshot", str(trace_file), "-o", str(out), "--pane", "5"]) == 2
    assert "--pane 5: the view has 2 pane(s)" in capsys.readouterr().err
    assert out.read_bytes() == b"a good image from yesterday"


def test_a_failed_animation_leaves_the_existing_gif_alone(trace_file, tmp_path, capsys):
    out = tmp_path / "play.gif"
    out.write_bytes(b"GIF89a yesterday")
    assert main(["animate", str(trace_file), "-o", str(out), "--pane", "3", "--fps", "2", "--seconds", "1"]) == 2
    assert out.read_bytes() == b"GIF89a yesterday"


def test_a_save_removes_the_temporaries_of_saves_that_were_killed(tmp_path):
    target = tmp_path / "run.nvtrace"
    dead = tmp_path / ".run.nvtrace.999999999.abcd.tmp"  # no such process
    mine = tmp_path / f".run.nvtrace.{os.getpid()}.live.tmp"  # a save still running (this process)
    other = tmp_path / ".other.nvtrace.999999999.x.tmp"  # another file's
    for f in (dead, mine, other):
        f.write_bytes(b"partial")
    save_file(str(target), [simulate(RunConfig(model="bert-base", chip="inf2"))])
    assert target.is_file() and not dead.exists() and mine.exists() and other.exists()


def test_a_batch_no_chip_could_hold_is_refused(capsys):
    assert main(["simulate", "--model", "bert-base", "--chips", "inf2", "--batch", str(10**8)]) == 2
    assert "does not fit" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:  # beyond what the option takes: refused as the arguments are read
        main(["simulate", "--model", "bert-base", "--chips", "inf2", "--batch", str(10**30)])
    assert info.value.code == 2
    assert "argument --batch: must be a whole number from 1 to 1,073,741,824" in capsys.readouterr().err
