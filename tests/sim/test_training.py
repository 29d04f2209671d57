"""Training steps: pretraining heads of encoders, and gradient accumulation."""

import json

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model
from sim.workloads.graph import OpKind
from sim.workloads.models import PRESET_DIR, spec_from_config
from sim.workloads.training import DataParallel, training_program

BERT_VOCAB = 30522


def _layers(prog):
    return {la.name: prog.ops[la.first_op:la.first_op + la.n_ops] for la in prog.layers}


def test_bert_large_pretrains_with_a_masked_lm_head_over_every_token():
    """BertForPreTraining at batch 1, 128 tokens: each token goes through a 1024 x 1024 dense
    layer and the 1024 x 30522 decoder, 2 FLOPs per multiply-add, then the loss over its logits."""
    prog = build_program(get_model("bert-large"), Phase(1, 128, 128, training=True), 2)
    layers = _layers(prog)
    mlm = layers["mlm_head"]
    hand = 2 * 128 * (1024 * 1024 + 1024 * BERT_VOCAB)
    assert sum(op.flops for op in mlm if op.kind is OpKind.MATMUL) == hand
    # a layer norm of 128 x 1024 (two passes) and three passes of the loss over 128 x 30522 logits
    assert sum(op.flops for op in mlm) == hand + 2 * 128 * 1024 + 3 * 128 * BERT_VOCAB
    # the decoder is the token embedding table: read, not counted as parameters again
    decoder = next(op for op in mlm if op.name == "mlm_decoder")
    assert (decoder.params, decoder.hbm_elems) == (0, 1024 * BERT_VOCAB)
    assert sum(op.params for op in mlm) == 1024 * 1024
    pair = layers["sentence_pair_head"]  # next-sentence prediction on the pooled CLS token
    assert [(op.m, op.k, op.n) for op in pair if op.kind is OpKind.MATMUL] == [(1, 1024, 1024), (1, 1024, 2)]
    assert "head" not in layers


def test_inference_and_encoders_with_a_tower_keep_their_heads():
    bert = _layers(build_program(get_model("bert-large"), Phase(1, 128, 128), 2))
    assert "mlm_head" not in bert and [op.name for op in bert["head"]] == ["pooler", "classifier"]
    tower = _layers(build_program(get_model("encoder-mlp"), Phase(1, 128, 128, training=True), 2))
    assert "mlm_head" not in tower and any(op.name.startswith("tower") for op in tower["head"])
    roberta = _layers(build_program(get_model("roberta-base"), Phase(1, 128, 128, training=True), 2))
    assert "mlm_head" in roberta and "sentence_pair_head" not in roberta  # RoBERTa drops next-sentence


def test_bert_training_flops_grow_by_the_masked_lm_head(run):
    """Forward, then backward at twice the forward (input and weight gradients): three times the
    forward, whose head now also holds the masked-LM head; AdamW adds about 1.5% for bert-large."""
    inference = compute_metrics(run("bert-large", "trn1")).flops
    training = compute_metrics(run("bert-large", "trn1", mode="training")).flops
    mlm = 2 * 128 * (1024 * 1024 + 1024 * BERT_VOCAB)
    assert training == pytest.approx(3 * (inference + mlm), rel=0.02)
    assert training > 1.1 * 3 * inference


BERT_BASE_MLM = 2 * 128 * (768 * 768 + 768 * BERT_VOCAB)  # per sequence of 128 tokens


def _phase_of(trace, name):
    return next(p for p in trace.meta["phases"] if p["name"] == name)


