"""The installed Qt binding keeps Python's references to None and True. PySide6 6.12's stable-ABI wheels
are built for Python 3.12+, where these are immortal, and return them from void methods and Signal.emit
without a reference of their own (python/cpython#134989): on Python 3.11 each call drops one and the app
soon aborts ("bool_dealloc: deallocating True or False"). pyproject.toml keeps 3.11 on PySide6 < 6.12."""

import subprocess
import sys

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


def test_void_methods_and_signals_keep_the_references_to_none_and_true():
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, f"the binding freed a singleton (reinstall: pip install -e .): {probe.stderr}"
    version, none_dropped, true_dropped = probe.stdout.split()
    # a binding that drops one reference a call loses thousands; a steady one a few at most
    assert abs(int(none_dropped)) < 10 and abs(int(true_dropped)) < 10, (version, none_dropped, true_dropped)
