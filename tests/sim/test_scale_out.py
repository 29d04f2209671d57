"""Training over several instances: data parallel over EFA, ZeRO-1, activation checkpointing."""

import numpy as np
import pytest

from sim.errors import ConfigError, DoesNotFitError
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model
from sim.workloads.pipeline import heaviest_stage, stage_layers, stage_program
from sim.workloads.training import DataParallel, training_program


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
    # the collectives that outlast the backward pass stretch the step by about what they leave
    # exposed (less: on one instance too, their transfers held the DMA engines the backward pass
    # loads with) and by less than all the communication added
    longer, exposed = m4.latency_under_load_s - m1.latency_under_load_s, m4.exposed_comm_s - m1.exposed_comm_s
    assert 0.8 * exposed < longer < m4.gradient_comm_s - m1.gradient_comm_s
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


def test_activation_checkpointing_recomputes_the_forward_pass_that_gradients_read():
    """BERT-base at 128 tokens (per token, as in the test below): a step is a forward and a backward
    (twice a forward), 3 x 222.65 M FLOPs. Full checkpointing reruns each layer's forward, except
    what no gradient reads (torch-xla computes only what a step's results reach): the output
    projection and the MLP's down projection feed only their dropout, whose mask is drawn again
    without them, and the residual add (1.180 + 4.719 M a layer). The embedding and the heads are
    not checkpointed. It reruns 12 x (3.539 + 0.393 + 4.719) = 103.81 M."""
    plain = _train(model="bert-base", instance="trn1.2xlarge", grad_accum=1)
    ckpt = _train(model="bert-base", instance="trn1.2xlarge", grad_accum=1, checkpoint_activations=True)
    met, base = compute_metrics(ckpt), compute_metrics(plain)
    ratio = (met.flops + met.recomputed_flops) / base.flops
    assert ratio == pytest.approx((3 * 222.65 + 103.81) / (3 * 222.65), rel=0.002)
    # the model's FLOPs, what MFU counts, are not those run again: MFU falls with the throughput
    assert (met.flops, base.recomputed_flops) == (pytest.approx(base.flops, rel=1e-12), 0.0)
    assert met.mfu < base.mfu and met.throughput_per_s < base.throughput_per_s
    rerun = {n.split("/")[-1] for n in ckpt.op_names if n.endswith(".recompute")}
    assert {"qkv.recompute", "up.recompute", "dropout.recompute", "probs_dropout.recompute"} <= rerun
    assert not {"out_proj.recompute", "down.recompute", "mlm_transform.recompute", "mlm_decoder.recompute"} & rerun
    # the activations a copy keeps for the backward pass shrink to the layers' inputs and one
    # layer's activations (besides 16 bytes of training state per parameter)
    params = sum(build_program(get_model("bert-base"), Phase(16, 128, 128, training=True), 2).params_per_layer())
    plain_act, ckpt_act = (t.meta["memory_per_core_bytes"] - 16 * params for t in (plain, ckpt))
    assert plain_act > 12 * 16 * 128 * 3072 * 2  # at least every layer's 4 x wide MLP activation in BF16
    assert 0 < ckpt_act < plain_act / 3


def _recomputed(checkpoint):
    """The ops a Llama block's backward pass reruns, by block: sequence-parallel over 8 cores."""
    forward = build_program(get_model("llama-3-8b"), Phase(1, 2048, 2048, 8, training=True, flash=True,
                                                           sequence_parallel=True), 2)
    step = training_program(forward, forward.params_per_layer(), DataParallel(), checkpoint=checkpoint)
    names = {}
    for layer in step.layers:
        if layer.name in ("layer0.attention.backward", "layer0.mlp.backward"):
            ops = step.ops[layer.first_op:layer.first_op + layer.n_ops]
            names[layer.name.split(".")[1]] = [o.name.removesuffix(".recompute") for o in ops
                                               if o.name.endswith(".recompute")]
    return names


