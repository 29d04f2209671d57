"""Trace files: the native ``.nvtrace`` format and Chrome/Perfetto JSON interchange."""
