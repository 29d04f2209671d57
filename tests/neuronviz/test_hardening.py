"""Outputs never damaged by a failing command, only regular files written, stale temporaries of
killed saves cleaned, mistyped commands and impossible sizes refused; the hostile inputs of issue 49
answered in time and memory, interrupted commands quiet, outputs that cannot be written told in one
line."""

import os
import signal
import subprocess
import sys
import time

import pytest

from neuronviz.cli import main
from sim.io import load_file, save_file
from sim.run import RunConfig, simulate
from tests.fuzz_corpus import CONFIG_NAME, HOSTILE, LIMIT_BYTES, LIMIT_SECONDS, measure


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


# issue 49: the commands against hostile files, signals and broken outputs ----------------------

@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    path = tmp_path_factory.mktemp("seed") / "seed.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="distilbert", chip="inf2", seq=64))])
    return path


def _one_line_error(measured, message):
    return measured.code == 2 and measured.stderr == f"neuronviz: error: {message}\n"


@pytest.mark.parametrize("name", [n for n, case in HOSTILE.items() if case.heavy])
def test_a_heavy_hostile_input_is_answered_within_5_s_and_1_gb(seed, tmp_path, name):
    """Time and memory are what these cases are about: each command runs in a process of its own."""
    case = HOSTILE[name]
    path = tmp_path / ("model" if case.is_config else "") / (CONFIG_NAME if case.is_config else f"hostile{case.suffix}")
    path.parent.mkdir(exist_ok=True)
    case.build(seed, path)
    argv = {"info": ["info", path], "screenshot": ["screenshot", path, "-o", tmp_path / "view.png"],
            "simulate": ["simulate", "--model", path, "--chips", "trn2"]}[case.command]
    measured = measure([str(a) for a in argv])
    if case.error is None:
        assert measured.code == 0, measured.stderr
    else:
        assert _one_line_error(measured, case.error.format(path=path)), measured
    assert measured.seconds < LIMIT_SECONDS and measured.peak_bytes < LIMIT_BYTES, measured


