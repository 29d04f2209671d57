"""The command line: listings, simulate (table and JSON), and one-line errors with exit code 2."""

import json

import pytest

from neuronviz.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_lists_every_preset_with_its_size(capsys):
    code, out, _ = run_cli(capsys, "models")
    assert code == 0
    for name in ("bert-large", "electra-large", "llama-3-8b", "resnet50", "encoder-mlp"):
        assert name in out
    llama = next(line for line in out.splitlines() if line.startswith("llama-3-8b"))
    assert abs(float(llama.split()[3].rstrip("M")) - 8030.3) < 8  # model card: 8.03 B parameters
    mixtral = next(line for line in out.splitlines() if line.startswith("mixtral-8x7b"))
    assert "decoder MoE top-2/8" in mixtral and "46702.5M" in mixtral  # every expert counts: 46.7 B


def test_chips_lists_five_generations_with_prices(capsys):
    code, out, _ = run_cli(capsys, "chips")
    assert code == 0
    for key in ("inf1", "inf2", "trn1", "trn2", "trn3"):
        assert f"\n{key} " in out
    assert "inf2.48xlarge (12x, $12.98/h)" in out


def test_simulate_json_has_one_run_per_chip_in_order(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "bert-large", "--chips", "trn2,inf1,trn3",
                           "--batch", "2", "--seq", "128", "--json")
    assert code == 0
    runs = json.loads(out)["runs"]
    assert [r["chip"] for r in runs] == ["trn2", "inf1", "trn3"]
    keys = {"chip", "instance", "model", "mode", "batch", "seq", "dtype", "latency_ms", "throughput_per_s",
            "cost_per_million_usd", "tensor_active_percent", "vector_active_percent", "scalar_active_percent",
            "gpsimd_active_percent", "hbm_read_bytes", "hbm_write_bytes", "flops", "events"}
    for r in runs:
        assert keys <= set(r)
        assert "time_to_first_token_ms" not in r and "cost_per_step_usd" not in r  # figures of other modes
        assert (r["model"], r["batch"], r["seq"]) == ("bert-large", 2, 128)
        assert r["latency_ms"] > 0 and r["events"] > 0
    assert runs[0]["latency_ms"] < runs[1]["latency_ms"]
    assert runs[1]["gpsimd_active_percent"] == 0.0  # NeuronCore-v1 has no GpSimd engine


def test_simulate_decode_json_adds_token_times(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "gpt2", "--chips", "inf2", "--mode", "decode",
                           "--seq", "512", "--new-tokens", "8", "--json")
    assert code == 0
    run = json.loads(out)["runs"][0]
    assert run["time_to_first_token_ms"] > run["per_token_ms"] > 0


def test_simulate_serve_reports_what_serving_benchmarks_do(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "gpt2", "--chips", "inf2,trn2", "--mode", "serve",
                           "--batch", "4", "--concurrency", "6", "--requests", "12", "--seq", "256",
                           "--new-tokens", "16", "--seq-spread", "20", "--json")
    assert code == 0
    for run in json.loads(out)["runs"]:
        assert (run["mode"], run["concurrency"], run["requests"], run["output_tokens"]) == ("serve", 6, 12, 12 * 16)
        assert run["ttft_p99_ms"] >= run["ttft_p50_ms"] > 0 and run["tpot_p99_ms"] >= run["tpot_p50_ms"] > 0
        assert run["time_to_first_token_ms"] == run["ttft_p50_ms"] and run["per_token_ms"] == run["tpot_p50_ms"]
        assert run["output_tokens_per_s"] == pytest.approx(run["requests_per_s"] * 16)
    code, out, _ = run_cli(capsys, "simulate", "--model", "gpt2", "--chips", "trn2", "--mode", "serve",
                           "--rate", "50", "--requests", "8", "--seq", "128", "--new-tokens", "8")
    assert code == 0
    assert "8 requests arriving at 50/s on each copy" in out and "TTFT p50" in out and "requests/s per copy" in out


def test_instance_implies_the_chip(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "bert-base", "--instance", "inf2.48xlarge", "--json")
    assert code == 0
    run = json.loads(out)["runs"][0]
    assert (run["chip"], run["instance"], run["copies"]) == ("inf2", "inf2.48xlarge", 24)