def test_a_checkpointed_mlp_reruns_what_its_gradients_read_and_no_more():
    # NxD's LlamaMLP module: the sequence-parallel all-gather, gate/up projection, SiLU x up, down
    # projection and reduce-scatter; the norm and residual add are the decoder layer's. Of the
    # module only what gradients read is rerun: the down projection's output (and the
    # reduce-scatter of it) feeds only the residual add
    assert _recomputed("selective") == {"attention": [], "mlp": ["mlp_allgather", "gate_up", "gate_mul"]}
    # full checkpointing reruns the whole block but for the output projection and what follows it
    # (and the KV-cache copy, which no gradient reads); the flash kernel's forward runs again, its
    # outputs feeding its backward kernel
    full = _recomputed("full")
    assert full["mlp"] == ["layernorm", "layernorm_transpose", "mlp_allgather", "gate_up", "gate_mul"]
    assert full["attention"][:5] == ["layernorm", "layernorm_transpose", "attn_allgather", "qkv", "rope"]
    assert "context" in full["attention"] and not {"kv_append", "out_proj", "attn_reducescatter",
                                                   "residual"} & set(full["attention"])


def test_a_checkpointed_op_that_no_gradient_reads_is_not_kept_either():
    """Selective checkpointing drops the MLP's activations: the up projection and SiLU x up are
    rerun, and the down projection, which no gradient reads, is neither rerun nor written out for
    the backward pass. Without checkpointing its output is kept: a row-parallel projection's partial
    sums over every token before the reduce-scatter, 2,048 x 4,096 elements."""
    forward = build_program(get_model("llama-3-8b"), Phase(1, 2048, 2048, 8, training=True, flash=True,
                                                           sequence_parallel=True), 2)
    layer = next(la for la in forward.layers if la.name == "layer0.mlp")
    down = next(i for i in range(layer.first_op, layer.first_op + layer.n_ops) if forward.ops[i].name == "down")
    written = {c: training_program(forward, forward.params_per_layer(), DataParallel(),
                                   checkpoint=c).ops[down].hbm_write_elems for c in ("", "selective")}
    assert written[""] - written["selective"] == 2048 * 4096
    assert written["selective"] == forward.ops[down].hbm_write_elems


def test_selective_checkpointing_recomputes_only_the_mlps_and_attentions_core():
    """BERT-base at 128 tokens, per token: a layer's forward is QKV 2 x 768 x 2304 = 3.539 M FLOPs,
    the output projection 1.180 M, the MLP 2 x 2 x 768 x 3072 = 9.437 M, scores and context 2 x
    2 x 128 x 768 = 0.393 M; the MLM head 2 x 768 x (768 + 30522) = 48.06 M. Forward 12 x 14.549 +
    48.06 = 222.65 M; a step 3 forwards. Selective checkpointing reruns the MLP's up projection
    (its down projection feeds only the residual add, which no gradient reads) and the attention's
    scores and context: 12 x (4.719 + 0.393) = 61.34 M."""
    kw = dict(model="bert-base", instance="trn1.2xlarge", grad_accum=1)
    plain = _train(**kw)
    selective = _train(checkpoint_activations=True, checkpoint_granularity="selective", **kw)
    full = _train(checkpoint_activations=True, **kw)
    met = compute_metrics(selective)
    ratio = (met.flops + met.recomputed_flops) / compute_metrics(plain).flops
    assert ratio == pytest.approx((3 * 222.65 + 61.34) / (3 * 222.65), rel=0.005)
    # it keeps the attention projections' outputs: more than full checkpointing keeps, less than none
    memory = [t.meta["memory_per_core_bytes"] for t in (full, selective, plain)]
    assert memory == sorted(memory) and memory[0] < memory[1] < memory[2]
    assert selective.meta["checkpoint_granularity"] == "selective"
    with pytest.raises(ConfigError, match="unknown activation checkpointing 'partial': choose one of full, selective"):
        _train(checkpoint_activations=True, checkpoint_granularity="partial", **kw)


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


