"""Accuracy is a test: the median errors the README states are asserted on the whole validation,
so a change that makes a generation or a metric worse fails CI."""

import re
from pathlib import Path

import pytest

from sim.validate import by_group, read_held_out, read_rows, summarise, validate

README = Path(__file__).resolve().parents[2] / "README.md"


def _stated_bounds(marker: str = "accuracy-bounds") -> dict[tuple[str, str], float]:
    """The README's accuracy table: (generation, metric) -> the bound it states, as a fraction."""
    text = README.read_text(encoding="utf-8")
    block = text.split(f"<!-- {marker} -->")[1]
    bounds = {}
    for gen, metric, bound in re.findall(r"^\| (\w+) \| ([\w ]+?) \| [^|]+ \| [^|]+ \| (\d+)% \|$", block, re.M):
        bounds[(gen, metric)] = int(bound) / 100
    return bounds


@pytest.fixture(scope="module")
def results():
    return validate(read_rows())


def test_the_readme_states_a_bound_for_every_generation_and_metric_measured(results):
    stated = _stated_bounds()
    measured = {(g.generation, g.metric) for g in by_group(results)}
    assert measured <= set(stated), sorted(measured - set(stated))
    assert ("all", "generation ratios") in stated


def test_each_generation_and_metric_stays_within_its_stated_bound(results):
    stated = _stated_bounds()
    over = [(g.generation, g.metric, round(100 * g.median_abs_error, 1), 100 * stated[(g.generation, g.metric)])
            for g in by_group(results) if g.median_abs_error > stated[(g.generation, g.metric)]]
    assert over == []


def test_generation_ratios_stay_within_their_stated_bound(results):
    s = summarise(results)
    assert s.ratio_pairs > 0
    assert s.median_abs_ratio_error <= _stated_bounds()[("all", "generation ratios")]


@pytest.fixture(scope="module")
def held_out():
    return validate(read_held_out())


def test_no_figure_nothing_is_fitted_on_is_in_the_calibration_tables():
    # a run is its model, instance, batch, lengths and deployment (BERT-Large's training page has
    # micro-batch 16 on one instance and on 16, two runs)
    calibration = {(r.model, r.instance, r.batch, r.seq, r.metric, r.config) for r in read_rows()}
    held = {(r.model, r.instance, r.batch, r.seq, r.metric, r.config) for r in read_held_out()}
    assert len(held) > 50 and not calibration & held


def test_the_rows_never_fitted_on_stay_within_their_stated_bounds(held_out):
    stated = _stated_bounds("held-out-bounds")
    groups = by_group(held_out)
    assert {(g.generation, g.metric) for g in groups} <= set(stated)
    over = [(g.generation, g.metric, round(100 * g.median_abs_error, 1), 100 * stated[(g.generation, g.metric)])
            for g in groups if g.median_abs_error > stated[(g.generation, g.metric)]]
    assert over == []
    s = summarise(held_out)
    assert s.compared >= 60 and s.median_abs_ratio_error <= stated[("all", "generation ratios")]
