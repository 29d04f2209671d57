"""Training over several instances: data parallel over EFA, ZeRO-1, activation checkpointing."""

import numpy as np
import pytest

from sim.errors import ConfigError, DoesNotFitError
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model


def _train(model="bert-large", instance="trn1.32xlarge", **kw):
    kw = {"batch": 16, "grad_accum": 4, **kw}
    return simulate(RunConfig(model=model, instance=instance, mode="training", **kw))


def test_scaling_efficiency_falls_as_instances_are_added_at_a_fixed_batch_per_instance():
    runs = {n: compute_metrics(_train(nodes=n)) for n in (1, 2, 4, 16)}
    assert runs[1].scaling_efficiency is None  # nothing to compare one instance with
    eff = [runs[n].scaling_efficiency for n in (2, 4, 16)]
    assert 1 > eff[0] > eff[1] > eff[2] > 0.5
    # every instance adds its 32 copies x 16 x 4 samples a step
    for n, met in runs.items():
        assert met.throughput_per_s * met.latency_under_load_s == pytest.approx(n * 32 * 16 * 4)
    assert runs[16].throughput_per_s > 8 * runs[1].throughput_per_s


def test_the_step_pays_the_gradient_all_reduce_over_efa_where_backward_cannot_hide_it():
    """bert-large's 335 M FP32 gradients between 4 trn1.32xlarge (800 Gbps each): each instance
    sends 2 x 3/4 of 1.34 GB over EFA, about 20 ms, on top of the all-reduce inside the instance."""
    one, four = _train(), _train(nodes=4)
    m1, m4 = compute_metrics(one), compute_metrics(four)
    params = sum(build_program(get_model("bert-large"), Phase(16, 128, 128, training=True), 2).params_per_layer())
    buckets = four.op_names.count("grad_allreduce")
    assert 4 * params / buckets >= 50 * 2**20  # 50 MiB buckets (the last may be smaller)
    # each bucket: 2 recursive-halving steps of 15 us each way, and 2 x 3/4 of its bytes over EFA
    efa = 2 * 3 / 4 * 4 * params / (800e9 / 8)
    assert m4.gradient_comm_s - m1.gradient_comm_s == pytest.approx(efa + buckets * 2 * 2 * 15e-6, rel=1e-6)
    # the collectives that outlast the backward pass stretch the step by what they leave exposed
    assert m4.latency_under_load_s - m1.latency_under_load_s == pytest.approx(
        m4.exposed_comm_s - m1.exposed_comm_s, rel=0.05)
    assert 0 < m4.exposed_comm_s < m4.gradient_comm_s


def test_trainium2_steps_faster_than_trainium1_on_the_same_cluster():
    trn1 = compute_metrics(_train(nodes=4))
    trn2 = compute_metrics(_train(instance="trn2.48xlarge", nodes=4))
    # a trn2.48xlarge step runs 64 logical cores' copies against trn1's 32: compare time per sample per instance
    assert trn2.throughput_per_s > 2 * trn1.throughput_per_s


def test_zero1_reduce_scatters_gradients_updates_a_share_and_gathers_the_weights():
    plain, zero = _train(nodes=2), _train(nodes=2, zero1=True)
    names = np.array(zero.op_names)
    assert "grad_reducescatter" in names and "param_allgather" in names and "grad_allreduce" not in names
    # each of the 64 ranks updates 1/64 of the parameters: AdamW's FLOPs fall 64-fold
    adam = [sum(f for f, n in zip(t.events["flops"], np.array(t.op_names)[t.events["op"]], strict=True)
                if n.startswith("adamw.")) for t in (plain, zero)]
    assert adam[1] == pytest.approx(adam[0] / 64, rel=0.01)
    # a reduce-scatter moves half an all-reduce's bytes; the weights come back in BF16, half again
    m_plain, m_zero = compute_metrics(plain), compute_metrics(zero)
    assert m_zero.gradient_comm_s < m_plain.gradient_comm_s


def test_zero1_fits_a_model_whose_optimizer_state_does_not_fit_whole():
    """Llama-3-8B over 8 trn1 cores: 8.03 B parameters x 16 bytes (weights, gradients, FP32
    master and Adam moments) need 128 GB against 8 x 16 GB; with the 12 bytes of optimizer state
    spread over 4 data-parallel copies, 8 B x (4 + 3) = 56 GB fit."""
    kw = dict(model="llama-3-8b", instance="trn1.32xlarge", cores=8, batch=1, seq=512, grad_accum=1)
    with pytest.raises(DoesNotFitError, match="does not fit on trn1.32xlarge with --cores 8"):
        simulate(RunConfig(mode="training", **kw))
    trace = simulate(RunConfig(mode="training", zero1=True, **kw))
    assert trace.meta["data_parallel"] == 4 and trace.meta["zero1"]


def test_activation_checkpointing_recomputes_the_forward_pass():
    """Forward, recomputed forward and backward (twice a forward): four forwards' FLOPs instead of three."""
    plain = _train(model="bert-base", instance="trn1.2xlarge", grad_accum=1)
    ckpt = _train(model="bert-base", instance="trn1.2xlarge", grad_accum=1, checkpoint_activations=True)
    assert compute_metrics(ckpt).flops / compute_metrics(plain).flops == pytest.approx(4 / 3, rel=0.02)
    # the activations a copy keeps for the backward pass shrink to the layers' inputs and one
    # layer's activations (besides 16 bytes of training state per parameter)
    params = sum(build_program(get_model("bert-base"), Phase(16, 128, 128, training=True), 2).params_per_layer())
    plain_act, ckpt_act = (t.meta["memory_per_core_bytes"] - 16 * params for t in (plain, ckpt))
    assert plain_act > 12 * 16 * 128 * 3072 * 2  # at least every layer's 4 x wide MLP activation in BF16
    assert 0 < ckpt_act < plain_act / 3


@pytest.mark.parametrize("kw, message", [
    ({"mode": "inference", "nodes": 2}, "--nodes is for training; inference mode has no training step"),
    ({"mode": "decode", "zero1": True}, "--zero 1 is for training"),
    ({"mode": "training", "nodes": 0}, "nodes must be a positive integer, got 0"),
    ({"mode": "training", "nodes": 2, "instance": "inf2.48xlarge"}, "inf2.48xlarge has no published EFA bandwidth"),
])
def test_scale_out_options_are_checked(kw, message):
    kw = {"model": "gpt2", "chip": None if "instance" in kw else "trn1", **kw}
    with pytest.raises(ConfigError, match=message):
        simulate(RunConfig(**kw))
