"""Accuracy benchmark: the full validation against published measurements, the fit of the named
residuals and the leave-one-generation-out check; writes docs/accuracy.md and the views' errors
(sim/calibration/errors.toml) and prints the summary.

Run: .venv/bin/python bench/validate.py          (about an hour on two cores: each of its five fits
     simulates every selected row a few dozen times)
     .venv/bin/python bench/validate.py --quick  (the validation alone, as `neuronviz validate`)
"""

import sys
import time

from neuronviz.cli import main

if __name__ == "__main__":
    start = time.perf_counter()
    args = ["validate", "-o", "docs/accuracy.md", "--errors", "sim/calibration/errors.toml"]
    args += [] if "--quick" in sys.argv else ["--fit"]
    code = main(args)
    print(f"validation took {time.perf_counter() - start:.0f} s")
    sys.exit(code)