def test_a_step_of_four_micro_batches_runs_four_passes_then_one_all_reduce_and_one_update(run):
    """bert-base, batch 8, on trn1.2xlarge (two copies, one per core): each micro-batch is a
    forward and a backward pass, 3 x the forward's FLOPs; the step adds three of them to a
    one-micro-batch step and keeps its one all-reduce and one optimizer update."""
    one = run("bert-base", "trn1", mode="training", batch=8)
    four = run("bert-base", "trn1", mode="training", batch=8, grad_accum=4)
    forward = compute_metrics(run("bert-base", "trn1", batch=8)).flops + 8 * BERT_BASE_MLM
    assert four.meta["grad_accum"] == 4 and four.meta["copies"] == 2
    m1, m4 = compute_metrics(one), compute_metrics(four)
    assert m4.flops - m1.flops == pytest.approx(3 * 3 * forward, rel=0.01)
    assert m4.throughput_per_s * m4.latency_s == pytest.approx(8 * 4 * 2)  # samples per step, both copies
    assert m4.throughput_per_s > m1.throughput_per_s  # the update is paid once for four micro-batches
    # the gradient all-reduces and the optimizer run once, during and after the last micro-batch
    last = _phase_of(four, "micro-batch 4")
    names = np.array(four.op_names)[four.events["op"]]
    for name in ("grad_allreduce", "adamw."):
        sel = np.char.startswith(names, name)
        assert sel.any() and four.events["start_ns"][sel].min() >= last["start_ns"]
    # gradients go out in 50 MiB buckets of FP32 (13.1 M) as the backward pass fills them: the heads
    # with layers 11-10 (15.4 M), then layers 9-8, 7-6, 5-4, 3-2 and 1-0 (14.2 M each), then the
    # embeddings (23.8 M)
    assert four.op_names.count("grad_allreduce") == one.op_names.count("grad_allreduce") == 7
    # the all-reduces overlap the last backward pass: they start before its last gradient op ends
    grads = np.char.endswith(names, ".grad_weight") & (four.events["start_ns"] >= last["start_ns"])
    first_reduce = four.events["start_ns"][names == "grad_allreduce"].min()
    assert first_reduce < (four.events["start_ns"] + four.events["dur_ns"])[grads].max()


def test_many_micro_batches_are_simulated_once_and_counted_each(run):
    """256 micro-batches store as many events as 32 (the first three and the last), and each
    micro-batch between them counts the same FLOPs and time."""
    n32 = run("bert-base", "trn1", mode="training", batch=1, grad_accum=32)
    n256 = run("bert-base", "trn1", mode="training", batch=1, grad_accum=256)
    n3 = run("bert-base", "trn1", mode="training", batch=1, grad_accum=3)
    n2 = run("bert-base", "trn1", mode="training", batch=1, grad_accum=2)
    assert n256.n_events == n32.n_events < 2 * n3.n_events
    assert _phase_of(n256, "micro-batch 2")["repeat"] == 254
    micro = compute_metrics(n3).flops - compute_metrics(n2).flops
    assert micro == pytest.approx(3 * (compute_metrics(run("bert-base", "trn1")).flops + BERT_BASE_MLM), rel=0.01)
    assert compute_metrics(n256).flops - compute_metrics(n32).flops == pytest.approx(224 * micro, rel=1e-9)
    step = compute_metrics(n3).latency_s - compute_metrics(n2).latency_s
    assert compute_metrics(n256).latency_s - compute_metrics(n32).latency_s == pytest.approx(224 * step, rel=1e-9)


@pytest.mark.parametrize("kw, message", [
    ({"mode": "training", "grad_accum": 0}, "grad_accum must be a positive integer, got 0"),
    ({"grad_accum": 4}, "gradient accumulation is for training; inference mode has no optimizer step"),
])
def test_bad_gradient_accumulation_is_refused_in_one_line(kw, message):
    with pytest.raises(ConfigError, match=message):
        simulate(RunConfig(model="bert-base", chip="trn1", **kw))


def test_forward_and_input_gradients_run_in_blocks_of_samples_but_weight_gradients_do_not():
    # a sample's activations and their gradients are its own, so the compiler may run them a block
    # of sequences at a time; a weight gradient sums over every sequence of the micro-batch
    from sim.workloads import training_program
    from sim.workloads.training import DataParallel

    forward = build_program(get_model("bert-base"), Phase(8, 128, 128), 2)
    prog = training_program(forward, forward.params_per_layer(), DataParallel(ranks=1))
    by_name = {op.name: op for op in prog.ops}
    assert {op.items for op in forward.ops} == {8}
    assert by_name["up.grad_input"].items == 8
    assert by_name["up.grad_weight"].items == 1


def _named(prog):
    return {(la.name, op.name): op for la in prog.layers for op in prog.ops[la.first_op:la.first_op + la.n_ops]}


