"""Seeded fuzzing of every file a user hands the tool: damaged and hostile .nvtrace files (bytes,
zip headers, run metadata, columns crafted with their checksums right), Chrome trace JSON
(damaged, and heavy in processes, counters and series), Perfetto .pftrace files, Neuron Explorer
profiles (a damaged table, odd Metadata) and model config.json. Whatever the damage, loading either
gives traces that every consumer (metrics, records, analysis, export) handles, or a one-line error
of the tool's own; never a traceback. Each case's outcome is counted (opened, refused, over time,
over memory, traceback); ``bench/bench_fuzz.py`` runs many more cases and prints the counts, the
slowest and the largest."""

import json
import os
import random
import resource
import time
import traceback
from dataclasses import replace

import numpy as np
import pytest

from sim.errors import SimError
from sim.io import load_file, save_file
from sim.io.chrome import export_chrome
from sim.run import RunConfig, simulate
from sim.workloads import get_model
from sim.workloads.models import PRESET_DIR
from tests.fuzz_corpus import (
    LIMIT_BYTES,
    LIMIT_SECONDS,
    chrome_cases,
    chrome_storm_cases,
    damaged_bytes,
    metadata_cases,
    mutate_value,
    nvtrace_cases,
    nvtrace_column_cases,
    nvtrace_meta_cases,
    nvtrace_zip_cases,
    use_traces,
    write_zip,
)

CASES = int(os.environ.get("NEURONVIZ_FUZZ_CASES", 150))  # per format; bench/bench_fuzz.py runs thousands
SEED = int(os.environ.get("NEURONVIZ_FUZZ_SEED", 0))  # CI's cases are fixed; the bench may draw others
OUTCOME_NAMES = ("opened", "refused", "over time", "over memory", "traceback")
OUTCOMES: dict[str, dict[str, int]] = {}  # per format, cases by outcome (printed by the bench)
SLOWEST: dict[str, tuple[float, str]] = {}  # per format: the slowest case's seconds and name
LARGEST: dict[str, tuple[int, str]] = {}  # per format: the case that raised the process's peak memory most
TRACEBACKS: dict[str, list[str]] = {}  # per format: the first lines of what escaped as a traceback


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _outcomes(fmt: str) -> dict[str, int]:
    OUTCOMES[fmt] = dict.fromkeys(OUTCOME_NAMES, 0)
    TRACEBACKS[fmt] = []
    return OUTCOMES[fmt]


def _check(fmt: str, name: str, work) -> None:
    """Run one case: ``work()`` opens (and uses) it or raises the tool's one-line error. A case over
    the time or memory limit counts as such whatever it ended in, unless it escaped as a traceback."""
    outcomes, before, start = OUTCOMES[fmt], _peak_bytes(), time.perf_counter()
    try:
        work()
        outcome = "opened"
    except SimError as exc:  # the loader's, or a consumer's own, one-line refusal
        outcome = "refused" if str(exc) and "\n" not in str(exc) else "traceback"
    except Exception:  # noqa: BLE001 - counted, and the test fails on it below
        outcome = "traceback"
        TRACEBACKS[fmt].append(f"{name}: {traceback.format_exc().splitlines()[-1]}")
    seconds, peak = time.perf_counter() - start, _peak_bytes()
    if outcome != "traceback" and peak > LIMIT_BYTES and peak > before:
        outcome = "over memory"
    elif outcome != "traceback" and seconds > LIMIT_SECONDS:
        outcome = "over time"
    outcomes[outcome] += 1
    if seconds > SLOWEST.get(fmt, (0.0, ""))[0]:
        SLOWEST[fmt] = (seconds, name)
    if peak - before > LARGEST.get(fmt, (0, ""))[0]:
        LARGEST[fmt] = (peak - before, name)


def _no_tracebacks(fmt: str) -> None:
    outcomes = OUTCOMES[fmt]
    assert outcomes["traceback"] == 0, TRACEBACKS[fmt][:5]
    assert sum(outcomes.values()) == CASES


def _open_and_use(path):
    return lambda: use_traces(load_file(path))


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "seed.nvtrace"
    save_file(path, [simulate(RunConfig(model="distilbert", chip=c, seq=64), max_events=0) for c in ("inf2", "trn2")])
    return path


@pytest.fixture(scope="module")
def native(seed_file):
    return seed_file.read_bytes()


def test_damaged_and_hostile_nvtrace_files_open_or_give_one_line_errors(native, tmp_path):
    outcomes = _outcomes("nvtrace")
    for case, data in enumerate(nvtrace_cases(native, SEED, CASES)):
        path = tmp_path / f"case{case}.nvtrace"
        path.write_bytes(data)
        _check("nvtrace", path.name, _open_and_use(path))
    _no_tracebacks("nvtrace")
    assert outcomes["refused"] > CASES // 2


def test_nvtrace_files_whose_zip_headers_lie_open_or_give_one_line_errors(seed_file, tmp_path):
    outcomes = _outcomes("nvtrace zip")
    for case, members in enumerate(nvtrace_zip_cases(seed_file, SEED, CASES)):
        path = tmp_path / f"zip{case}.nvtrace"
        write_zip(path, members)
        _check("nvtrace zip", path.name, _open_and_use(path))
    _no_tracebacks("nvtrace zip")
    assert outcomes["refused"] > CASES // 2