def test_simulate_table_is_readable(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "distilbert", "--chips", "inf2,trn1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("distilbert inference batch 1 seq 128 bf16")
    assert "latency ms" in lines[1]
    assert lines[2].split()[0] == "inf2" and lines[3].split()[0] == "trn1"


@pytest.mark.parametrize("argv, message", [
    (["--model", "bert-huge", "--chips", "trn1"], "unknown model 'bert-huge'"),
    (["--model", "bert-base", "--chips", "tpu9"], "unknown chip 'tpu9'"),
    (["--model", "bert-base", "--chips", "trn1", "--seq", "4096"], "at most 512 positions"),
    (["--model", "bert-base", "--instance", "inf9.large"], "unknown instance 'inf9.large'"),
    (["--model", "llama-3-8b", "--instance", "inf2.xlarge", "--cores", "1", "--mode", "decode"], "does not fit"),
    (["--model", "bert-base", "--chips", "inf1", "--dtype", "fp8"], "does not run fp8"),
    (["--model", "bert-base", "--chips", "inf1", "--copies", "5"], "between 1 and 4 (inf1.xlarge holds 4 copies"),
    (["--model", "resnet50", "--chips", "trn2", "--cores", "2"], "the Neuron SDK has no tensor-parallel CNNs"),
    (["--model", "bert-base", "--chips", "trn1", "--grad-accum", "4"], "gradient accumulation is for training"),
    (["--model", "gpt2", "--chips", "trn2", "--rate", "2"], "a request rate (and its seed) is for serve mode"),
    (["--model", "gpt2", "--chips", "trn2", "--mode", "decode", "--seq", "600", "--context-encoding-buckets", "256",
      "512"], "a prompt of 600 tokens fits no context-encoding bucket: the largest is 512"),
    (["--model", "gpt2", "--chips", "trn2", "--mlp-kernel-enabled"], "NxD Inference's, for decode and serve modes"),
    (["--model", "gpt2", "--chips", "inf1", "--quant", "fp8-weights"],
     "Inferentia1's engines do not read fp8: its weights cannot be stored in it (choose --quant int8-weights)"),
    (["--model", "llama-3-8b", "--chips", "trn2", "--mode", "training", "--zero", "1", "--copies", "1"],
     "llama-3-8b with ZeRO-1 over 1 data-parallel copy needs 30.1 GiB on each core, more than the 10.8 GiB"),
    (["--model", "gpt2", "--chips", "trn2", "-o", "run.csv"], "run.csv: a trace file is named .nvtrace, or .json"),
    (["--model", "bert-base", "--chips", "trn2", "--mode", "decode"], "bert-base is an encoder model"),
    (["--model", "llama-3-8b", "--chips", "trn2", "--ep", "8"], "llama-3-8b is not a mixture-of-experts model"),
])
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, message):
    code, out, err = run_cli(capsys, "simulate", *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_copies_sets_how_many_copies_run_at_once(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "bert-large", "--chips", "inf1", "--copies", "1", "--json")
    alone = json.loads(out)["runs"][0]
    code_all, out_all, _ = run_cli(capsys, "simulate", "--model", "bert-large", "--chips", "inf1", "--json")
    loaded = json.loads(out_all)["runs"][0]
    assert code == code_all == 0
    assert (alone["copies"], loaded["copies"]) == (1, 4)
    # a request's latency is measured with its copy alone either way; four copies busy at once share
    # the chip's DDR (50 GiB/s, 95% sustained), which slows each of them but serves more requests
    assert alone["latency_ms"] == loaded["latency_ms"] == alone["latency_under_load_ms"]
    ddr_bound_ms = 4 * (loaded["hbm_read_bytes"] + loaded["hbm_write_bytes"]) / (50 * 2**30 * 0.95) * 1e3
    assert ddr_bound_ms <= loaded["latency_under_load_ms"] < 1.1 * ddr_bound_ms
    assert loaded["latency_under_load_ms"] > 1.5 * loaded["latency_ms"]
    assert loaded["throughput_per_s"] > alone["throughput_per_s"]


@pytest.mark.parametrize("flag, value", [("--batch", "-3"), ("--batch", "two"), ("--seq", "0"), ("--copies", "0"),
                                         ("--grad-accum", "0"), ("--nodes", "0"), ("--seed", "-1"),
                                         ("--seq-spread", "-1"), ("--context-encoding-buckets", "-512")])
def test_bad_numbers_exit_2(capsys, flag, value):
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--model", "bert-base", flag, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    # one line, without argparse's usage block, pointing at the help
    assert err.count("\n") == 1 and "whole number" in err and err.endswith("(see neuronviz simulate --help)\n")


@pytest.mark.parametrize("value, message", [("0.9,1.5", "must be rates from 0 to 1, got 0.9,1.5"),
                                            ("most", "'most' is not a rate, nor rates separated by commas")])
def test_bad_acceptance_exits_2(capsys, value, message):
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--model", "gpt2", "--spec-acceptance", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_acceptance_is_a_mean_rate_or_one_a_position_and_the_old_flag_still_reads(capsys, tmp_path):
    from sim.io import load_file

    common = ["--model", "llama-3.1-8b", "--chips", "trn2", "--cores", "8", "--mode", "decode", "--new-tokens", "8",
              "--spec-method", "eagle3", "--spec-k", "3"]
    runs = {}
    for name, flags in (("positions", ["--spec-acceptance", "0.8649,0.7247,0.6346"]), ("old", ["--acceptance", "0.7"]),
                        ("default", [])):
        path = tmp_path / f"{name}.nvtrace"
        code, _, _ = run_cli(capsys, "simulate", *common, *flags, "-o", str(path))
        assert code == 0
        (trace,) = load_file(str(path))
        runs[name] = trace.run.speculation
    assert runs["positions"].acceptance == (0.8649, 0.7247, 0.6346) and runs["positions"].stated
    assert runs["old"].tokens_per_step == pytest.approx(1 + 3 * 0.7) and runs["old"].stated
    assert runs["default"].acceptance == runs["positions"].acceptance and not runs["default"].stated


def test_a_default_chip_that_cannot_run_the_configuration_is_left_out_with_a_note(capsys):
    """Inferentia1 reads no FP8, so a KV cache in it runs on the other default chips; asked for
    by name, it is an error."""
    code, out, err = run_cli(capsys, "simulate", "--model", "gpt2", "--mode", "decode", "--new-tokens", "4",
                             "--kv-cache", "fp8", "--json")
    assert code == 0
    assert [r["chip"] for r in json.loads(out)["runs"]] == ["inf2", "trn1", "trn2"]
    assert err == "neuronviz: left out: Inferentia1's engines do not read fp8: its KV cache cannot be quantized\n"
    code, _, err = run_cli(capsys, "simulate", "--model", "gpt2", "--mode", "decode", "--chips", "inf1,trn2",
                           "--kv-cache", "fp8")
    assert code == 2 and "Inferentia1's engines do not read fp8" in err


def test_preset_names_are_read_in_any_case(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "DistilBERT", "--chips", "trn1", "--json")
    assert code == 0 and json.loads(out)["runs"][0]["model"] == "distilbert"


def test_grad_accum_makes_a_training_step_of_several_micro_batches(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "distilbert", "--chips", "trn1", "--mode", "training",
                           "--batch", "4", "--grad-accum", "8", "--json")
    assert code == 0
    run = json.loads(out)["runs"][0]
    assert (run["grad_accum"], run["copies"]) == (8, 2)
    # a step of 8 micro-batches of 4 sequences on each of the two copies
    assert run["throughput_per_s"] * run["latency_ms"] / 1e3 == pytest.approx(4 * 8 * 2)
    code, out, _ = run_cli(capsys, "simulate", "--model", "distilbert", "--chips", "trn1", "--mode", "training",
                           "--grad-accum", "8")
    assert code == 0 and out.splitlines()[0].endswith("x 8 micro-batches (latency = per step)")


def test_optlevel_is_in_the_json_and_the_table_title_and_a_bad_one_exits_2(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "distilbert", "--chips", "inf1,trn1", "-O", "1", "--json")
    assert code == 0
    assert [(r["chip"], r["optlevel"]) for r in json.loads(out)["runs"]] == [("inf1", None), ("trn1", 1)]
    code, out, _ = run_cli(capsys, "simulate", "--model", "distilbert", "--chips", "trn1", "--optlevel", "1")
    assert code == 0 and out.startswith("distilbert inference batch 1 seq 128 bf16 compiled -O1 (latency")
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--model", "distilbert", "--chips", "trn1", "--optlevel", "4"])
    assert exc.value.code == 2 and "invalid choice: 4" in capsys.readouterr().err


def test_checkpoint_activations_takes_a_granularity_full_by_default(capsys):
    runs = {}
    for flag in ((), ("--checkpoint-activations",), ("--checkpoint-activations", "selective")):
        code, out, _ = run_cli(capsys, "simulate", "--model", "distilbert", "--chips", "trn1", "--mode", "training",
                               *flag, "--json")
        assert code == 0
        run = json.loads(out)["runs"][0]
        runs[flag[-1] if flag else "none"] = run["flops"], run["recomputed_flops"]
    # recomputing the whole forward pass costs most; the MLPs and attention's core alone, less;
    # the model's FLOPs (what MFU counts) stay the same
    assert len({flops for flops, _ in runs.values()}) == 1
    assert runs["none"][1] == 0 < runs["selective"][1] < runs["--checkpoint-activations"][1]


def test_simulate_help_documents_grad_accum(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "--grad-accum N" in capsys.readouterr().out


def test_a_training_run_over_instances_reports_its_step_and_its_communication(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "bert-base", "--instance", "trn1.32xlarge", "--mode",
                           "training", "--batch", "8", "--grad-accum", "2", "--nodes", "2", "--zero", "1", "--json")
    r = json.loads(out)["runs"][0]
    assert code == 0 and (r["nodes"], r["data_parallel"], r["grad_accum"]) == (2, 64, 2)
    assert r["throughput_per_s"] * r["latency_under_load_ms"] / 1e3 == pytest.approx(64 * 8 * 2)  # samples a step
    assert r["tokens_per_s"] == pytest.approx(128 * r["throughput_per_s"])
    assert r["exposed_comm_ms"] < r["latency_ms"]
    assert 0 < r["exposed_comm_ms"] <= r["allreduce_ms"] and 0.5 < r["scaling_efficiency"] < 1
    # two instances' price over the step's samples: per million, and for one step
    from sim.hardware.instances import get_instance

    price = 2 * get_instance("trn1.32xlarge").price_usd_per_hour
    assert r["cost_per_million_usd"] == pytest.approx(price / (r["throughput_per_s"] * 3600) * 1e6)
    assert r["cost_per_step_usd"] == pytest.approx(price * r["latency_under_load_ms"] / 3.6e6)
    assert 0 < r["mfu_percent"] < 100 and 0 < r["memory_per_core_gib"] < 16


def test_a_pipelined_training_run_and_its_bad_options(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--model", "gpt2", "--instance", "trn1.32xlarge", "--mode", "training",
                           "--cores", "2", "--pipeline", "4", "--grad-accum", "8", "--sequence-parallel", "--attention",
                           "flash", "--json")
    r = json.loads(out)["runs"][0]
    assert code == 0 and r["data_parallel"] == 4  # 32 cores / (2 x 4)
    assert r["throughput_per_s"] * r["latency_under_load_ms"] / 1e3 == pytest.approx(4 * 8)
    code, _, err = run_cli(capsys, "simulate", "--model", "gpt2", "--chips", "trn1", "--pipeline", "2")
    assert code == 2 and "--pipeline is for training; inference mode has no training step" in err
    code, _, err = run_cli(capsys, "simulate", "--model", "gpt2", "--chips", "trn1", "--mode", "training",
                           "--pipeline", "13")
    assert code == 2 and "gpt2 has 12 blocks to split into 13 pipeline stages" in err


def test_head_sets_what_an_encoder_returns_and_its_host_copy_is_in_the_json(capsys):
    runs = {}
    for head in ("classifier", "mlm"):
        code, out, _ = run_cli(capsys, "simulate", "--model", "xlm-roberta-base", "--chips", "inf2", "--head", head,
                               "--json")
        assert code == 0
        runs[head] = json.loads(out)["runs"][0]
    # 128 tokens x 250,002 logits x 2 bytes (bf16) come back to the host: far more than two labels
    assert runs["mlm"]["host_ms"] > 100 * runs["classifier"]["host_ms"] > 0
    assert runs["mlm"]["latency_ms"] > runs["mlm"]["host_ms"]
    code, _, err = run_cli(capsys, "simulate", "--model", "gpt2", "--chips", "inf2", "--head", "none")
    assert code == 2 and "--head none is an encoder's inference output" in err


def test_validate_runs_the_rows_never_fitted_on_apart_and_writes_them_beside_the_calibration(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "validate", "--held-out", "--model", "resnet50")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("| resnet50 |")]
    assert len(rows) == 4 and all("inf2.xlarge" in line for line in rows)  # the held-out table's four figures
    code, _, err = run_cli(capsys, "validate", "--held-out", "--model", "bert-tiny")
    assert code == 2 and "no held-out rows match" in err
    doc = tmp_path / "accuracy.md"
    code, out, _ = run_cli(capsys, "validate", "--model", "bert-large", "-o", str(doc))
    text = doc.read_text(encoding="utf-8")
    assert code == 0 and "## Rows never fitted on" in text
    calibration, held = text.split("## Every row never fitted on")
    row = "| bert-large | inf2.xlarge | 1 | 128 | latency_ms_p50 | 2.69 |"  # Neuron 2.25's figure, held out
    assert row in held and row not in calibration
