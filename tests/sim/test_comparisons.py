"""Relations the model must reproduce from first principles, not from stored numbers."""

import json
from dataclasses import replace

import numpy as np
import pytest

from sim.cost.dma import core_bytes_per_s
from sim.errors import ConfigError
from sim.hardware.chip import get_chip
from sim.hardware.instances import get_instance
from sim.host import HOST, LAUNCH
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate


def test_trainium2_beats_inferentia1_on_bert_large(run):
    inf1 = compute_metrics(run("bert-large", "inf1")).latency_s
    trn2 = compute_metrics(run("bert-large", "trn2")).latency_s
    assert trn2 * 3 < inf1


@pytest.mark.parametrize("model", ["vit-base", "clip-vit-large-patch14"])
def test_trainium3_runs_a_compiled_vision_model_no_slower_than_trainium2(run, model):
    # the same compiled graph on the newer core: its semaphore waits assumed Trainium2's, not
    # NeuronCore-v2's three and a half times longer ones (Trainium3 has no measurements to fit)
    trn2, trn3 = (compute_metrics(run(model, chip)).latency_s for chip in ("trn2", "trn3"))
    assert trn3 <= trn2


@pytest.mark.parametrize("chip", ["inf2", "trn1", "trn2"])
def test_llama_decode_is_bound_by_memory_bandwidth(run, chip):
    trace = run("llama-3-8b", chip, mode="decode", seq=128, new_tokens=16)
    m = trace.meta
    met = compute_metrics(trace)
    read_params = 8.03e9 - 128256 * 4096  # every weight but the input embedding table (only rows are gathered)
    weights_per_core = read_params * 2 / (m["cores_per_copy"] * m["lnc"])
    chip_ = get_chip(chip)
    floor = weights_per_core / core_bytes_per_s(chip_, m["cores_active"], chip_.efficiency.weight_descriptor_bytes)
    assert met.per_token_s >= floor
    assert met.per_token_s <= 1.35 * floor
    dma_busy = trace.busy_ns(trace.track_index("dma_read")) / trace.duration_ns
    assert dma_busy > 0.75 and dma_busy > met.engine_utilization["tensor"]


@pytest.mark.parametrize("chip", ["inf1", "inf2", "trn2"])
def test_larger_batches_raise_throughput(run, chip):
    # (up to the batch whose activations still fit SBUF: beyond, spills share the memory bandwidth)
    thr = [compute_metrics(run("bert-base", chip, batch=b)).throughput_per_s for b in (1, 2, 8)]
    assert thr[0] < thr[1] < thr[2]


def test_fp32_matmuls_are_much_slower_than_bf16_when_compute_bound(run):
    bf16 = compute_metrics(run("bert-base", "trn1", batch=16)).latency_s
    fp32 = compute_metrics(run("bert-base", "trn1", batch=16, dtype="fp32", autocast="none")).latency_s
    assert fp32 > 2.0 * bf16


def test_an_fp32_model_auto_cast_for_matmuls_multiplies_in_bf16(run):
    # neuronx-cc --auto-cast matmult: matmuls and weights in BF16, activations stay FP32
    bf16 = run("bert-base", "trn1", batch=1)
    fp32 = run("bert-base", "trn1", batch=1, dtype="fp32", autocast="matmult")
    # since Neuron 2.27 the compiler casts nothing unless told to
    assert run("bert-base", "trn1", batch=1, dtype="fp32").meta["matmul_dtype"] == "fp32"
    assert fp32.meta["matmul_dtype"] == "bf16"
    tensor = fp32.track_index("tensor")
    assert fp32.busy_ns(tensor) == pytest.approx(bf16.busy_ns(bf16.track_index("tensor")), rel=0.01)
    # only the embedding tables, which no matmul reads, stay in FP32
    assert compute_metrics(fp32).hbm_read_bytes == pytest.approx(compute_metrics(bf16).hbm_read_bytes, rel=0.05)
    inf1 = run("bert-base", "inf1", batch=1, dtype="fp32")  # neuron-cc casts all of an FP32 model to BF16
    assert (inf1.meta["matmul_dtype"], inf1.meta["dtype"]) == ("bf16", "fp32")


