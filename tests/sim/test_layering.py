"""sim is the core: it must never pull in Qt, pyqtgraph or the app."""

import subprocess
import sys


def test_importing_sim_loads_no_gui_module():
    code = (
        "import sys, sim, sim.run, sim.metrics, sim.trace, sim.workloads, sim.hardware.instances\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'neuronviz'))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_sim_sources_never_mention_gui_packages():
    from pathlib import Path

    import sim

    root = Path(sim.__file__).parent
    words = ("import PySide6", "import pyqtgraph", "from neuronviz", "import neuronviz")
    offenders = [p.name for p in root.rglob("*.py") if any(w in p.read_text() for w in words)]
    assert offenders == []