def test_a_pipeline_splits_the_blocks_evenly_embeddings_first_heads_last():
    fwd = build_program(get_model("llama-3-8b"), Phase(1, 512, 512, 8, training=True), 2)
    stages = stage_layers(fwd, 3)  # 32 blocks over 3 stages: 11, 11 and 10
    names = [[fwd.layers[li].name for li in group] for group in stages]
    assert names[0][0] == "embedding" and names[2][-1] == "lm_head"
    assert [len({n.split(".")[0] for n in group if n.startswith("layer")}) for group in names] == [11, 11, 10]
    assert sum(len(g) for g in stages) == len(fwd.layers)
    # a middle stage receives the activation, a rank's 1/8 share of it, and sends its own on
    middle = stage_program(fwd, 3, 1, 512 * 4096 // 8)
    recv, send = middle.ops[0], middle.ops[-1]
    assert (recv.name, recv.collective, recv.elems) == ("recv_activation", "send", 512 * 4096 // 8)
    assert (send.name, send.collective, send.elems) == ("send_activation", "send", 512 * 4096 // 8)
    assert sum(op.params for op in middle.ops) == pytest.approx(11 * 218.1e6 / 8, rel=0.01)  # 11 blocks' share
    assert heaviest_stage(fwd, 3) == 2  # the 10 blocks and the 128k-word LM head outweigh 11 blocks
    with pytest.raises(ValueError, match="32 blocks cannot fill 33 pipeline stages"):
        stage_layers(fwd, 33)


def test_a_pipelined_step_runs_the_slowest_stage_and_waits_out_the_bubble():
    """1F1B over 8 micro-batches with 4 stages: the stage runs its 8 micro-batches and idles for
    3 more, the other stages' fill and drain."""
    kw = dict(model="llama-3-8b", instance="trn1.32xlarge", mode="training", batch=1, seq=1024, cores=8,
              grad_accum=8, sequence_parallel=True)
    trace = simulate(RunConfig(pipeline=4, **kw))
    phases = {p["name"]: p for p in trace.meta["phases"]}
    bubble = phases["pipeline bubble"]
    middle = phases["micro-batch 2"]
    per_micro = (middle["end_ns"] - middle["start_ns"]) / middle["repeat"]
    assert bubble["end_ns"] - bubble["start_ns"] == pytest.approx(3 * per_micro, rel=0.02)
    assert (trace.meta["pipeline"], trace.meta["data_parallel"]) == (4, 1)  # 8 cores x 4 stages fill 32
    # every stage's 8 micro-batches are one data-parallel copy's step: 8 sequences
    met = compute_metrics(trace)
    assert met.throughput_per_s * met.latency_under_load_s == pytest.approx(8)
    names = np.array(trace.op_names)
    assert "recv_activation" in names and "recv_activation.grad" in names  # no send: it is the last stage
    # without a pipeline each copy of 8 cores holds the whole model: it fits only with the optimizer
    # state sharded over the four copies, and still holds more per core than a stage of a pipeline that
    # keeps four micro-batches of activations in flight
    with pytest.raises(DoesNotFitError):
        simulate(RunConfig(**kw))
    flat = simulate(RunConfig(zero1=True, **kw))
    assert flat.meta["data_parallel"] == 4
    assert flat.meta["memory_per_core_bytes"] > trace.meta["memory_per_core_bytes"]


def test_sequence_parallelism_splits_the_tokens_between_the_blocks():
    """Llama-3-8B over 8 cores at 1024 tokens: each core normalises 128 tokens; the all-reduce
    after each block becomes a reduce-scatter, and the next block all-gathers the tokens."""
    spec = get_model("llama-3-8b")
    plain = build_program(spec, Phase(1, 1024, 1024, 8), 2)
    sp = build_program(spec, Phase(1, 1024, 1024, 8, sequence_parallel=True), 2)
    norms = [op.elems for op in sp.ops if op.name == "layernorm"]
    assert set(norms) == {128 * 4096} and len(norms) == 2 * 32
    kinds = {op.name: op.collective for op in sp.ops if op.kind.value == "collective"}
    assert kinds == {"attn_allgather": "all_gather", "attn_reducescatter": "reduce_scatter",
                     "mlp_allgather": "all_gather", "mlp_reducescatter": "reduce_scatter"}
    assert sum(op.flops for op in sp.ops if op.kind.value == "matmul") == sum(
        op.flops for op in plain.ops if op.kind.value == "matmul")