def test_fp32_activations_that_overflow_sbuf_run_in_blocks_of_sequences(run):
    # 16 sequences of 128 tokens: the FFN's FP32 intermediate is 2048 x 3072 x 4 B = 25 MB per layer,
    # more than SBUF keeps of one activation; one sequence's (1.6 MB) fits, so the compiler runs the
    # layers a block of sequences at a time and nothing leaves SBUF but the logits
    fp32 = compute_metrics(run("bert-base", "trn1", batch=16, dtype="fp32", autocast="matmult"))
    assert fp32.hbm_write_bytes == 0.0
    # -O1 fuses nothing: every op runs the whole batch, spilling what overflows; each spilled byte
    # is read back once, and BF16 halves what overflows
    bf16 = compute_metrics(run("bert-base", "trn1", batch=16, optlevel=1))
    fp32 = compute_metrics(run("bert-base", "trn1", batch=16, dtype="fp32", autocast="matmult", optlevel=1))
    assert fp32.hbm_write_bytes > 2 * bf16.hbm_write_bytes > 0
    extra_read, extra_write = fp32.hbm_read_bytes - bf16.hbm_read_bytes, fp32.hbm_write_bytes - bf16.hbm_write_bytes
    assert extra_read == pytest.approx(extra_write, rel=0.05)


def test_decode_reports_time_to_first_token_and_per_token_time(run):
    # a 512-token prompt is compute-bound, one more token streams the weights once
    met = compute_metrics(run("gpt2", "trn1", mode="decode", seq=512, new_tokens=32))
    assert met.time_to_first_token_s > 1.5 * met.per_token_s > 0
    assert met.throughput_per_s == pytest.approx(2 / met.per_token_s)  # two copies, batch 1


def test_training_step_is_slower_than_inference_and_writes_gradients(run):
    inf = compute_metrics(run("bert-base", "trn1", batch=8))
    train = compute_metrics(run("bert-base", "trn1", batch=8, mode="training"))
    assert train.latency_s > 2.5 * inf.latency_s
    assert train.hbm_write_bytes > 110e6 * 4  # optimizer writes FP32 weights and moments
    mlm_head = 8 * 128 * 2 * (768 * 768 + 768 * 30522)  # pretraining: a masked-LM head over every token
    assert train.flops == pytest.approx(3 * (inf.flops + mlm_head), rel=0.03)


def test_weights_stream_in_while_a_cross_chip_all_reduce_runs():
    trace = simulate(RunConfig(model="llama-2-13b", instance="trn1.32xlarge", mode="decode", seq=128,
                               new_tokens=2, cores=32))
    ev = trace.events
    coll = ev["track"] == trace.track_index("collective")
    reads = ev["track"] == trace.track_index("dma_read")
    c0, c1 = ev["start_ns"][coll], ev["start_ns"][coll] + ev["dur_ns"][coll]
    r0, r1 = ev["start_ns"][reads], ev["start_ns"][reads] + ev["dur_ns"][reads]
    # read time that falls inside some all-reduce: the next layer's weights arrive meanwhile
    overlap = sum(np.clip(np.minimum(r1, b) - np.maximum(r0, a), 0, None).sum() for a, b in zip(c0, c1, strict=True))
    assert overlap > 0.3 * ev["dur_ns"][coll].sum()


def test_every_execution_pays_its_launch_on_the_host_track():
    cfg = RunConfig(model="gpt2", chip="inf2", mode="decode", seq=64, new_tokens=8)
    eff = replace(get_chip("inf2").efficiency, launch_overhead_s=50e-6)
    slow, fast = simulate(cfg, efficiency=eff), simulate(cfg, efficiency=replace(eff, launch_overhead_s=0.0))
    ev = slow.events
    launches = (ev["track"] == slow.track_index(HOST)) & (np.asarray(slow.op_names)[ev["op"]] == LAUNCH)
    assert ev["dur_ns"][launches] * slow.event_repeats[launches] == pytest.approx(np.full(launches.sum(), 50e3))
    assert (slow.event_repeats[launches]).sum() == 8  # the prompt's execution and 7 token steps
    a, b = compute_metrics(slow), compute_metrics(fast)
    assert a.per_token_s - b.per_token_s == pytest.approx(50e-6, rel=1e-6)
    assert a.time_to_first_token_s - b.time_to_first_token_s == pytest.approx(50e-6, rel=1e-6)
    assert a.latency_s == pytest.approx(a.time_to_first_token_s + 7 * a.per_token_s)


