"""The hostile files of issue 49, each built here from a seed run: reading one gives exactly its
one-line error, or traces that every consumer handles (tests/fuzz_corpus.py holds the builders;
tests/neuronviz/test_hardening.py times the heavy ones through the commands)."""

import pytest

from sim.errors import SimError
from sim.io import load_file, save_file
from sim.run import RunConfig, simulate
from sim.workloads import get_model
from tests.fuzz_corpus import CONFIG_NAME, HOSTILE, use_traces


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "seed.nvtrace"
    save_file(path, [simulate(RunConfig(model="distilbert", chip="inf2", seq=64))])
    return path


@pytest.mark.parametrize("name", [n for n, case in HOSTILE.items() if not case.is_config])
def test_a_hostile_trace_file_opens_or_gives_its_one_line_error(seed, tmp_path, name):
    case = HOSTILE[name]
    path = tmp_path / f"hostile{case.suffix}"
    case.build(seed, path)
    if case.error is None:
        use_traces(load_file(path))
        return
    with pytest.raises(SimError) as info:
        load_file(path)
    assert str(info.value) == case.error.format(path=path)


@pytest.mark.parametrize("name", [n for n, case in HOSTILE.items() if case.is_config])
def test_a_hostile_model_config_gives_its_one_line_error_before_any_work(seed, tmp_path, name):
    case = HOSTILE[name]
    path = tmp_path / "model" / CONFIG_NAME
    path.parent.mkdir()
    case.build(seed, path)
    with pytest.raises(SimError) as info:
        get_model(str(path))
    assert str(info.value) == case.error.format(path=path)
