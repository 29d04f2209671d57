"""Relations the model must reproduce from first principles, not from stored numbers."""

import pytest

from sim.cost.dma import core_bytes_per_s
from sim.hardware.chip import get_chip
from sim.metrics import compute_metrics


def test_trainium2_beats_inferentia1_on_bert_large(run):
    inf1 = compute_metrics(run("bert-large", "inf1")).latency_s
    trn2 = compute_metrics(run("bert-large", "trn2")).latency_s
    assert trn2 * 3 < inf1


@pytest.mark.parametrize("chip", ["inf2", "trn1", "trn2"])
def test_llama_decode_is_bound_by_memory_bandwidth(run, chip):
    trace = run("llama-3-8b", chip, mode="decode", seq=128, new_tokens=16)
    m = trace.meta
    met = compute_metrics(trace)
    read_params = 8.03e9 - 128256 * 4096  # every weight but the input embedding table (only rows are gathered)
    weights_per_core = read_params * 2 / (m["cores_per_copy"] * m["lnc"])
    floor = weights_per_core / core_bytes_per_s(get_chip(chip), m["cores_active"])
    assert met.per_token_s >= floor
    assert met.per_token_s <= 1.35 * floor
    dma_busy = trace.busy_ns(trace.track_index("dma_read")) / trace.duration_ns
    assert dma_busy > 0.8 and dma_busy > met.engine_utilization["tensor"]


@pytest.mark.parametrize("chip", ["inf1", "inf2", "trn2"])
def test_larger_batches_raise_throughput(run, chip):
    thr = [compute_metrics(run("bert-base", chip, batch=b)).throughput_per_s for b in (1, 4, 16)]
    assert thr[0] < thr[1] < thr[2]


def test_fp32_is_much_slower_than_bf16_when_compute_bound(run):
    bf16 = compute_metrics(run("bert-base", "trn1", batch=16)).latency_s
    fp32 = compute_metrics(run("bert-base", "trn1", batch=16, dtype="fp32")).latency_s
    assert fp32 > 2.0 * bf16


def test_decode_reports_time_to_first_token_and_per_token_time(run):
    met = compute_metrics(run("gpt2", "trn1", mode="decode", seq=64, new_tokens=32))
    assert met.time_to_first_token_s > met.per_token_s > 0
    assert met.throughput_per_s == pytest.approx(2 / met.per_token_s)  # two copies, batch 1


def test_training_step_is_slower_than_inference_and_writes_gradients(run):
    inf = compute_metrics(run("bert-base", "trn1", batch=8))
    train = compute_metrics(run("bert-base", "trn1", batch=8, mode="training"))
    assert train.latency_s > 2.5 * inf.latency_s
    assert train.hbm_write_bytes > 110e6 * 4  # optimizer writes FP32 weights and moments
    assert train.flops == pytest.approx(3 * inf.flops, rel=0.1)
