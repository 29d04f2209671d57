"""The Qt binding the app runs on keeps Python's reference counts: PySide6 6.12.0 on Python 3.11
returns None from void methods and True from Signal.emit without a reference of its own, so any
app soon aborts ("none_dealloc: deallocating None", python/cpython#134989); pyproject.toml keeps
pip off that build, and this test fails on any build that does the same."""

import sys

from PySide6.QtCore import QObject, QPointF, Signal


class _Emitter(QObject):
    sig = Signal()


def test_void_methods_and_signals_keep_the_references_to_none_and_true():
    point, emitter = QPointF(), _Emitter()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(1000):
        point.setX(1.0)  # a void C++ method: the binding returns None
        emitter.sig.emit()  # returns True
    # other threads may take or give back a few references meanwhile; a binding that drops one
    # per call loses a thousand
    assert sys.getrefcount(None) > none_before - 100
    assert sys.getrefcount(True) > true_before - 100
