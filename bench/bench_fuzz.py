"""The fuzz harness at scale, and every hostile input of issue 49 through every command that reads it.

1. tests/sim/test_fuzz.py with CASES per format (damaged and hostile .nvtrace bytes, zip headers and
   run metadata, Chrome JSON damaged and heavy in processes, counters and series, config.json,
   damaged .pftrace files, Neuron Explorer profiles with a damaged table or odd Metadata), in this
   process: each case opened and used, or refused in one line, timed.
2. Each hostile input of tests/fuzz_corpus.py (HOSTILE) through ``info``, ``export``, ``screenshot``
   and the app's File > Open (a model config through ``simulate``), each in a process of its own,
   timed and its peak memory taken.

Both print counts by format and outcome (opened, refused, over time, over memory, traceback) and the
slowest and largest cases. Target (issue 49): every case opens or is refused in one line, within 5 s
and 1 GB: zero in the last three columns.

Run: .venv/bin/python bench/bench_fuzz.py [CASES [SEED]]     (default 2000 per format, seed 0 = the
cases CI starts with)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("info", "export", "screenshot", "app open")
# File > Open in the app, offscreen: a dialog is the one-line refusal, an exception inside Qt a traceback
APP_OPEN = """\
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from PySide6.QtCore import QSettings, qInstallMessageHandler
from PySide6.QtWidgets import QApplication, QMessageBox
from neuronviz.app import build_window, make_app
qInstallMessageHandler(lambda *message: None)  # the offscreen platform's notes are no error of ours
failures, shown = [], []
sys.excepthook = lambda kind, exc, tb: failures.append(exc)
QMessageBox.warning = lambda parent, title, text: shown.append(text)
make_app()
window = build_window([], QSettings(sys.argv[2], QSettings.Format.IniFormat))
window.resize(1600, 900)
window.show()
window.open_files([sys.argv[1]])
while window.opening is not None:  # a big file opens in the background
    QApplication.processEvents()
QApplication.processEvents()
window.grab()
if failures:
    sys.exit(f"exception inside Qt: {failures[0]!r}")
if shown:
    print(f"neuronviz: error: {shown[0]}", file=sys.stderr)
    sys.exit(2)
"""


def outcome(measured) -> str:
    """What a command did with an input, as the issue counts it."""
    from tests.fuzz_corpus import LIMIT_BYTES, LIMIT_SECONDS

    lines = measured.stderr.splitlines()
    if measured.code is None:
        return "over time"
    one_line = measured.code == 2 and len(lines) == 1 and lines[0].startswith("neuronviz: error: ")
    if not one_line and (measured.code != 0 or lines):
        return "traceback"
    if measured.peak_bytes > LIMIT_BYTES:
        return "over memory"
    if measured.seconds > LIMIT_SECONDS:
        return "over time"
    return "opened" if measured.code == 0 else "refused"


def _table(rows: dict[str, dict[str, int]], names: tuple[str, ...]) -> None:
    print(f"  {'format':14s}" + "".join(f"{n:>13s}" for n in names))
    for fmt, counts in rows.items():
        print(f"  {fmt:14s}" + "".join(f"{counts.get(n, 0):13,}" for n in names))


def random_corpus(cases: int, seed: str) -> int:
    os.environ["NEURONVIZ_FUZZ_CASES"] = str(cases)
    os.environ["NEURONVIZ_FUZZ_SEED"] = seed
    start = time.perf_counter()
    code = pytest.main(["-q", "-p", "no:cacheprovider", str(ROOT / "tests/sim/test_fuzz.py")])
    from tests.sim.test_fuzz import LARGEST, OUTCOME_NAMES, OUTCOMES, SLOWEST, TRACEBACKS

    print(f"\nrandom corpus: {cases:,} cases per format, seed {seed}, in {time.perf_counter() - start:.1f} s "
          f"({'all passed' if code == 0 else 'FAILURES'})")
    _table(OUTCOMES, OUTCOME_NAMES)
    for fmt in OUTCOMES:
        secs, slow = SLOWEST.get(fmt, (0.0, "-"))
        grew, large = LARGEST.get(fmt, (0, "-"))
        print(f"  {fmt:14s} slowest {secs:6.3f} s ({slow}); largest +{grew / 2**20:,.0f} MB of peak ({large})")
        for line in TRACEBACKS.get(fmt, [])[:3]:
            print(f"    traceback: {line}")
    return int(code)


def _argv(command: str, path: Path, out: Path) -> list[str]:
    return {"info": ["info", path], "export": ["export", path, "-o", out / "out.json"],
            "screenshot": ["screenshot", path, "-o", out / "view.png"], "app open": [path, out / "settings.ini"],
            "simulate": ["simulate", "--model", path, "--chips", "trn2"]}[command]


def hostile_inputs() -> int:
    from sim.io import save_file
    from sim.run import RunConfig, simulate
    from tests.fuzz_corpus import CLI, CONFIG_NAME, HOSTILE, measure
    from tests.sim.test_fuzz import OUTCOME_NAMES

    counts: dict[str, dict[str, int]] = {}
    results = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        seed = work / "seed.nvtrace"
        save_file(seed, [simulate(RunConfig(model="distilbert", chip="inf2", seq=64))])
        for name, case in HOSTILE.items():
            path = work / "model" / CONFIG_NAME if case.is_config else work / f"hostile{case.suffix}"
            path.parent.mkdir(exist_ok=True)
            case.build(seed, path)
            fmt = "config.json" if case.is_config else "chrome" if ".json" in case.suffix else "nvtrace"
            for command in ("simulate",) if case.is_config else COMMANDS:
                program = APP_OPEN if command == "app open" else CLI
                measured = measure([str(a) for a in _argv(command, path, work)], program=program)
                what = outcome(measured)
                counts.setdefault(fmt, dict.fromkeys(OUTCOME_NAMES, 0))[what] += 1
                results.append((measured, command, name, what))
            path.unlink()
    print(f"\nhostile inputs: {len(HOSTILE)} through {', '.join(COMMANDS)} (a config through simulate), each in a "
          f"process of its own, in {time.perf_counter() - start:.1f} s")
    _table(counts, OUTCOME_NAMES)
    for title, key, unit in (("slowest", lambda r: r[0].seconds, "s"), ("largest", lambda r: r[0].peak_bytes, "MB")):
        print(f"  {title}:")
        for measured, command, name, what in sorted(results, key=key, reverse=True)[:5]:
            figure = f"{measured.seconds:6.2f} s" if unit == "s" else f"{measured.peak_bytes / 2**20:6,.0f} MB"
            print(f"    {figure}  {command:10s} {name} ({what})")
    for measured, command, name, what in results:
        if what in ("over time", "over memory", "traceback"):
            print(f"  {what}: {command} {name}: {measured.seconds:.2f} s, {measured.peak_bytes / 2**20:,.0f} MB, "
                  f"{measured.stderr.strip().splitlines()[-1:] or ''}")
    return int(any(what in ("over time", "over memory", "traceback") for *_, what in results))


def main() -> int:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    sys.path.insert(0, str(ROOT))
    return random_corpus(cases, sys.argv[2] if len(sys.argv) > 2 else "0") | hostile_inputs()


if __name__ == "__main__":
    raise SystemExit(main())