def test_a_lone_copy_has_the_chips_memory_to_itself(run):
    trace = run("bert-large", "inf1")
    met = compute_metrics(trace)
    # the trace is one request with its copy alone, streaming all 670 MB of weights per inference at
    # what one core's DMA draws; the four copies that give the throughput share the chip's 50 GiB/s
    # of DDR, less than four cores would draw
    assert (trace.meta["cores_active"], trace.meta["cores_active_under_load"], trace.meta["copies"]) == (1, 4, 4)
    chip = get_chip("inf1")
    alone_rate = chip.efficiency.core_dma_bytes_per_s
    shared_rate = chip.memory_bytes_per_s * chip.memory_efficiency / 4
    assert met.latency_under_load_s / met.latency_s == pytest.approx(alone_rate / shared_rate, rel=0.1)
    assert met.throughput_per_s == pytest.approx(4 / met.latency_under_load_s)
    one = compute_metrics(run("bert-large", "inf1", copies=1))
    assert one.latency_s == met.latency_s == one.latency_under_load_s
    assert one.throughput_per_s == pytest.approx(1 / one.latency_s)


def test_copies_on_separate_memory_stacks_do_not_slow_each_other(run):
    trace = run("bert-large", "inf2")  # two cores, each beside its own HBM stack
    assert "under_load" not in trace.meta
    met = compute_metrics(trace)
    assert met.latency_under_load_s == met.latency_s
    assert met.throughput_per_s == pytest.approx(2 / met.latency_s)


def test_more_copies_than_the_instance_holds_is_refused():
    with pytest.raises(ConfigError, match=r"between 1 and 4 \(inf1.xlarge holds 4 copies of 1 core"):
        simulate(RunConfig(model="bert-base", chip="inf1", copies=5))
    with pytest.raises(ConfigError, match="copies must be a positive integer"):
        simulate(RunConfig(model="bert-base", chip="inf1", copies=0))


def test_weights_that_fit_beside_their_activations_are_read_once(run):
    # bert-large FFN weights (8 MiB per matmul) fit in SBUF next to a quarter of activations; the
    # activations of 16 384 tokens do not, but one sequence's do (its FFN intermediate 256 x 4096 x
    # 2 B = 2 MiB, its 16 heads' scores 16 x 256 x 256 x 2 B = 2 MiB): the layers run a block of
    # sequences at a time, the weights read once and nothing spilled
    trace = run("bert-large", "inf2", batch=64, seq=256)
    assert trace.meta["weight_refetch_bytes"] == 0.0
    met = compute_metrics(trace)
    params_bytes = 335e6 * 2
    assert met.hbm_write_bytes == 0.0
    assert params_bytes < met.hbm_read_bytes < 1.1 * params_bytes


def test_a_data_parallel_gradient_all_reduce_on_one_chip_stays_on_the_chip(run):
    trace = run("bert-base", "trn1", mode="training", batch=8)
    assert trace.meta["copies"] == 2 and trace.meta["instance"] == "trn1.2xlarge"
    chip = get_chip("trn1")
    coll = trace.events["track"] == trace.track_index("collective")
    durations = trace.events["dur_ns"][coll] * 1e-9
    nbytes = trace.events["bytes"][coll]
    expected = 2 * chip.efficiency.collective_latency_s + nbytes / chip.intra_chip_link_bytes_per_s
    assert durations == pytest.approx(expected)  # no cross-chip setup, the on-chip link


