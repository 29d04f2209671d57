"""Accuracy is a test: the bounds of ``sim/calibration/gate.toml`` are asserted on the whole
validation (both calibration tables and the rows never fitted on), each class of rows apart and the
rows fitted on and not overall, so a change that makes a class worse fails CI; and the errors the
views give beside a number (``sim/calibration/errors.toml``) are this validation's."""

import statistics
import tomllib

import pytest

from sim.accuracy import class_points, fitted_and_not
from sim.validate import CALIBRATION, read_held_out, read_rows, summarise, validate
from sim.validated import ERRORS, classes, errors_toml

GATE = CALIBRATION / "gate.toml"


def _gate() -> dict:
    with open(GATE, "rb") as f:
        return tomllib.load(f)


def _key(entry) -> tuple[str, str, str, str]:
    return entry["generation"], entry["software"], entry["kind"], entry["metric"]


@pytest.fixture(scope="module")
def results():
    return validate(read_rows())


@pytest.fixture(scope="module")
def held_out():
    return validate(read_held_out())


@pytest.fixture(scope="module")
def every(results, held_out):
    return results + held_out


def test_the_gate_bounds_every_class_the_validation_measures_and_no_other(every):
    measured = {tuple(vars(e.cls).values()) for e in classes(class_points(every))}
    gated = [_key(c) for c in _gate()["class"]]
    assert len(gated) == len(set(gated))
    assert measured == set(gated), (sorted(measured - set(gated)), sorted(set(gated) - measured))


def test_each_class_stays_within_its_bound(every):
    bound = {_key(c): c["bound"] for c in _gate()["class"]}
    over = [(*vars(e.cls).values(), round(100 * e.median_abs_error, 1), 100 * bound[tuple(vars(e.cls).values())])
            for e in classes(class_points(every)) if e.median_abs_error > bound[tuple(vars(e.cls).values())]]
    assert over == []


def test_the_rows_fitted_on_and_the_rows_not_stay_within_their_bounds(results, held_out):
    gate = _gate()["overall"]
    fitted, unfitted = fitted_and_not(results, held_out)
    assert len(fitted) > 100 and len(unfitted) > 100
    assert statistics.median(abs(r.error) for r in fitted) <= gate["fitted"]
    assert statistics.median(abs(r.error) for r in unfitted) <= gate["unfitted"]


def test_generation_ratios_stay_within_their_bounds(results, held_out):
    gate = _gate()["overall"]
    for rows, key in ((results, "ratios"), (held_out, "held_out_ratios")):
        s = summarise(rows)
        assert s.ratio_pairs > 0 and s.median_abs_ratio_error <= gate[key], key


def test_the_errors_the_views_give_are_this_validations(every):
    assert ERRORS.read_text(encoding="utf-8") == errors_toml(classes(class_points(every))), (
        "run `neuronviz validate --errors sim/calibration/errors.toml`")


def test_no_figure_nothing_is_fitted_on_is_in_the_calibration_tables():
    # a run is its model, instance, batch, lengths and deployment (BERT-Large's training page has
    # micro-batch 16 on one instance and on 16, two runs)
    calibration = {(r.model, r.instance, r.batch, r.seq, r.metric, r.config) for r in read_rows()}
    held = {(r.model, r.instance, r.batch, r.seq, r.metric, r.config) for r in read_held_out()}
    assert len(held) > 50 and not calibration & held
