"""neuronviz: the desktop viewer and command line of the Neuron simulator."""

from neuronviz import qt_binding
from sim import __version__

if qt_binding.needed():
    qt_binding.keep_singletons_alive()

__all__ = ["__version__"]