def test_bert_trains_with_dropout_where_transformers_puts_it():
    """bert-base (BertConfig: hidden and attention-probability dropout 0.1) at batch 2, 128 tokens:
    the embeddings (2 x 128 x 768), each layer's attention probabilities (2 x 12 heads x 128 x 128)
    and its two sub-blocks' outputs (2 x 128 x 768) before the residual add. Each is drawn and
    applied in two Vector passes; its gradient is one pass, the mask read back."""
    spec = get_model("bert-base")
    assert (spec.hidden_dropout, spec.attention_dropout) == (0.1, 0.1)
    fwd = build_program(spec, Phase(2, 128, 128, training=True), 2)
    ops = _named(fwd)
    drops = {key: op for key, op in ops.items() if op.random}
    assert len(drops) == 1 + 12 * 3
    assert drops[("embedding", "dropout")].elems == 2 * 128 * 768
    assert drops[("layer5.attention", "probs_dropout")].elems == 2 * 12 * 128 * 128
    assert drops[("layer5.attention", "dropout")].elems == drops[("layer5.mlp", "dropout")].elems == 2 * 128 * 768
    assert {op.passes for op in drops.values()} == {2.0}
    # the residual add reads the dropped output, the context matmul the dropped probabilities
    names = [op.name for op in fwd.ops]
    assert names[fwd.ops[names.index("residual")].deps[0]] == "dropout"
    step = training_program(fwd, fwd.params_per_layer(), DataParallel())
    grad = next(op for op in step.ops if op.name == "probs_dropout.grad")
    assert (grad.passes, grad.elems, grad.hbm_elems) == (1.0, 2 * 12 * 128 * 128, 2 * 12 * 128 * 128)
    # inference drops nothing
    assert not any(op.random for op in build_program(spec, Phase(2, 128, 128), 2).ops)


def test_a_flash_kernel_drops_its_probabilities_in_sbuf_and_draws_the_mask_again_backward():
    """bert-base training on trn1 with the flash-attention kernel, batch 2, 128 tokens: the kernel
    (NKI flash_fwd with dropout_p 0.1) drops each layer's 2 x 12 x 128 x 128 = 393,216
    probabilities in two Vector passes, nl.dropout then nl.multiply by 1/(1-p): 2 x 393,216 / 128
    lanes = 6,144 cycles at 1.12 GHz, 5.49 us, moving no bytes. Its backward kernel
    (flash_attn_bwd) keeps no mask: it draws the same one again from the seed, two more passes."""
    trace = simulate(RunConfig(model="bert-base", chip="trn1", mode="training", batch=2, seq=128, attention="flash"))
    hand_ns = 2 * 2 * 12 * 128 * 128 / 128 / 1.12
    for op in ("probs_dropout", "probs_dropout.grad_recompute"):
        nbytes, busy = _op_track(trace, op, "vector")
        assert nbytes == 0 and busy == pytest.approx(hand_ns, abs=1)
        assert _op_track(trace, op, "dma_read") == _op_track(trace, op, "dma_write") == (0, 0)
    # nothing dropped in inference, nor in training when the config sets 0
    assert "probs_dropout" not in simulate(RunConfig(model="bert-base", chip="trn1", batch=2, seq=128,
                                                     attention="flash")).op_names
    base = json.loads((PRESET_DIR / "bert-base.json").read_text())
    spec = spec_from_config("b", {**base, "attention_probs_dropout_prob": 0.0})
    fwd = build_program(spec, Phase(2, 128, 128, training=True, flash=True), 2)
    step = training_program(fwd, fwd.params_per_layer(), DataParallel())
    assert not any(op.name.startswith("probs_dropout") for op in step.ops)