def test_a_wide_output_spills_instead_of_streaming_the_weights_again(run):
    """Qwen2-7B on one core: an up-projection's 128 tokens x 37 888 outputs (9.7 MB) overflow the
    quarter of SBUF one activation may take (6.3 MB) by 3.4 MB, saved and read back; the 270 MB
    of weights are read once."""
    trace = run("qwen2-7b", "inf2", copies=1)
    assert trace.meta["cores_per_copy"] == 1
    assert trace.meta["weight_refetch_bytes"] == 0.0
    met = compute_metrics(trace)
    assert met.hbm_read_bytes < 1.05 * 7.62e9 * 2
    kv_cache = 28 * 2 * 128 * 4 * 128 * 2  # the prompt's keys and values, 4 KV heads of 128
    assert met.hbm_write_bytes - kv_cache == pytest.approx(28 * (128 * 37888 * 2 - 24 * 2**20 / 4), rel=1e-6)


def test_inputs_too_big_for_sbuf_stream_the_weights_once_per_block(tmp_path):
    """2048 tokens x 4096 of input do not fit a quarter of SBUF: a block of sequences at a time,
    with the weights read again for each."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
                                "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 32000}))
    trace = simulate(RunConfig(model=str(path), chip="inf2", seq=2048, copies=1, cores=1))
    assert trace.meta["weight_refetch_bytes"] > 0


def test_an_output_saved_for_the_backward_pass_spills_without_a_second_write():
    """Training writes a forward matmul's whole output to device memory anyway: spilling the part
    that overflows SBUF costs only its read-back, never a second write."""
    from sim.lowering import CoreContext, lower
    from sim.workloads.graph import Op, OpKind

    ctx = CoreContext(get_chip("inf2"), "bf16", "bf16", 1, 1, 1, get_instance("inf2.xlarge").topology)
    m, k, n = 128, 3584, 37888  # Qwen2-7B's gate/up projection of 128 tokens: 9.7 MB out, 270 MB weights
    forward = Op(name="gate_up", kind=OpKind.MATMUL, m=m, k=k, n=n, hbm_elems=k * n, params=k * n, weights=True)
    saved = Op(name="gate_up", kind=OpKind.MATMUL, m=m, k=k, n=n, hbm_elems=k * n, params=k * n, weights=True,
               hbm_write_elems=m * n)
    inference, training = lower(ctx, forward), lower(ctx, saved)
    spill = inference.write.nbytes * inference.chunks
    assert inference.weight_refetch_bytes == training.weight_refetch_bytes == 0.0
    assert training.write.nbytes * training.chunks == pytest.approx(m * n * 2)  # the saved output, once
    assert training.read.nbytes * training.chunks == pytest.approx(k * n * 2 + spill)  # weights once + read-back


def _ffn_up(items: int, tokens: int, k: int, n: int):
    from sim.workloads.graph import Op, OpKind

    return Op(name="up", kind=OpKind.MATMUL, m=items * tokens, k=k, n=n, hbm_elems=k * n, params=k * n,
              weights=True, items=items)


def _inf2_core(tiles_samples: bool = True):
    from sim.lowering import CoreContext

    return CoreContext(get_chip("inf2"), "bf16", "bf16", 1, 1, 1, get_instance("inf2.xlarge").topology,
                       tiles_samples=tiles_samples)


def test_a_batch_too_large_for_sbuf_runs_in_blocks_of_samples_instead_of_spilling():
    """bert-base's FFN up-projection over 16 sequences of 128 tokens on an Inferentia2 core (24 MiB
    of SBUF, a quarter of it 6,291,456 B for activations): 3,145,728 B in and 12,582,912 B out do not
    fit, one sequence's 983,040 B do, six to a block: three blocks, each within the budget. The
    4,718,592 B of weights stay in SBUF (18 MiB less the activations' 6 MiB has room)."""
    from sim.lowering import lower

    op = _ffn_up(16, 128, 768, 3072)
    blocked = lower(_inf2_core(), op)
    assert blocked.spill_save_bytes == blocked.spill_reload_bytes == blocked.weight_refetch_bytes == 0.0
    assert blocked.write is None
    assert blocked.read.nbytes * blocked.chunks == pytest.approx(768 * 3072 * 2)
    # one sample's activations, or a compile that fuses nothing, leave the whole batch to one op:
    # what overflows the budget, 12,582,912 - 6,291,456 B, is saved and read back
    for core, shape in ((_inf2_core(), replace(op, items=1)), (_inf2_core(tiles_samples=False), op)):
        whole = lower(core, shape)
        assert whole.spill_save_bytes == whole.spill_reload_bytes == pytest.approx(12_582_912 - 6_291_456)


def test_a_sample_too_large_for_sbuf_spills_what_overflows_each_block():
    """Two sequences of 2,048 tokens x 3,072 outputs (12,582,912 B each) overflow the 6,291,456 B
    budget even alone: a block holds one sequence and spills its overflow, 2 x 6,291,456 B in all,
    where the whole batch at once would spill 25,165,824 - 6,291,456 B."""
    from sim.lowering import lower

    lowered = lower(_inf2_core(), _ffn_up(2, 2048, 768, 3072))
    assert lowered.spill_save_bytes == pytest.approx(2 * (12_582_912 - 6_291_456))


def test_weights_that_would_stream_once_per_block_leave_the_batch_whole_and_spilling():
    """8 sequences of 128 tokens through a 512 x 12,800 projection: its 13,107,200 B of weights do
    not fit beside the activations (18,874,368 - 6,291,456 B of room). One sequence's 131,072 B in
    and 3,276,800 B out fit the budget, two do not: eight blocks would read the weights 7 x
    13,107,200 B more, where running the batch whole spills the output's overflow, 26,214,400 -
    6,291,456 B, saved and read back. Spilling moves fewer bytes: the weights are read once."""
    from sim.lowering import lower

    lowered = lower(_inf2_core(), _ffn_up(8, 128, 512, 12800))
    assert lowered.weight_refetch_bytes == 0.0
    assert lowered.spill_save_bytes == pytest.approx(26_214_400 - 6_291_456)


@pytest.mark.parametrize("row, run", [
    (128, None),  # NxD Inference: one head's 256 B a position, coalesced into the cache descriptor
    (2 * 4 * 128, 2048),  # Transformers NeuronX (SBH) at batch 2, 4 KV heads: one 2 KiB row a position
    (16 * 8 * 128, 2560),  # ... at batch 16, 8 KV heads: 32 KiB rows, past the packet size
])
def test_a_kv_cache_is_read_in_runs_its_layout_allows(row, run):
    """A decode step's keys on one Trainium2 core: 16 DMA engines x 23 GB/s at runs of 2,560 B or
    more, proportionally slower below (the NKI DMA guide). A position's row shorter than the
    compiled code's cache descriptor is read several positions to a run."""
    from sim.lowering import CoreContext, lower
    from sim.workloads.graph import Op, OpKind

    chip = get_chip("trn2")
    run = run or chip.efficiency.kv_descriptor_bytes
    ctx = CoreContext(chip, "bf16", "bf16", 1, 1, 1, get_instance("trn2.3xlarge").topology)
    count, positions = 64, 4096
    keys = Op(name="scores", kind=OpKind.MATMUL, m=4, k=128, n=positions, count=count, weights=False,
              hbm_elems=count * positions * 128, kv_row_elems=row)
    lowered = lower(ctx, keys)
    nbytes = count * positions * 128 * 2
    assert lowered.read.nbytes * lowered.chunks == pytest.approx(nbytes)
    assert lowered.read.dur_s * lowered.chunks == pytest.approx(nbytes / (16 * 23e9 * min(run, 2560) / 2560))


def test_an_image_too_large_for_sbuf_runs_in_blocks_of_its_lines(run):
    """VGG-11 on one 448 x 448 image: its first convolution's output, 448 x 448 x 64 x 2 B =
    25,690,112 B, overflows the 6,291,456 B SBUF keeps of one activation. The compiler runs the
    convolutions a block of image lines at a time and nothing spills; at -O1, which fuses nothing,
    that convolution alone saves 25,690,112 - 6,291,456 B to device memory."""
    from sim.analysis import summary

    tiled = summary(run("vgg11", "inf2", seq=448, copies=1))
    whole = summary(run("vgg11", "inf2", seq=448, copies=1, optlevel=1))
    assert tiled["spill_save_bytes"] == tiled["spill_reload_bytes"] == 0
    assert whole["spill_save_bytes"] > 25_690_112 - 6_291_456