def test_nvtrace_files_with_odd_run_metadata_open_or_give_one_line_errors(seed_file, tmp_path):
    outcomes = _outcomes("nvtrace meta")
    for case, members in enumerate(nvtrace_meta_cases(seed_file, SEED, CASES)):
        path = tmp_path / f"meta{case}.nvtrace"
        write_zip(path, members)
        _check("nvtrace meta", path.name, _open_and_use(path))
    _no_tracebacks("nvtrace meta")
    assert outcomes["refused"] > 0 and outcomes["opened"] > 0


def test_nvtrace_files_whose_columns_are_crafted_open_or_give_one_line_errors(seed_file, tmp_path):
    outcomes = _outcomes("nvtrace columns")
    for case, members in enumerate(nvtrace_column_cases(seed_file, SEED, CASES)):
        path = tmp_path / f"columns{case}.nvtrace"
        write_zip(path, members)
        _check("nvtrace columns", path.name, _open_and_use(path))
    _no_tracebacks("nvtrace columns")
    assert outcomes["refused"] > CASES // 2


@pytest.fixture(scope="module")
def chrome_doc():
    traces = [simulate(RunConfig(model="distilbert", chip="inf2", seq=64), max_events=0)]
    return export_chrome(traces)


def test_damaged_and_hostile_chrome_json_opens_or_gives_one_line_errors(chrome_doc, tmp_path):
    outcomes = _outcomes("chrome")
    for case, text in enumerate(chrome_cases(chrome_doc, SEED, CASES)):
        path = tmp_path / f"case{case}.json"
        path.write_text(text)
        _check("chrome", path.name, _open_and_use(path))
    _no_tracebacks("chrome")
    assert outcomes["refused"] > 0


def test_chrome_json_heavy_in_processes_counters_and_series_opens_or_gives_one_line_errors(tmp_path):
    outcomes = _outcomes("chrome storm")
    for case, text in enumerate(chrome_storm_cases(SEED, CASES)):
        path = tmp_path / f"storm{case}.json"
        path.write_text(text)
        _check("chrome storm", path.name, _open_and_use(path))
    _no_tracebacks("chrome storm")
    assert outcomes["refused"] > 0 and outcomes["opened"] > 0


# what a hostile config.json asks for beyond mutated fields: stacks far deeper than any model's
DEEP = (1024, 100_000, [100_000], [1] * 5000)


def test_hostile_config_json_simulates_or_gives_one_line_errors(tmp_path):
    rng = random.Random(3 + SEED)
    presets = sorted(PRESET_DIR.glob("*.json"))
    outcomes = _outcomes("config.json")
    for case in range(CASES):
        cfg = json.loads(rng.choice(presets).read_text())
        for _ in range(rng.randint(1, 3)):
            cfg = mutate_value(rng, cfg)
        if rng.random() < 0.2 and isinstance(cfg, dict):
            cfg[rng.choice(("num_hidden_layers", "depths", "layers", "num_decoder_layers"))] = rng.choice(DEEP)
        path = tmp_path / f"case{case}" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(cfg))

        def work(path=path):
            spec = get_model(str(path))
            mode = "decode" if spec.family == "decoder" else "inference"
            simulate(RunConfig(model=str(path), chip="trn2", mode=mode, seq=32 if not spec.is_vision else None,
                               new_tokens=2), max_events=0)

        _check("config.json", f"case{case}/config.json", work)
    _no_tracebacks("config.json")
    assert outcomes["refused"] > 0


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


def test_damaged_pftrace_files_open_or_give_one_line_errors(seed_file, tmp_path):
    seed = tmp_path / "seed.pftrace"
    save_file(seed, load_file(seed_file))
    outcomes = _outcomes("pftrace")
    for case, data in enumerate(damaged_bytes(seed.read_bytes(), SEED, CASES)):
        path = tmp_path / f"case{case}.pftrace"
        path.write_bytes(data)
        _check("pftrace", path.name, _open_and_use(path))
    _no_tracebacks("pftrace")
    assert outcomes["refused"] > 0


def test_damaged_explorer_tables_open_or_give_one_line_errors(tmp_path):
    """Each case damages one table of a profile (its bytes), or gives its Metadata odd values."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.profiles import METADATA, small_profile

    seed = small_profile(tmp_path / "seed", every_table=False)
    tables = sorted(p.name for p in seed.iterdir())
    rng = random.Random(7 + SEED)
    outcomes = _outcomes("explorer")
    metadata = metadata_cases(METADATA, SEED, CASES)
    for case, data in enumerate(damaged_bytes((seed / "Instruction.parquet").read_bytes(), SEED, CASES)):
        path = tmp_path / f"case{case}"
        path.mkdir()
        for name in tables:
            (path / name).write_bytes((seed / name).read_bytes())
        if case % 3 == 2:  # each column typed by its odd value, as another writer might have typed it
            pq.write_table(pa.Table.from_pylist([next(metadata)]), path / "Metadata.parquet")
        else:
            victim = rng.choice(tables)
            (path / victim).write_bytes(data if victim == "Instruction.parquet" else
                                        next(damaged_bytes((seed / victim).read_bytes(), SEED + case, 1)))
        _check("explorer", path.name, _open_and_use(path))
    _no_tracebacks("explorer")
    assert outcomes["refused"] > 0 and outcomes["opened"] > 0

