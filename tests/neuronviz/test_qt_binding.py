"""The installed Qt binding keeps Python's references to None and True, and one that does not is told
in one line before the app starts. PySide6 6.12's stable-ABI wheels are built for Python 3.12+, where
these are immortal, and return them from void methods and Signal.emit without a reference of their own
(python/cpython#134989): on Python 3.11 each call drops one and the app soon aborts ("bool_dealloc:
deallocating True or False"). pyproject.toml keeps 3.11 on PySide6 < 6.12."""

import subprocess
import sys

import pytest

from neuronviz import binding_check
from neuronviz.cli import main

CALLS = 5000

# run apart: an affected binding aborts its interpreter, which would take the test run down with it
_PROBE = f"""
import sys
import PySide6
from PySide6.QtCore import QObject, QPointF, Signal

class Emitter(QObject):
    sig = Signal()

point, emitter = QPointF(), Emitter()
none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
for _ in range({CALLS}):
    point.setX(1.0)  # a void C++ method: the binding returns None
    emitter.sig.emit()  # returns True
print(PySide6.__version__, none_before - sys.getrefcount(None), true_before - sys.getrefcount(True))
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None and True are immortal on Python 3.12+: their "
                    "reference counts never move, so the probe cannot tell a binding that drops them")
def test_void_methods_and_signals_keep_the_references_to_none_and_true():
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, f"the binding freed a singleton (reinstall: pip install -e .): {probe.stderr}"
    version, none_dropped, true_dropped = probe.stdout.split()
    # a binding that drops one reference a call loses thousands; a steady one a few at most
    assert abs(int(none_dropped)) < 10 and abs(int(true_dropped)) < 10, (version, none_dropped, true_dropped)


def test_the_binding_version_is_read_from_its_installed_distribution():
    import PySide6

    assert binding_check.binding_version() == tuple(PySide6.__version_info__[:2])


@pytest.mark.parametrize("python, binding, affected", [
    ((3, 11), (6, 12), True), ((3, 11), (7, 0), True), ((3, 11), (6, 11), False), ((3, 12), (6, 12), False),
    ((3, 11), None, False)])
def test_only_a_binding_of_6_12_or_later_on_python_before_3_12_is_a_problem(monkeypatch, python, binding, affected):
    monkeypatch.setattr(binding_check, "python_version", lambda: python)
    monkeypatch.setattr(binding_check, "binding_version", lambda: binding)
    assert (binding_check.binding_problem() is not None) == affected


@pytest.mark.parametrize("argv", [[], ["screenshot", "-o", "view.png"], ["animate", "-o", "play.gif"]])
def test_the_app_and_the_qt_commands_refuse_an_affected_binding_in_one_line(monkeypatch, capsys, tmp_path, argv):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(binding_check, "python_version", lambda: (3, 11))
    monkeypatch.setattr(binding_check, "binding_version", lambda: (6, 12))
    monkeypatch.setattr("neuronviz.app.run_app", lambda files: 0)  # had the check let it through
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "neuronviz: error: PySide6 6.12 aborts on Python 3.11 (it drops references to None and True): run "
        "`pip install -e .` again, which installs the PySide6 6.11 this Python needs\n")
    assert list(tmp_path.iterdir()) == []  # nothing rendered
