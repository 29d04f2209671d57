"""The validation machinery: row mapping and error arithmetic (figures go in notes, not asserts)."""

import pytest

from sim.validate import (
    PUBLISHED,
    Result,
    Row,
    by_group,
    copies_in_measurement,
    generation_ratios,
    queueing,
    read_rows,
    relative_error,
    report,
    row_config,
    summarise,
    validate,
)


def _row(instance="inf2.xlarge", metric="latency_ms_p50", measured=1.0, model="bert-base", batch=1, cores=2,
         parallelism="data-parallel", seq_out=0):
    return Row(model, instance, cores, parallelism, batch, 128, seq_out, metric, measured, "test")


def test_relative_error_and_summary_arithmetic():
    assert relative_error(1.2, 1.0) == pytest.approx(0.2)
    assert relative_error(0.5, 1.0) == pytest.approx(-0.5)
    results = [Result(_row(measured=1.0), 1.1), Result(_row(measured=2.0), 1.0), Result(_row(measured=4.0), 4.4),
               Result(_row(), None, "no preset")]
    s = summarise(results)
    assert (s.compared, s.skipped) == (3, 1)
    assert s.median_abs_error == pytest.approx(0.1)
    groups = by_group(results)
    assert [(g.generation, g.metric, g.rows) for g in groups] == [("inf2", "latency_ms_p50", 3)]
    assert groups[0].median_error == pytest.approx(0.1)  # errors +10%, -50%, +10%
    assert "| inf2 | latency_ms_p50 | 3 | +10.0% | 10.0% |" in report(results)


def test_generation_ratio_compares_measured_and_simulated_ratios():
    a = Result(_row("inf2.xlarge", measured=2.0), 3.0)
    b = Result(_row("trn1.2xlarge", measured=1.0), 1.0)
    same_gen = Result(_row("inf2.48xlarge", measured=2.0), 2.0)
    pairs = generation_ratios([a, b, same_gen])
    assert len(pairs) == 2  # inf2 rows pair with trn1, not with each other
    (x, y, err) = next(p for p in pairs if p[0] is a)
    assert err == pytest.approx((3.0 / 1.0) / (2.0 / 1.0) - 1)


def test_rows_map_to_the_published_deployment():
    lat = _row("inf1.xlarge", measured=7.9, cores=4)
    thr = _row("inf1.xlarge", metric="throughput_per_s", measured=125.7, cores=4)
    copies = copies_in_measurement([lat, thr])
    assert list(copies.values()) == [1]
    cfg = row_config(lat, copies)
    assert (cfg.cores, cfg.copies) == (4, 1)  # one copy over the chip's four cores, one request in flight
    inf2 = [_row(measured=1.0), _row(metric="throughput_per_s", measured=1998.0)]
    cfg = row_config(inf2[0], copies_in_measurement(inf2))
    assert (cfg.cores, cfg.copies) == (None, 2)  # one copy per core, both running
    resnet = [_row(model="resnet18", measured=0.6), _row(model="resnet18", metric="throughput_per_s", measured=1669.8)]
    cfg = row_config(resnet[0], copies_in_measurement(resnet))
    assert (cfg.cores, cfg.copies) == (None, 1)  # one request in flight: one copy on one core (no tensor-parallel CNN)
    llm = _row("trn1.32xlarge", "tpot_ms_p50", 30.0, "llama-2-7b", 1, 32, "tensor-parallel", 128)
    cfg = row_config(llm)
    assert (cfg.mode, cfg.cores, cfg.new_tokens) == ("decode", 32, 128)


def test_more_requests_in_flight_than_copies_wait_their_turn():
    # 1095 sequences/s at 58.3 ms per batch of 8: eight batches in flight on four cores
    lat = _row("inf1.xlarge", measured=58.3, batch=8, cores=4)
    thr = _row("inf1.xlarge", metric="throughput_per_s", measured=1095.4, batch=8, cores=4)
    copies = copies_in_measurement([lat, thr])
    assert list(copies.values()) == [8]
    cfg = row_config(lat, copies)
    assert (cfg.cores, cfg.copies) == (None, 4)
    assert queueing(lat, cfg, copies) == pytest.approx(2.0)  # each copy serves two requests in turn
    assert queueing(thr, row_config(thr, copies), copies) == 1.0  # throughput needs no correction


def test_validation_runs_on_a_small_subset_and_reports_it():
    rows = [r for r in read_rows(PUBLISHED) if r.model == "bert-base" and r.instance == "inf2.xlarge"]
    results = validate(rows)
    assert len(results) == len(rows) >= 2
    assert all(r.simulated is not None and r.simulated > 0 for r in results)
    text = report(results)
    assert text.count("| bert-base | inf2.xlarge |") == len(rows)
    assert "Median absolute error" in text


def test_unsupported_models_are_reported_as_skipped():
    results = validate([_row(model="unet")])
    assert results[0].simulated is None and "no preset" in results[0].skipped
    pipeline = validate([_row("inf1.6xlarge", parallelism="pipeline", cores=None)])
    assert pipeline[0].simulated is None and "NeuronCore Pipeline" in pipeline[0].skipped


def test_copies_in_flight_are_capped_by_what_the_instance_holds():
    # a 13B model needs both cores of inf2.xlarge: one copy, and two requests in flight wait their turn
    lat = _row("inf2.xlarge", measured=100.0, model="llama-2-13b", cores=None)
    thr = _row("inf2.xlarge", metric="throughput_per_s", measured=20.0, model="llama-2-13b", cores=None)
    copies = copies_in_measurement([lat, thr])
    cfg = row_config(lat, copies)
    assert cfg.copies == 1
    assert queueing(lat, cfg, copies) == pytest.approx(2.0)
