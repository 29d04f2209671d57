"""Entry point: ``neuronviz`` opens the app; ``neuronviz COMMAND`` runs a command-line tool."""

from __future__ import annotations

import signal
import sys


def main() -> int:
    if len(sys.argv) > 1:
        from neuronviz.cli import main as command_line

        return command_line()
    # no arguments: the app and its demo, as the command line would open them, without importing
    # the command line's modules (its commands' imports held back the first frame)
    from neuronviz.app import run_app

    try:
        return run_app([])
    except KeyboardInterrupt:  # Ctrl+C ends the app as it ends a command
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
