"""Training steps: pretraining heads of encoders, and gradient accumulation."""

import pytest

from sim.metrics import compute_metrics
from sim.workloads import Phase, build_program, get_model
from sim.workloads.graph import OpKind

BERT_VOCAB = 30522


def _layers(prog):
    return {la.name: prog.ops[la.first_op:la.first_op + la.n_ops] for la in prog.layers}


def test_bert_large_pretrains_with_a_masked_lm_head_over_every_token():
    """BertForPreTraining at batch 1, 128 tokens: each token goes through a 1024 x 1024 dense
    layer and the 1024 x 30522 decoder, 2 FLOPs per multiply-add."""
    prog = build_program(get_model("bert-large"), Phase(1, 128, 128, training=True), 2)
    layers = _layers(prog)
    mlm = layers["mlm_head"]
    hand = 2 * 128 * (1024 * 1024 + 1024 * BERT_VOCAB)
    assert sum(op.flops for op in mlm if op.kind is OpKind.MATMUL) == hand
    assert sum(op.flops for op in mlm) == pytest.approx(hand, rel=1e-4)  # and a layer norm of 128 x 1024
    # the decoder is the token embedding table: read, not counted as parameters again
    decoder = next(op for op in mlm if op.name == "mlm_decoder")
    assert (decoder.params, decoder.hbm_elems) == (0, 1024 * BERT_VOCAB)
    assert sum(op.params for op in mlm) == 1024 * 1024
    pair = layers["sentence_pair_head"]  # next-sentence prediction on the pooled CLS token
    assert [(op.m, op.k, op.n) for op in pair] == [(1, 1024, 1024), (1, 1024, 2)]
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
