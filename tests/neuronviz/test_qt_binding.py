"""The Qt binding cannot free None, True or False under the app. PySide6 6.12 on Python 3.11 returns
them from void methods and Signal.emit without a reference of its own (python/cpython#134989), and
without neuronviz.qt_binding's reserve any app soon aborts ("none_dealloc: deallocating None")."""

import sys

from PySide6.QtCore import QObject, QPointF, Signal

from neuronviz import qt_binding


class _Emitter(QObject):
    sig = Signal()


def test_void_methods_and_signals_cannot_free_none_true_or_false():
    point, emitter = QPointF(), _Emitter()
    before = {repr(s): sys.getrefcount(s) for s in (None, True)}
    calls = 1000
    for _ in range(calls):
        point.setX(1.0)  # a void C++ method: the binding returns None
        emitter.sig.emit()  # returns True
    for name, count in before.items():
        now = sys.getrefcount(eval(name))
        # other threads may take or give back a few references meanwhile; a binding that drops one
        # per call loses a thousand, and then only the reserve keeps the object alive
        dropped = count - now > calls // 2
        assert not dropped or (qt_binding.needed() and now > qt_binding.RESERVE // 2), (name, count, now)


def test_the_reserve_is_given_exactly_when_the_binding_needs_it():
    reserved = sys.getrefcount(None) > qt_binding.RESERVE // 2
    assert reserved == qt_binding.needed()
    assert qt_binding.needed() == (sys.version_info < (3, 12) and qt_binding._binding_version() >= (6, 12))


def test_the_binding_version_read_from_its_folder_is_the_installed_one():
    """Read from the .dist-info folder's name at startup (importlib.metadata costs 80 ms there)."""
    assert qt_binding._binding_version() == qt_binding._metadata_version() is not None
