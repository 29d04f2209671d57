"""Errors the simulator raises for bad input: each carries a one-line message a user can act on."""


class SimError(Exception):
    """Base class of every error caused by a user's input (model, chip, numbers, files)."""


class UnknownNameError(SimError):
    """A model, chip, instance or data type that is not known."""


class ConfigError(SimError):
    """A configuration that cannot be simulated (bad numbers, unsupported model type)."""


class DoesNotFitError(SimError):
    """The model does not fit in the memory of the chosen deployment."""


class TraceFileError(SimError):
    """A trace file that cannot be read: missing, damaged, foreign or from a newer version."""
