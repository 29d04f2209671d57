"""The fuzz harness of tests/sim/test_fuzz.py at scale: thousands of damaged and hostile .nvtrace,
Chrome JSON and config.json files, with the slowest case per format and the peak memory.

Run: .venv/bin/python bench/bench_fuzz.py [CASES [SEED]]     (default 2000 per format, seed 0 =
the cases CI starts with; target: every
case opens or is refused in one line, each within 5 s, the process under 1 GB)
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    os.environ["NEURONVIZ_FUZZ_CASES"] = str(cases)
    os.environ["NEURONVIZ_FUZZ_SEED"] = sys.argv[2] if len(sys.argv) > 2 else "0"
    sys.path.insert(0, str(ROOT))
    start = time.perf_counter()
    code = pytest.main(["-q", "-p", "no:cacheprovider", str(ROOT / "tests/sim/test_fuzz.py")])
    took = time.perf_counter() - start
    from tests.sim.test_fuzz import OUTCOMES, SLOWEST

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{cases:,} cases per format in {took:.1f} s ({'all passed' if code == 0 else 'FAILURES'})")
    for fmt, secs in sorted(SLOWEST.items()):
        counts = OUTCOMES.get(fmt, {})
        print(f"  {fmt:12s} opened {counts.get('opened', 0):5,}, refused in one line {counts.get('refused', 0):5,};"
              f" slowest case {secs:6.3f} s (target 5 s, ratio {secs / 5:.2f})")
    print(f"peak memory of the process: {peak_mb:,.0f} MB (target 1,024 MB, ratio {peak_mb / 1024:.2f})")
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
