"""neuronviz simulator core: Neuron chips, models, lowering, scheduling and traces. No Qt here."""

__version__ = "0.1.0"