def test_dropout_comes_from_the_config_or_its_class_default(tmp_path):
    """A config.json that sets its dropout to 0 trains without it; ALBERT's and Llama's config
    classes drop nothing by default; GPT-2's resid_pdrop and attn_pdrop are read; DistilBERT's
    dropout and attention_dropout."""
    base = json.loads((PRESET_DIR / "bert-base.json").read_text())
    spec = spec_from_config("b", {**base, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    assert not any(op.random for op in build_program(spec, Phase(2, 128, 128, training=True), 2).ops)
    assert (get_model("albert-base").hidden_dropout, get_model("llama-3-8b").attention_dropout) == (0.0, 0.0)
    gpt2 = spec_from_config("g", {**json.loads((PRESET_DIR / "gpt2.json").read_text()), "attn_pdrop": 0.25})
    assert (gpt2.hidden_dropout, gpt2.attention_dropout) == (0.1, 0.25)
    # DistilBERT (dropout and attention_dropout 0.1) leaves its attention's output undropped
    fwd = build_program(get_model("distilbert"), Phase(2, 128, 128, training=True), 2)
    assert sum(op.random for op in fwd.ops) == 1 + 6 * 2  # its 6 layers' probabilities and MLP outputs
    assert [name for (la, name), op in _named(fwd).items() if op.random and la == "layer0.attention"] == [
        "probs_dropout"]


@pytest.mark.parametrize("value", [1.0, -0.1, "0.1", True])
def test_a_bad_dropout_probability_is_refused_in_one_line(value):
    base = json.loads((PRESET_DIR / "bert-base.json").read_text())
    with pytest.raises(ConfigError, match=r"config.json: hidden_dropout_prob must be a probability from 0 to below 1"):
        spec_from_config("b", {**base, "hidden_dropout_prob": value})


def test_training_ends_with_the_loss_over_every_logit_not_sampling():
    """Llama-3-8B over 8 cores, 2 x 512 tokens: each core's LM head computes 1,024 x 16,032 logits
    (128,256 / 8); the loss takes their maximum and their exponentials' sum (each all-reduced over
    the 8 cores, 1,024 elements) and the log-probabilities: three passes. Its backward pass is
    log_softmax's gradient, two passes over the kept log-probabilities; the maximum and the sum
    have no gradient of their own. Nothing is sampled."""
    fwd = build_program(get_model("llama-3-8b"), Phase(2, 512, 512, 8, training=True, flash=True), 2)
    head = [op for (layer, _), op in _named(fwd).items() if layer == "lm_head"]
    assert [op.name for op in head][-5:] == ["loss_max", "loss_max_allreduce", "loss_exp", "loss_sum_allreduce",
                                             "log_probs"]
    assert {op.elems for op in head if op.name in ("loss_max", "loss_exp", "log_probs")} == {1024 * 16032}
    assert {op.elems for op in head if op.kind is OpKind.COLLECTIVE and op.name.startswith("loss")} == {1024}
    assert not any(op.name == "sample" for op in fwd.ops)
    step = training_program(fwd, fwd.params_per_layer(), DataParallel())
    grads = [op for op in step.ops if op.name.startswith(("loss", "log_probs")) and op.name.endswith(".grad")]
    assert [(op.name, op.passes, op.hbm_elems) for op in grads] == [("log_probs.grad", 2.0, 1024 * 16032)]


def _op_track(trace, op, kind):
    """Bytes and busy nanoseconds of the op named ``op`` on track ``kind`` (one layer's, as a
    trace keeps each of a model's identical layers once)."""
    sel = (trace.events["op"] == list(trace.op_names).index(op)) & (trace.events["track"] == trace.track_index(kind))
    return int(trace.events["bytes"][sel].sum()), int(trace.events["dur_ns"][sel].sum())


def test_an_fp32_model_trained_with_bf16_matmuls_reads_its_fp32_weights_and_casts_them():
    """bert-base's QKV projection (768 x 2,304 = 1,769,472 weights) in one training step on trn1:
    with BF16 autocast the weights are FP32 parameters, read at 4 bytes by the forward matmul and
    by its input gradient, each casting them on VectorE: 1,769,472 / 128 lanes = 13,824 cycles
    at 1.12 GHz, 12.34 us. A BF16 model reads them at 2 bytes and casts nothing; inference of
    the FP32 model reads the BF16 weights the compiler cast ahead of time."""
    kw = dict(model="bert-base", chip="trn1", batch=1, seq=128)
    autocast = simulate(RunConfig(mode="training", dtype="fp32", autocast="matmult", **kw))
    bf16 = simulate(RunConfig(mode="training", dtype="bf16", **kw))
    inference = simulate(RunConfig(mode="inference", dtype="fp32", autocast="matmult", **kw))
    weights = 768 * 2304
    for op in ("qkv", "qkv.grad_input"):
        assert _op_track(autocast, op, "dma_read")[0] == weights * 4
        assert _op_track(bf16, op, "dma_read")[0] == weights * 2
    assert _op_track(inference, "qkv", "dma_read")[0] == weights * 2
    # VectorE and ScalarE share the PSUM evacuations, so the cast shows in their sum
    cast_ns = weights / 128 / 1.12

    def engines(trace):
        return sum(_op_track(trace, "qkv", kind)[1] for kind in ("vector", "scalar"))
    assert engines(autocast) - engines(bf16) == pytest.approx(cast_ns, rel=0.05)
