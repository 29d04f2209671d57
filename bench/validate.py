"""Accuracy benchmark: the full validation against published measurements.

Run: .venv/bin/python bench/validate.py   (same as `neuronviz validate -o docs/accuracy.md`)
"""

import sys

from neuronviz.cli import main

if __name__ == "__main__":
    sys.exit(main(["validate", "-o", "docs/accuracy.md"]))