def test_a_file_of_more_runs_than_a_comparison_shows_is_refused_by_screenshot(seed, tmp_path, capsys):
    path = tmp_path / "many.nvtrace"
    save_file(str(path), load_file(seed) * 33)
    out = tmp_path / "view.png"
    out.write_bytes(b"yesterday's")
    assert main(["screenshot", str(path), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"neuronviz: error: {path}: 33 runs, more than the 32 a comparison shows side " \
                                      "by side\n"
    assert out.read_bytes() == b"yesterday's"


@pytest.mark.parametrize("word, message", [("", "'' is not a file name"),
                                           (".", ".: is a directory, not a trace file or a Neuron Explorer profile "
                                                 "(no Metadata.parquet in it)")])
def test_an_empty_name_or_a_folder_is_a_one_line_error_not_the_app(capsys, monkeypatch, word, message):
    monkeypatch.setattr("neuronviz.app.run_app", lambda files: pytest.fail("the app opened"))
    for argv in ([word], ["open", word], ["open", "x.nvtrace", word]):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"neuronviz: error: {message}\n"


def test_a_screenshot_that_fails_once_its_view_is_built_leaves_the_existing_image_alone(seed, tmp_path, capsys,
                                                                                         monkeypatch):
    from neuronviz.widgets.pane import ComparisonPane

    built = ComparisonPane.chip_state

    def broken(self, t_ns):  # the view builds, then fails as the playhead moves to --at, before the image is taken
        if t_ns > 0:
            raise ZeroDivisionError("float division by zero")
        return built(self, t_ns)

    monkeypatch.setattr(ComparisonPane, "chip_state", broken)
    for name in ("view.png", "view.svg"):
        out = tmp_path / name
        out.write_bytes(b"a good image from yesterday")
        assert main(["screenshot", str(seed), "-o", str(out)]) == 2
        assert capsys.readouterr().err == "neuronviz: error: could not render the view (ZeroDivisionError: float " \
                                          "division by zero)\n"
        assert out.read_bytes() == b"a good image from yesterday"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["view.png", "view.svg"]  # no temporary file left


def test_an_animation_too_long_for_any_number_is_a_one_line_error(seed, tmp_path, capsys):
    assert main(["animate", str(seed), "-o", str(tmp_path / "a.gif"), "--seconds", "1e308"]) == 2
    assert capsys.readouterr().err == "neuronviz: error: 10 frames/s for 1e+308 s makes more than 2000 frames: " \
                                      "choose 2 to 2000\n"


@pytest.mark.parametrize("command", ["simulate", "screenshot"])
def test_an_output_named_by_a_symlink_is_written_through_it(seed, tmp_path, capsys, command):
    suffix = ".nvtrace" if command == "simulate" else ".png"
    real, link = tmp_path / f"real{suffix}", tmp_path / f"link{suffix}"
    real.write_bytes(b"old")
    link.symlink_to(real.name)
    argv = ["simulate", "--model", "distilbert", "--chips", "inf2", "--seq", "32"] if command == "simulate" \
        else ["screenshot", str(seed)]
    assert main([*argv, "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == real.name and real.read_bytes() != b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([real.name, link.name])


@pytest.mark.parametrize("suffix", [".nvtrace", ".png"])
def test_an_output_name_at_the_file_systems_limit_is_written(seed, tmp_path, capsys, suffix):
    out = tmp_path / ("n" * (245 - len(suffix)) + suffix)
    argv = ["simulate", "--model", "distilbert", "--chips", "inf2", "--seq", "32"] if suffix == ".nvtrace" \
        else ["screenshot", str(seed)]
    assert main([*argv, "-o", str(out)]) == 0, capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == [out.name] and out.stat().st_size > 0


# a save that is slow enough to be interrupted: each column is written a twentieth of a second apart
_SLOW_SAVE = """\
import sys, time
import sim.io.columns as columns
encode = columns.encode
columns.encode = lambda *args: (time.sleep(0.05), encode(*args))[1]
from neuronviz.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_save_exits_quietly_and_leaves_nothing_behind(tmp_path, sig, code):
    out = tmp_path / "run.nvtrace"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, "simulate", "--model", "distilbert", "--chips", "inf2",
                             "--seq", "32", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".run.nvtrace.*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code and err == b""
    assert list(tmp_path.iterdir()) == []


def _cli(argv, **kw):
    return subprocess.run([sys.executable, "-m", "neuronviz", *map(str, argv)], capture_output=True, **kw)


def test_a_full_standard_output_is_a_one_line_error(seed):
    for argv in (["info", seed], ["report", seed], ["simulate", "--model", "distilbert", "--chips", "inf2", "--json"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "neuronviz", *map(str, argv)], stdout=full,
                                  stderr=subprocess.PIPE)
        assert done.returncode == 2
        assert done.stderr == b"neuronviz: error: cannot write to standard output: No space left on device\n"


def test_a_reader_that_goes_away_ends_the_output_quietly(seed):
    proc = subprocess.Popen([sys.executable, "-m", "neuronviz", "report", *[str(seed)] * 8], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.read(10)  # then the reader goes, as `| head -c 10` does
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0 and proc.stderr.read() == b""
    proc.stderr.close()


def test_an_ascii_or_c_locale_output_writes_what_it_cannot_encode(seed, tmp_path):
    report = _cli(["report", seed], env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert report.returncode == 0 and b"inf2 \\xb7 inf2.xlarge \\xb7 distilbert" in report.stdout
    named = tmp_path / "caf\u00e9.nvtrace"
    named.write_bytes(seed.read_bytes())
    c_locale = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"}
    info = _cli(["info", named], env=c_locale)
    assert info.returncode == 0 and info.stdout.startswith(os.fsencode(named) + b": 1 run(s)")


def test_a_chrome_trace_with_a_non_ascii_name_exports_under_the_c_locale(tmp_path):
    named = tmp_path / "caf\u00e9.json"
    named.write_text('[{"ph": "X", "name": "op", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]')
    c_locale = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"}
    for out in (tmp_path / "out.json", tmp_path / "out.nvtrace"):
        done = _cli(["export", named, "-o", out], env=c_locale)
        assert done.returncode == 0, done.stderr
        assert load_file(out)[0].meta["source_file"] == "caf\u00e9.json"
