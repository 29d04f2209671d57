"""An inference's inputs and outputs crossing between host and device memory: what the traced
model returns (``--head``) and the bytes and seconds of its copies on the host track, counted by
hand."""

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.hardware.chip import get_chip
from sim.host import HOST, INPUT_COPY, OUTPUT_COPY
from sim.memory_plan import deployment
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.validate import read_rows

EFF = get_chip("inf2").efficiency
RATE = EFF.host_copy_bytes_per_s


def _host_events(trace, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Starts, durations (ns) and bytes of the host track's events named ``name``."""
    ev = trace.events
    sel = (ev["track"] == trace.track_index(HOST)) & (np.asarray(trace.op_names, dtype=object)[ev["op"]] == name)
    return ev["start_ns"][sel], ev["dur_ns"][sel], ev["bytes"][sel]


def _copy_s(cfg: RunConfig) -> float:
    """Seconds of one inference's copies, in and out."""
    trace = simulate(cfg)
    return sum(float(_host_events(trace, name)[1].sum()) for name in (INPUT_COPY, OUTPUT_COPY)) * 1e-9


def _copy_bytes(cfg: RunConfig) -> float:
    trace = simulate(cfg)
    return sum(float(_host_events(trace, name)[2].sum()) for name in (INPUT_COPY, OUTPUT_COPY))


def test_a_masked_lm_returns_the_logits_of_every_token_of_its_vocabulary():
    cfg = RunConfig(model="xlm-roberta-base", chip="inf2", dtype="fp32", autocast="matmult", head="mlm")
    # ids and mask in: 2 x 128 int32 at the copy rate; out: 128 tokens x 250,002 logits in fp32, 128 MB,
    # more than the 32 MiB the host's allocator reuses: new pages every inference, at the page-fault rate
    assert EFF.host_mmap_threshold_bytes == 32 << 20
    expected = 2 * 128 * 4 / RATE + 128 * 250_002 * 4 / EFF.host_fault_bytes_per_s
    assert _copy_s(cfg) == pytest.approx(expected)
    # Inferentia1's compiler casts the whole graph to BF16 inside; its outputs stay FP32
    inf1 = RunConfig(model="xlm-roberta-base", chip="inf1", dtype="fp32", head="mlm")
    assert _copy_s(inf1) == pytest.approx(expected)


def test_trainium1_copies_at_its_own_rate():
    base = dict(model="bert-base", batch=16, dtype="fp32", autocast="matmult", head="none")
    nbytes = 2 * 16 * 128 * 4 + 16 * 129 * 768 * 4  # 6.3 MB: below the threshold, memory the allocator reuses
    trn1 = get_chip("trn1").efficiency.host_copy_bytes_per_s
    assert trn1 != RATE
    assert _copy_s(RunConfig(**base, chip="trn1")) == pytest.approx(nbytes / trn1)
    assert _copy_s(RunConfig(**base, chip="inf2")) == pytest.approx(nbytes / RATE)


def test_an_automodel_returns_its_hidden_states_and_pooled_output_a_classifier_its_labels():
    base = dict(model="bert-base", chip="inf2", batch=2, dtype="fp32", autocast="matmult")
    # 2 sequences x (128 tokens + the pooled one) x 768 in fp32
    assert _copy_bytes(RunConfig(**base, head="none")) == pytest.approx(2 * 2 * 128 * 4 + 2 * 129 * 768 * 4)
    assert _copy_bytes(RunConfig(**base)) == pytest.approx(2 * 2 * 128 * 4 + 2 * 2 * 4)  # two labels


def test_an_image_model_copies_its_pixels_in_and_its_class_logits_out():
    cfg = RunConfig(model="resnet18", chip="inf2", batch=8, dtype="fp32", autocast="matmult")
    assert _copy_bytes(cfg) == pytest.approx(8 * 3 * 224 * 224 * 4 + 8 * 1000 * 4)


def test_the_copies_are_drawn_around_each_inference_and_make_part_of_its_latency():
    trace = simulate(RunConfig(model="xlm-roberta-base", chip="trn1", dtype="fp32", head="mlm", requests=3))
    (in_at, in_ns, _), (out_at, out_ns, out_bytes) = (_host_events(trace, n) for n in (INPUT_COPY, OUTPUT_COPY))
    assert len(in_at) == len(out_at) == 3 and out_ns.min() > 1e7  # 128 MB of logits at a few GB/s: tens of ms
    assert out_bytes.tolist() == [128 * 250_002 * 4] * 3
    ev = trace.events
    device = ev["track"] != trace.track_index(HOST)
    ends = ev["start_ns"] + ev["dur_ns"]
    for k in range(3):  # each request: its inputs in, the device's work, its logits out
        mine = device & (ev["start_ns"] >= in_at[k] + in_ns[k]) & (ends <= out_at[k])
        assert ev["start_ns"][mine].min() == pytest.approx(in_at[k] + in_ns[k])
        assert ends[mine].max() == pytest.approx(out_at[k])
    met = compute_metrics(trace)
    assert met.host_s * 1e9 == pytest.approx(float(in_ns.sum() + out_ns.sum()) / 3)
    assert met.latency_s * 1e9 == pytest.approx(float(out_at[0] + out_ns[0] - in_at[0]))  # one request, drawn
    for cfg in (RunConfig(model="gpt2", chip="trn1", mode="decode", new_tokens=4),
                RunConfig(model="distilbert", chip="trn1", mode="training")):  # neither copies: token ids, a loader
        trace = simulate(cfg)
        assert not any(len(_host_events(trace, n)[0]) for n in (INPUT_COPY, OUTPUT_COPY))


def test_a_masked_lms_logits_count_in_the_device_memory_a_copy_needs():
    base = dict(model="xlm-roberta-base", chip="inf2", dtype="fp32", autocast="matmult")
    mlm, none = (deployment(RunConfig(**base, head=h)).memory_per_core_bytes for h in ("mlm", "none"))
    # the widest activation (held with its input, in fp32) is 128 x 250,002 logits, not the
    # 128 x 3,072 of the feed-forward layer; the transform before the logits weighs what the
    # pooler it replaces weighs
    assert mlm - none == 2 * 4 * (128 * 250_002 - 128 * 3_072)


@pytest.mark.parametrize("cfg, message", [
    (RunConfig(model="gpt2", chip="inf2", head="mlm"), "--head mlm is an encoder's inference output"),
    (RunConfig(model="bert-base", chip="trn1", mode="training", head="none"), "in training mode has its own"),
    (RunConfig(model="bert-base", chip="inf2", head="lm"), "unknown head 'lm': choose one of classifier, none, mlm"),
])
def test_a_head_other_than_an_encoders_inference_output_is_refused(cfg, message):
    with pytest.raises(ConfigError, match=message):
        simulate(cfg)


def test_validation_runs_each_encoder_as_its_benchmark_page_states_its_task():
    heads = {(r.model, r.instance): r.config.head for r in read_rows()
             if r.config is not None and r.config.mode == "inference"}
    assert heads[("xlm-roberta-base", "inf2.48xlarge")] == "mlm"  # Raw Output (AutoModelForMaskedLM)
    assert heads[("xlm-roberta-base", "trn1.32xlarge")] == "mlm"
    assert heads[("bert-base", "inf2.xlarge")] == "none"  # Raw Output (AutoModel)
    assert heads[("bert-base", "trn1.2xlarge")] == "none"
    assert heads[("bert-base", "inf1.xlarge")] == "classifier"  # Inferentia1's pages state no task
    assert heads[("resnet18", "inf2.xlarge")] == "classifier"  # Image Classification
