import pytest

from sim.run import RunConfig, simulate


@pytest.fixture(scope="session")
def run():
    """Simulate once per configuration for the whole session."""
    cache = {}

    def _run(model, chip, **kw):
        key = (model, chip, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = simulate(RunConfig(model=model, chip=chip, **kw))
        return cache[key]

    return _run
