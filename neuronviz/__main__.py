"""Entry point: ``neuronviz`` opens the app; ``neuronviz COMMAND`` runs a command-line tool."""

from __future__ import annotations

import sys

from neuronviz.cli import main

if __name__ == "__main__":
    sys.exit(main())
