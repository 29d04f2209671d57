"""The Run panel, built from the run options' declaration: every run the CLI can simulate, the
same trace; a pane's run edited and run again; errors naming the field the user set."""

from dataclasses import replace

import pytest
from PySide6.QtWidgets import QGroupBox

from neuronviz.cli import main
from sim import options
from sim.errors import ConfigError
from sim.io import load_file, save_file
from sim.run import RunConfig, simulate


def _set(panel, **values) -> None:
    """Set the panel's fields as a user would: type in a box, pick from a list, tick a switch."""
    for name, value in values.items():
        field = panel.fields[name]
        kind, w = field.option.kind, field.widget
        if kind == options.SWITCH:
            w.setChecked(value)
        elif kind == options.SET:
            for choice, box in field.boxes.items():
                box.setChecked(choice in value)
        elif kind in (options.INT, options.FLOAT):
            w.setValue(value)
        elif kind in (options.LENGTHS, options.RATES) or (kind == options.TEXT and not field.option.choices):
            w.setText(value)
        else:
            w.setCurrentText(str(value))


def test_the_panel_has_a_field_for_every_option_with_its_label_and_help(demo_window):
    panel = demo_window.run_panel
    assert set(panel.fields) == {o.name for o in options.OPTIONS}
    tip = panel.fields["grad_accum"].widget.toolTip()
    assert "N micro-batches of 'Batch' per step" in tip  # the help names fields as the panel labels them
    groups = [box.title() for box in panel.findChildren(QGroupBox)]
    assert groups == ["Training at scale", "Mixtures of experts", "Decode and serve"]


@pytest.mark.parametrize("flags, fields", [
    (["--model", "bert-base", "--instance", "trn1.32xlarge", "--mode", "training", "--batch", "4", "--nodes", "4",
      "--zero", "1", "--checkpoint-activations", "selective", "--grad-accum", "2", "--cores", "2",
      "--sequence-parallel"],
     dict(model="bert-base", instance="trn1.32xlarge", mode="training", batch=4, nodes=4, zero1=True,
          checkpoint="selective", grad_accum=2, cores=2, sequence_parallel=True)),
    (["--model", "gpt2", "--instance", "trn2.48xlarge", "--mode", "serve", "--batch", "2", "--concurrency", "3",
      "--requests", "6", "--seq", "128", "--seq-spread", "16", "--new-tokens", "8", "--rate", "20", "--seed", "3",
      "--prefill-chunk", "64", "--qkv-kernel-enabled", "--kv-cache", "fp8"],
     dict(model="gpt2", instance="trn2.48xlarge", mode="serve", batch=2, concurrency=3, requests=6, seq=128,
          seq_spread=16, new_tokens=8, rate=20.0, seed=3, prefill_chunk=64, nki_kernels=("qkv",), kv_cache="fp8")),
    (["--model", "llama-3.1-8b", "--instance", "trn2.48xlarge", "--mode", "decode", "--cores", "8", "--seq", "128",
      "--new-tokens", "8", "--spec-method", "eagle3", "--spec-k", "3", "--spec-acceptance", "0.865,0.725,0.635"],
     dict(model="llama-3.1-8b", instance="trn2.48xlarge", mode="decode", cores=8, seq=128, new_tokens=8,
          spec_method="eagle3", spec_k=3, spec_acceptance="0.865, 0.725, 0.635")),
], ids=["4-node-zero1-training", "serve", "eagle3"])
def test_the_panel_reproduces_the_clis_run_exactly(demo_window, tmp_path, capsys, flags, fields):
    path = tmp_path / "cli.nvtrace"
    assert main(["simulate", *flags, "-o", str(path)]) == 0
    (cli,) = load_file(str(path))
    panel = demo_window.run_panel
    _set(panel, **fields)
    (cfg,) = panel.configs()
    assert cli.run.software.config == replace(cfg, seq=cli.meta["config"]["seq"])
    ours = tmp_path / "panel.nvtrace"
    save_file(ours, [simulate(cfg)])
    assert ours.read_bytes() == path.read_bytes()


def test_edit_and_rerun_fills_every_field_from_the_panes_run(demo_window, tmp_path):
    from sim.io import save_file

    cfg = RunConfig(model="gpt2", instance="trn2.48xlarge", mode="decode", batch=2, seq=100, new_tokens=6, cores=2,
                    lnc=1, quant="fp8", attention="compiler", context_buckets=(128,), token_buckets=(128, 256),
                    nki_kernels=("mlp",), draft="gpt2", spec_k=3, spec_acceptance=(0.6, 0.5), concurrency=1,
                    optlevel=1)
    path = tmp_path / "one.nvtrace"
    save_file(str(path), [simulate(cfg, max_events=10_000)])
    assert demo_window.open_files([str(path)])
    demo_window.edit_and_rerun(0)
    panel = demo_window.run_panel
    assert demo_window.run_dock.isVisible()
    values = {name: field.value() for name, field in panel.fields.items()}
    assert values == options.values_of(replace(cfg, seq=100))
    (again,) = panel.configs()
    assert again == cfg
    panel.fields["cores"].widget.setValue(4)  # change one thing, run it again
    assert panel.configs()[0] == replace(cfg, cores=4)


