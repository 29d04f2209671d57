"""Seeded fuzzing of every file a user hands the tool: damaged and hostile .nvtrace files, Chrome
trace JSON and model config.json. Whatever the damage, loading either gives traces that every
consumer (metrics, records, analysis, export) handles, or a one-line error of the tool's own; never
a traceback. ``bench/bench_fuzz.py`` runs many more cases and reports time and memory."""

import json
import os
import random
import time
from dataclasses import replace

import numpy as np
import pytest

from sim.analysis import analyse
from sim.errors import SimError
from sim.io import load_file, save_file
from sim.io.chrome import export_chrome
from sim.record import run_record
from sim.run import RunConfig, simulate
from sim.workloads import get_model
from sim.workloads.models import PRESET_DIR
from tests.fuzz_corpus import chrome_cases, mutate_value, nvtrace_cases

CASES = int(os.environ.get("NEURONVIZ_FUZZ_CASES", 150))  # per format; bench/bench_fuzz.py runs thousands
SEED = int(os.environ.get("NEURONVIZ_FUZZ_SEED", 0))  # CI's cases are fixed; the bench may draw others
SLOWEST: dict[str, float] = {}  # per format: the slowest case's seconds (bench/bench_fuzz.py prints them)
OUTCOMES: dict[str, dict[str, int]] = {}  # per format: cases opened and refused (printed by the bench too)


def _use(traces):
    """What the app and the CLI do with a loaded file."""
    for trace in traces:
        run_record(trace)
        analyse(trace)
    export_chrome(traces)


def _check(path, outcomes, fmt):
    start = time.perf_counter()
    try:
        _use(load_file(path))
        outcomes["opened"] += 1
    except SimError as exc:  # the loader's, or a consumer's own, one-line refusal
        assert "\n" not in str(exc) and str(exc)
        outcomes["refused"] += 1
    SLOWEST[fmt] = max(SLOWEST.get(fmt, 0.0), time.perf_counter() - start)


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "seed.nvtrace"
    save_file(path, [simulate(RunConfig(model="distilbert", chip=c, seq=64), max_events=0) for c in ("inf2", "trn2")])
    return path.read_bytes()


def test_damaged_and_hostile_nvtrace_files_open_or_give_one_line_errors(native, tmp_path):
    outcomes = OUTCOMES["nvtrace"] = {"opened": 0, "refused": 0}
    for case, data in enumerate(nvtrace_cases(native, SEED, CASES)):
        path = tmp_path / f"case{case}.nvtrace"
        path.write_bytes(data)
        _check(path, outcomes, "nvtrace")
    assert outcomes["refused"] > CASES // 2 and sum(outcomes.values()) == CASES


@pytest.fixture(scope="module")
def chrome_doc():
    traces = [simulate(RunConfig(model="distilbert", chip="inf2", seq=64), max_events=0)]
    return export_chrome(traces)


def test_damaged_and_hostile_chrome_json_opens_or_gives_one_line_errors(chrome_doc, tmp_path):
    outcomes = OUTCOMES["chrome"] = {"opened": 0, "refused": 0}
    for case, text in enumerate(chrome_cases(chrome_doc, SEED, CASES)):
        path = tmp_path / f"case{case}.json"
        path.write_text(text)
        _check(path, outcomes, "chrome")
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == CASES


def test_hostile_config_json_simulates_or_gives_one_line_errors(tmp_path):
    rng = random.Random(3 + SEED)
    presets = sorted(PRESET_DIR.glob("*.json"))
    outcomes = OUTCOMES["config.json"] = {"opened": 0, "refused": 0}
    for case in range(CASES):
        cfg = json.loads(rng.choice(presets).read_text())
        for _ in range(rng.randint(1, 3)):
            cfg = mutate_value(rng, cfg)
        path = tmp_path / f"case{case}" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(cfg))
        start = time.perf_counter()
        try:
            spec = get_model(str(path))
            mode = "decode" if spec.family == "decoder" else "inference"
            simulate(RunConfig(model=str(path), chip="trn2", mode=mode, seq=32 if not spec.is_vision else None,
                               new_tokens=2), max_events=0)
            outcomes["opened"] += 1
        except SimError as exc:
            assert "\n" not in str(exc) and str(exc)
            outcomes["refused"] += 1
        SLOWEST["config.json"] = max(SLOWEST.get("config.json", 0.0), time.perf_counter() - start)
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == CASES


def test_non_finite_numbers_in_event_columns_are_refused(native, tmp_path):
    seed = tmp_path / "seed.nvtrace"
    seed.write_bytes(native)
    trace = load_file(seed)[0]
    for column, bad in (("start_ns", np.nan), ("dur_ns", np.inf), ("flops", -np.inf), ("bytes", np.nan)):
        events = {k: np.array(v) for k, v in trace.events.items()}
        events[column][len(events[column]) // 2] = bad
        path = tmp_path / f"{column}.nvtrace"
        save_file(path, [replace(trace, events=events)])
        with pytest.raises(SimError) as info:
            load_file(path)
        assert "\n" not in str(info.value)
