"""neuronviz: the desktop viewer and command line of the Neuron simulator."""

from sim import __version__

__all__ = ["__version__"]