def test_a_training_option_applies_in_training_only(demo_window):
    panel = demo_window.run_panel
    _set(panel, instance="trn1.32xlarge", grad_accum=32, nodes=2, pipeline=2)
    assert not panel.fields["grad_accum"].widget.isEnabled() and not panel.fields["zero1"].widget.isEnabled()
    (cfg,) = panel.configs()
    assert (cfg.grad_accum, cfg.nodes, cfg.pipeline) == (1, 1, 1)  # the values stay, an inference has no step
    _set(panel, mode="training")
    (cfg,) = panel.configs()
    assert (cfg.mode, cfg.grad_accum, cfg.nodes, cfg.pipeline) == ("training", 32, 2, 2)


def test_one_instance_or_the_ticked_chips(demo_window):
    panel = demo_window.run_panel
    _set(panel, model="llama-3-8b", mode="decode", instance="inf2.48xlarge", cores=8)
    assert not panel.chips["inf1"].isEnabled()
    (cfg,) = panel.configs()
    assert (cfg.instance, cfg.chip, cfg.cores, cfg.mode) == ("inf2.48xlarge", None, 8, "decode")
    panel.fields["instance"].widget.setCurrentIndex(0)  # default for each chip
    panel.fields["cores"].widget.setValue(0)  # SDK default
    assert panel.chips["inf1"].isEnabled()
    assert [(c.chip, c.cores) for c in panel.configs()] == [("inf1", None), ("inf2", None), ("trn1", None),
                                                            ("trn2", None)]


def test_the_generation_graphs_apply_to_generating_runs_and_buckets_not_to_one_graph(demo_window):
    panel = demo_window.run_panel
    _set(panel, mode="serve", context_buckets="512 1024", one_graph=True, prefill_chunk=1024)
    assert not panel.fields["context_buckets"].widget.isEnabled()
    assert {(c.bucketing, c.context_buckets, c.prefill_chunk) for c in panel.configs()} == {(False, None, 1024)}
    _set(panel, one_graph=False)
    assert {c.context_buckets for c in panel.configs()} == {(512, 1024)}
    _set(panel, attention="compiler", mode="inference")  # the values stay, but an inference compiles one graph
    assert {(c.context_buckets, c.prefill_chunk, c.bucketing, c.attention) for c in panel.configs()} == {
        (None, 0, True, "compiler")}


def test_the_panel_sets_up_a_published_tutorial_as_validation_runs_it(demo_window):
    from sim.validate import read_rows

    (row,) = [r for r in read_rows() if r.model == "llama-3.3-70b" and r.metric == "ttft_ms"]
    panel = demo_window.run_panel
    _set(panel, model="llama-3.3-70b", instance="trn2.48xlarge", mode="decode", cores=64, seq=10000,
         new_tokens=1500, max_seq=12800, context_buckets="2048, 4096 8192 12288", token_buckets="2048 4096 8192 12800",
         nki_kernels=("qkv", "mlp", "attention"), sequence_parallel=True, concurrency=row.config.concurrency,
         stack="vllm")  # the tutorial serves it with vllm serve
    (cfg,) = panel.configs()
    assert cfg == row.config


def test_errors_name_the_field_the_user_set(demo_window):
    panel = demo_window.run_panel
    _set(panel, mode="decode", token_buckets="2048 4k")
    with pytest.raises(ConfigError, match="Token buckets: positive whole numbers of positions, got '2048 4k'"):
        panel.configs()
    panel.start()  # nothing starts; the panel says why
    assert panel.status.text() == "Token buckets: positive whole numbers of positions, got '2048 4k'"
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()
    for text in ("0 2048", "-512", "2048 ²", "2e3"):
        _set(panel, token_buckets=text)
        with pytest.raises(ConfigError):
            panel.configs()
    _set(panel, token_buckets="", mode="training", pipeline=13, model="gpt2")
    with pytest.raises(ConfigError) as info:
        simulate(panel.configs()[0])
    assert str(info.value) == "gpt2 has 12 blocks to split into 13 pipeline stages"
    _set(panel, mode="inference", pipeline=1, quant="fp8-weights")
    for box in panel.chips.values():
        box.setChecked(box.text() == "inf1")
    with pytest.raises(ConfigError) as info:
        simulate(panel.configs()[0])
    said = options.in_terms_of(str(info.value), lambda o: f"'{o.label}'")
    assert said.endswith("(choose 'Quantization' int8-weights)")  # not the CLI's --quant


def test_simulating_adds_a_pane_without_blocking(demo_window, qtbot):
    panel = demo_window.run_panel
    _set(panel, model="distilbert")
    for key, box in panel.chips.items():
        box.setChecked(key == "trn3")
    ticks = []
    demo_window.playback.set_playing(True)
    demo_window.playback.timer.timeout.connect(lambda: ticks.append(1))
    with qtbot.waitSignal(demo_window.runner.sig_finished, timeout=20000):
        panel.start()
    demo_window.playback.set_playing(False)
    qtbot.waitUntil(lambda: len(demo_window.panes) == 5, timeout=5000)
    assert demo_window.panes[-1].run.trace.meta["chip"] == "trn3"
    assert demo_window.panes[-1].run.trace.meta["model"] == "distilbert"
