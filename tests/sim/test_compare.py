"""Measured beside simulated: a profile's framework layers and a simulation's meet by model block;
the figures Neuron Explorer gives, side by side."""

import pytest

from sim.analysis import analyse
from sim.compare import BLOCK, FIGURE, block_of, block_times, compare, simulation_config
from sim.errors import ConfigError
from sim.io import load_file, save_file
from sim.run import RunConfig, simulate
from tests.profiles import METADATA, instruction, write

T0 = METADATA["first_hw_timestamp"]


@pytest.mark.parametrize("name, block", [
    ("NeuronLlamaDecoderLayer[3]/function[2]/aten.add", "layer 3"),  # Explorer's framework_name example
    ("model.layers.3.self_attn.q_proj", "layer 3"), ("transformer.h.11.attn", "layer 11"), ("layer_1", "layer 1"),
    ("layer3.mlp", "layer 3"), ("prefill/layer3.attention", "layer 3"), ("decode ctx 256 #27/layer0.mlp", "layer 0"),
    ("micro-batch 2/layer1.mlp", "layer 1"), ("prefill/embedding", "embedding"), ("model.embed_tokens", "embedding"),
    ("lm_head", "head"), ("head", "head"), ("copy inputs to device", "copy"), ("dot.1", "dot"),
])
def test_a_layer_is_in_the_block_its_name_numbers(name, block):
    assert block_of(name) == block


def test_a_simulation_beside_itself_as_a_profile_reads_the_same(tmp_path):
    sim = simulate(RunConfig(model="bert-base", chip="trn1"))
    save_file(tmp_path / "p", [sim], "explorer")
    (profile,) = load_file(tmp_path / "p")
    rows = compare(profile, sim)
    figures = {r.name: r for r in rows if r.kind == FIGURE}
    for name in ("MFU", "HFU", "MBU", "Tensor", "span", "HBM read"):
        assert figures[name].ratio == pytest.approx(1.0, rel=1e-6), name
    blocks = {r.name: r for r in rows if r.kind == BLOCK}
    assert [f"layer {i}" for i in range(12)] == [n for n in blocks if n.startswith("layer")]
    for i in range(1, 11):  # a block's instructions are all in the profile (its DMA is not in a layer there)
        assert blocks[f"layer {i}"].ratio == pytest.approx(1.0, abs=0.01)


def test_block_times_sum_a_blocks_layers_and_their_executions():
    sim = simulate(RunConfig(model="gpt2", chip="inf2", mode="decode", seq=64, new_tokens=4))
    times = block_times(sim)
    layers = {s.name: s.time_ns for s in analyse(sim).layers}
    assert times["layer 5"] == pytest.approx(sum(t for n, t in layers.items() if block_of(n) == "layer 5"))
    assert times["layer 5"] > 0


def test_the_simulation_runs_on_the_profiles_instance_unless_told(tmp_path):
    d = tmp_path / "lnc2"
    write(d, "Metadata", [{**METADATA, "instance_type": "trn2.48xlarge", "num_physical_cores": 2,
                           "vnc_enabled": True}])
    write(d, "Instruction", [instruction("Tensor", "MATMUL", T0, T0 + 10)])
    (profile,) = load_file(d)
    cfg = simulation_config(profile, {"model": "bert-base"})
    assert (cfg.instance, cfg.lnc, cfg.model) == ("trn2.48xlarge", 2, "bert-base")
    assert simulation_config(profile, {"model": "bert-base", "instance": "trn2.3xlarge"}).instance == "trn2.3xlarge"
    write(d, "Metadata", [{**METADATA, "instance_type": None}])
    (unknown,) = load_file(d)
    with pytest.raises(ConfigError, match="the profile names no instance neuronviz has data of: set --instance"):
        simulation_config(unknown, {"model": "bert-base"})
