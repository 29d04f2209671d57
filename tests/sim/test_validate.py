"""The validation machinery: rows mapped to their published deployment, error arithmetic, independence."""

import csv
import io

import pytest

from sim.validate import (
    PUBLISHED,
    Result,
    Row,
    _metric_2025,
    _preset,
    _row_2024,
    _row_2025,
    _setups,
    by_group,
    generation_ratios,
    read_held_out_moe,
    read_rows,
    relative_error,
    report,
    summarise,
    validate,
)

HEADER_2024 = ("model,instance,chips,cores_per_model_or_tp,parallelism,application,batch,seq_in,seq_out,dtype,metric,"
               "value,unit,sdk,source,model_as_published")
HEADER_2025 = "model,instance,tp,batch,input_len,output_len,dtype,metric,value,unit,sdk,source"


def _parse(header, line):
    return next(csv.DictReader(io.StringIO(f"{header}\n{line}\n")))


def _encoder(instance="inf2.xlarge", application="Real Time", metric="latency_ms_p50", value=1.0, batch=1, cores=2,
             model="bert-base", dtype="FP32 / autocast Matmult-BF16"):
    return _row_2024(_parse(HEADER_2024, f"{model},{instance},1,{cores},data-parallel,{application},{batch},128,,"
                                         f"{dtype},{metric},{value},,Neuron 2.26.0,test,{model}"))


def test_relative_error_and_summary_count_only_independent_rows():
    a, b = _encoder(value=1.0), _encoder(value=2.0)
    derived = _encoder(metric="throughput_per_s", value=4.0)  # a Real Time row's throughput follows its latency
    results = [Result(a, 1.1), Result(b, 1.0), Result(derived, 4.4), Result(_encoder(model="unet"), None, "no preset")]
    assert relative_error(1.2, 1.0) == pytest.approx(0.2)
    s = summarise(results)
    assert (s.compared, s.derived, s.skipped) == (2, 1, 1)
    assert s.median_abs_error == pytest.approx((0.1 + 0.5) / 2)
    groups = by_group(results)
    assert [(g.generation, g.metric, g.rows) for g in groups] == [("inf2", "latency_ms", 2)]
    assert "| inf2 | latency_ms | 2 | -20.0% | 30.0% |" in report(results)


def test_real_time_rows_compare_one_request_alone_and_batch_rows_every_copy_busy():
    rt = _encoder(value=1.0)
    assert rt.independent and rt.metric == "latency_ms"
    assert (rt.config.copies, rt.config.dtype, rt.config.autocast) == (2, "fp32", "matmult")  # the stated cores
    batch = _encoder(application="Batch", metric="throughput_per_s", value=2674.2, batch=8)
    assert batch.independent and batch.metric == "throughput" and batch.config.batch == 8
    batch_latency = _encoder(application="Batch", value=5.97, batch=8)
    assert not batch_latency.independent  # how many requests the benchmark queued is not stated
    # Inferentia1 rows say fp32 without an auto-cast: neuron-cc's default (all of it to BF16) applies
    inf1 = _encoder("inf1.xlarge", cores=4, dtype="fp32")
    assert (inf1.config.copies, inf1.config.autocast) == (4, None)


def test_a_neuronperf_page_runs_at_most_the_two_copies_its_script_asks_for_on_inferentia2_and_trainium1():
    # NeuronPerf knows only Inferentia1's sizes and assumes two NeuronCores elsewhere: a row stating
    # every core of an inf2.48xlarge (24) or a trn1.32xlarge (32) runs two copies; the other cores idle
    page = "aws-neuron-sdk:about-neuron/benchmarks/inf2/throughput_data_encoder.csv"
    line = (f"xlm-roberta-base,inf2.48xlarge,12,24,data-parallel,Batch,16,128,,FP32,throughput_per_s,51.1,,"
            f"Neuron 2.22.0,{page},xlm-roberta-base")
    assert _row_2024(_parse(HEADER_2024, line)).config.copies == 2
    assert _row_2024(_parse(HEADER_2024, line.replace(",24,", ",,"))).config.copies == 2  # none stated
    copies = {(r.model, r.instance, r.batch): r.config.copies for r in read_rows()
              if r.config is not None and r.config.mode == "inference"}
    assert copies[("xlm-roberta-base", "inf2.48xlarge", 16)] == 2
    assert copies[("xlm-roberta-base", "trn1.32xlarge", 8)] == 2
    assert copies[("resnet18", "inf2.xlarge", 8)] == 2  # the chip's own two cores
    assert copies[("bert-base", "inf1.xlarge", 8)] == 4  # Inferentia1's pages: the stated cores


def test_the_inferentia1_tensorflow_row_runs_as_the_tutorial_it_links():
    # the page says "BERT base"; its details and script say DistilBERT, a TensorFlow model loaded
    # once (replicated on up to four cores by default) and called from four threads
    rows = [r for r in read_rows() if r.instance == "inf1.6xlarge" and r.config is not None]
    assert {r.metric for r in rows} == {"latency_ms", "throughput"}
    for r in rows:
        assert (r.model, r.config.seq, r.config.batch, r.config.copies) == ("distilbert", 128, 16, 4)


def test_decoder_rows_are_tensor_parallel_with_the_compilers_attention_and_training_rows_accumulate():
    tpot = _row_2024(_parse(HEADER_2024, "llama-2-7b,trn1.32xlarge,16,32,tensor-parallel,Real Time,1,128,8064,"
                                         "FP16,tpot_ms_p50,6.7,,\"Neuron 2.18.0, Transformers NeuronX\",test,x"))
    cfg = tpot.config
    assert (cfg.mode, cfg.cores, cfg.new_tokens, cfg.attention) == ("decode", 32, 8064, "compiler")
    throughput = _row_2024(_parse(HEADER_2024, "llama-2-7b,trn1.32xlarge,16,32,tensor-parallel,Real Time,1,128,"
                                               "8064,FP16,throughput_per_s,161.7,,x,test,x"))
    assert not throughput.independent  # tokens per second = batch / time per token of the same run
    train = _row_2024(_parse(HEADER_2024, "bert-large,trn1.32xlarge,16,,training 32xNC DP; nodes=1; microbatch=16; "
                                          "global_batch=16384; optimizer=AdamW,training,16,128,,bf16,"
                                          "train_seq_per_s_cluster,3826.61,,x,test,x"))
    # 16384 sequences per update over 32 NeuronCores of 16: 32 micro-batches before each all-reduce
    assert (train.config.mode, train.config.batch, train.config.grad_accum, train.config.nodes) == (
        "training", 16, 32, 1)
    cluster = _row_2024(_parse(HEADER_2024, "bert-large,trn1.32xlarge,256,,training 32xNC DP x 16 nodes; nodes=16; "
                                            "microbatch=8; global_batch=1048576; optimizer=Lamb,training,8,128,,fp32,"
                                            "train_seq_per_s_cluster,32362.67,,Neuron 2.28.0,test,x"))
    # 16 instances of 32 cores at 8 sequences: 256 micro-batches an update; FP32 left uncast by Neuron 2.28's
    # compiler (--auto-cast defaults to none since 2.27), matmuls cast to BF16 by the default of older SDKs
    assert (cluster.config.nodes, cluster.config.grad_accum, cluster.config.dtype, cluster.config.autocast) == (
        16, 256, "fp32", "none")
    older = _row_2024(_parse(HEADER_2024, "bert-large,trn1.32xlarge,16,,training 32xNC DP; nodes=1,training,8,128,,"
                                          "fp32,train_seq_per_s_cluster,1,,Neuron 2.26.0,test,x"))
    assert older.config.autocast == "matmult"
    # PyTorch's BF16 autocast keeps the model in FP32 and multiplies in BF16
    autocast = _row_2024(_parse(HEADER_2024, "bert-large,trn1.32xlarge,16,,training 32xNC DP; nodes=1,training,16,"
                                             "128,,bf16 autocast + SR,train_seq_per_s_cluster,1,,x,test,x"))
    assert (autocast.config.dtype, autocast.config.autocast) == ("fp32", "matmult")
    # ... unless the row's NxD Training recipe states its own precision (mixed_precision: BF16)
    pp = _row_2024(_parse(HEADER_2024, "llama-3.1-70b,trn1.32xlarge,512,,training TP=32 DP=4 PP=8; nodes=32; "
                                       "microbatch=1; global_batch=1024,training,1,8192,,bf16 autocast + fp32 "
                                       "optimizer,train_seq_per_s_cluster,7.94,,x,test,x"))
    assert (pp.config.dtype, pp.config.autocast) == ("bf16", None)
    # 1024 sequences per update over 4 data-parallel pipelines of 8 stages at 1 sequence: 256 micro-batches;
    # the NxD Training recipe adds ZeRO-1, sequence parallelism, flash attention and selective recomputation
    c = pp.config
    assert (c.cores, c.pipeline, c.nodes, c.grad_accum, c.seq) == (32, 8, 32, 256, 8192)
    assert (c.zero1, c.sequence_parallel, c.attention, c.checkpoint_activations, c.checkpoint_granularity) == (
        True, True, "flash", True, "selective")
    other = _row_2024(_parse(HEADER_2024, "mistral-7b,trn1.32xlarge,64,,training TP=32 DP=2; nodes=2,training,1,"
                                          "8192,,bf16,train_seq_per_s_cluster,1,,x,test,x"))
    assert other.config is None and "without a recipe" in other.skip
    # Llama-3.1-8B's recipe (hf_llama3.1_8B_config.yaml) as the 70B's: 1024 sequences over 32 data-parallel
    # copies of 32 cores: 32 micro-batches an update
    small = _row_2024(_parse(HEADER_2024, "llama-3.1-8b,trn1.32xlarge,1024,,training TP=32 DP=32 PP=1 ZeRO-1; "
                                          "nodes=32; microbatch=1; global_batch=1024,training,1,8192,,bf16 autocast "
                                          "+ fp32 optimizer,train_seq_per_s_cluster,47.95,,x,test,x")).config
    assert (small.cores, small.pipeline, small.nodes, small.grad_accum, small.zero1, small.checkpoint_granularity) == (
        32, 1, 32, 32, True, "selective")


def test_serving_rows_follow_the_setup_their_source_states():
    line = ('llama-3.1-8b-instruct,"trn2 (TP=4, trn2.3xlarge inferred)",4,"32 compiled, 1 user","1500 (+-150)",'
            '250 (+-20),bf16,sync_itl_ms,22.14,ms,optimum-neuron,"huggingface/optimum-neuron@x:benchmark/vllm/'
            'single-instance/llama-3.1-8b-trn2/{.env,vllm-results.csv}"')
    row = _row_2025(_parse(HEADER_2025, line), _setups())
    cfg = row.config
    assert (row.instance, row.metric, row.independent) == ("trn2.3xlarge", "tpot_ms", True)
    assert (cfg.model, cfg.cores, cfg.batch, cfg.concurrency, cfg.max_seq, cfg.bucketing) == (
        "llama-3.1-8b", 4, 32, 1, 4096, False)
    spec = _row_2025(_parse(HEADER_2025, line.replace("llama-3.1-8b-instruct", '"llama-3.1-8b-instruct + EAGLE3 '
                                                      'draft (k=3, acceptance 74.1%)"')), _setups())
    assert spec.config is None and spec.skip == "no speculative setup for this source in setups-2025-2026.toml"
    assert cfg.mode == "decode" and cfg.seq_spread == 0  # one user alone
    # 128 users on the graph compiled for 32: a serving run of the row's users (guidellm 0.1.0
    # keeps 127 of them in flight) and stated spreads, with the 235 tokens a request its results
    # give (578.79 tok/s over 2.4603 req/s) and guidellm's 100 requests
    many = _row_2025(_parse(HEADER_2025, line.replace("sync_itl_ms", "throughput_output_tok_s")
                            .replace("1 user", "128 users")), _setups())
    c = many.config
    assert (many.metric, c.mode, c.batch, c.concurrency, c.seq_spread, c.new_tokens_spread) == (
        "output_tok_s", "serve", 32, 127, 150, 20)
    assert (c.new_tokens, c.requests, cfg.new_tokens, cfg.requests) == (235, 100, 250, None)


def test_speculative_rows_run_the_acceptance_their_source_states_or_stay_skipped():
    """vLLM Neuron's EAGLE3 tutorials print their acceptance per draft position (86.49, 72.47,
    63.46% for Llama-3.1-8B; 69.00% for gpt-oss-120b's one token), which their setups quote; NxD
    Inference's Qwen3-32B tutorial reports none, so its speculative rows are not simulated."""
    rows = read_rows()
    eagle = [r for r in rows if r.source.endswith("max-concurrency 2, 50 prompts)") and r.batch == 2]
    tpot = next(r for r in eagle if r.metric == "tpot_ms" and r.measured == 6.41)
    cfg = tpot.config
    assert (cfg.spec_method, cfg.spec_k, cfg.spec_acceptance, cfg.fused_speculation, cfg.draft) == (
        "eagle3", 3, (0.8649, 0.7247, 0.6346), False, None)
    assert (cfg.mode, cfg.concurrency, cfg.cores) == ("serve", 2, 8)  # as the baseline beside it
    gpt = next(r for r in rows if r.model == "gpt-oss-120b" and r.measured == 5.82)
    assert (gpt.config.spec_method, gpt.config.spec_k, gpt.config.spec_acceptance) == ("eagle3", 1, (0.69,))
    qwen = [r for r in rows if "sd-inference-tutorial.rst" in r.source and r.measured in (47.4, 5.64, 137.8)]
    assert len(qwen) == 3 and all(r.config is None and "states no acceptance rate" in r.skip for r in qwen)


def test_guidellm_0_1_keeps_one_request_fewer_in_flight_than_its_users():
    # chunked-prefill's config A: its report lists 100 throughput requests of 212.94 tokens on
    # average, at most 31 of the 32 users' in flight
    line = ('llama-3.1-8b-instruct,inf2.48xlarge,8,"32 compiled, 32 users","1500 (+-150, guidellm emulated)",'
            '250 (+-20),bf16,throughput_output_tok_s,426.21,tok/s,optimum-neuron vLLM (Mar 2026),'
            '"huggingface/optimum-neuron@213224e6:benchmark/vllm/chunked-prefill/{README.md,std-ods.csv} (x)"')
    busy = _row_2025(_parse(HEADER_2025, line), _setups()).config
    assert (busy.mode, busy.batch, busy.concurrency, busy.new_tokens, busy.requests) == ("serve", 32, 31, 213, 100)
    alone = _row_2025(_parse(HEADER_2025, line.replace("32 users", "1 user").replace(
        "throughput_output_tok_s", "sync_itl_ms")), _setups()).config
    assert (alone.mode, alone.concurrency, alone.new_tokens) == ("decode", 1, 250)
    # another tool's users are all in flight
    other = _row_2025(_parse(HEADER_2025, line.replace("optimum-neuron vLLM (Mar 2026)", "vLLM").replace(
        "huggingface/optimum-neuron@213224e6:benchmark/vllm/chunked-prefill/{README.md,std-ods.csv} (x)",
        "some/new/benchmark.csv")), _setups()).config
    assert (other.concurrency, other.new_tokens, other.requests) == (32, 250, None)


def test_a_serving_row_from_a_source_without_a_setup_runs_what_the_row_states():
    line = ('qwen3-8b,"trn2.3xlarge (LNC=2 default)",4,"8 compiled, 1 user","1000 (+-100)",200,bf16,sync_ttft_ms,'
            '90,ms,optimum-neuron vLLM (2026),some/new/benchmark.csv')
    cfg = _row_2025(_parse(HEADER_2025, line), _setups()).config
    # 1,000 + 200 positions and three spreads of 100 need 1,500: graphs compiled for 2,048, one graph
    # of that length as optimum-neuron compiles it, one user alone
    assert (cfg.instance, cfg.cores, cfg.batch, cfg.concurrency, cfg.mode) == ("trn2.3xlarge", 4, 8, 1, "decode")
    assert (cfg.seq, cfg.new_tokens, cfg.max_seq, cfg.bucketing, cfg.prefill_chunk) == (1000, 200, 2048, False, 0)
    served = _row_2025(_parse(HEADER_2025, line.replace("1 user", "16 users").replace("optimum-neuron", "vLLM")
                              .replace("sync_ttft_ms", "median_ttft_ms")), _setups()).config
    assert (served.mode, served.concurrency, served.bucketing) == ("serve", 16, True)  # NxD Inference's buckets
    nowhere = _row_2025(_parse(HEADER_2025, line.replace('"trn2.3xlarge (LNC=2 default)"', "a cluster")), _setups())
    assert nowhere.config is None and "no instance named" in nowhere.skip


@pytest.mark.parametrize("name, metric, factor", [
    ("median_tpot_ms", "tpot_ms", 1.0), ("mean_itl_ms", "tpot_ms", 1.0), ("ttft_s_p99", "ttft_ms", 1e3),
    ("median_e2e_latency_ms", "e2e_s", 1e-3), ("request_output_throughput_p50", "request_tok_s", 1.0),
    ("output_throughput_tok_s", "output_tok_s", 1.0),
])
def test_a_serving_figure_is_read_by_what_its_name_says_in_the_unit_it_names(name, metric, factor):
    assert _metric_2025(name) == (metric, factor)
    assert _metric_2025("gpu_memory_gib") is None  # not a figure the simulator produces: not read


def test_generation_ratio_compares_measured_and_simulated_ratios():
    a = Result(_encoder("inf2.xlarge", value=2.0), 3.0)
    b = Result(_encoder("trn1.2xlarge", value=1.0), 1.0)
    same_gen = Result(_encoder("inf2.48xlarge", value=2.0), 2.0)
    pairs = generation_ratios([a, b, same_gen])
    assert len(pairs) == 2  # inf2 rows pair with trn1, not with each other
    (x, y, err) = next(p for p in pairs if p[0] is a)
    assert err == pytest.approx((3.0 / 1.0) / (2.0 / 1.0) - 1)


def test_validation_runs_on_a_small_subset_and_reports_it():
    rows = [r for r in read_rows(PUBLISHED, None) if r.model == "bert-base" and r.instance == "inf2.xlarge"]
    results = validate(rows)
    assert len(results) == len(rows) >= 2
    assert all(r.simulated is not None and r.simulated > 0 for r in results)
    text = report(results)
    assert text.count("| bert-base | inf2.xlarge |") == len(rows)
    assert "Median absolute error" in text
    # one instance: no workload measured on two generations, said so rather than as "nan%"
    assert text.endswith("Generation ratios: none (no workload measured on two generations).")


@pytest.mark.parametrize("published, preset", [
    ("bert-large-uncased", "bert-large"), ("google/electra-base-discriminator", "electra-base"),
    ("Llama-3-70B", "llama-3-70b"), ("Meta-Llama-3-8B", "llama-3-8b"), ("Mistral-7B-Instruct-v0.2", "mistral-7b"),
    ("CodeLlama-13b-hf", "codellama-13b"), ("albert-base-v2", "albert-base"), ("distilbert-base", "distilbert"),
    ("openai/clip-vit-large-patch14", "clip-vit-large-patch14"),
    ("deepmind/vision-perceiver-conv", "deepmind/vision-perceiver-conv"),  # no preset: kept, and skipped by name
])
def test_a_published_model_name_runs_as_its_preset(published, preset):
    assert _preset(published) == preset


def test_an_instance_is_read_as_a_page_writes_it():
    assert _encoder(instance="Inf2.48xlarge").instance == "inf2.48xlarge"
    assert _encoder(instance="trn1.32xlarge/trn1n.32xlarge").config.instance == "trn1.32xlarge"


def test_a_decoder_row_with_weights_stored_in_int8_runs_them_so():
    line = ("Llama-3-8B,inf2.48xlarge,12,24,tensor-parallel,Real Time,1,128,3968,\"FP16, autocast Matmult-BF16, "
            "weights {}\",tpot_ms_p50,6.42,,\"Neuron 2.18.1, Transformers NeuronX\",test,Llama-3-8B")
    int8 = _row_2024(_parse(HEADER_2024, line.format("int8"))).config
    bf16 = _row_2024(_parse(HEADER_2024, line.format("bf16"))).config
    assert (int8.model, int8.quant, bf16.quant) == ("llama-3-8b", "int8-weights", None)


def test_a_transformers_neuronx_row_converts_kv_heads_the_cores_do_not_divide_to_one_per_query_head():
    # transformers-neuronx falls back to GQA.REPLICATED_HEADS whenever the tensor-parallel degree
    # does not divide the KV heads (Meta-Llama-3-8B's sample notebook asks for it outright)
    line = ("Mistral-7B-Instruct-v0.2,inf2.48xlarge,12,24,tensor-parallel,Real Time,1,128,3968,\"FP16, autocast "
            "Matmult-BF16, weights bf16\",tpot_ms_p50,6.86,,\"{}\",test,Mistral-7B-Instruct-v0.2")
    tnx = _row_2024(_parse(HEADER_2024, line.format("Neuron 2.18.0, Transformers NeuronX"))).config
    nxdi = _row_2024(_parse(HEADER_2024, line.format("Neuron 2.21.0, NxD Inference"))).config
    assert (tnx.gqa, nxdi.gqa) == ("convert-to-mha", "replicate-to-tp-degree")


def test_an_encoder_decoder_row_generates_as_the_script_it_links_states():
    # the encoder-decoder pages' T5 rows link the NxD T5 tutorial: 4 beams, max_length 128, the
    # prompt padded to it, transformers' attention; its per-token latency is the whole generate
    # call over the tokens it returned, and its tokens a second that call's (not a point of its own)
    source = "aws-neuron-sdk:about-neuron/benchmarks/inf2/latency_data_encoder_decoder.csv"
    line = ("t5-3b,inf2.24xlarge,,8,tensor-parallel,Real Time,1,128,84,FP32 / autocast Matmult-BF16,{},{},,"
            f"\"Neuron 2.18.0, NeuronX Distributed\",{source},t5-3b")
    per_token = _row_2024(_parse(HEADER_2024, line.format("per_token_ms_p50", 9.25)))
    c = per_token.config
    assert (per_token.metric, per_token.independent) == ("per_token_ms", True)
    assert (c.mode, c.cores, c.beams, c.max_seq, c.attention, c.seq, c.new_tokens, c.dtype, c.autocast) == (
        "decode", 8, 4, 128, "compiler", 128, 84, "fp32", "matmult")
    throughput = _row_2024(_parse(HEADER_2024, line.format("throughput_per_s", 108.18)))
    assert (throughput.metric, throughput.independent) == ("request_tok_s", False)
    (latency,), (rate,) = validate([per_token]), validate([throughput])
    assert rate.simulated == pytest.approx(1e3 / latency.simulated)  # 84 tokens over the same call


def test_unsupported_models_are_reported_as_skipped():
    results = validate([_encoder(model="yolo-v4")])
    assert results[0].simulated is None and "no preset" in results[0].skipped
    line = "bert-base,inf1.6xlarge,4,,pipeline,Real Time,1,128,,fp32,latency_ms_p50,5.9,,x,test,x"
    pipeline = validate([_row_2024(_parse(HEADER_2024, line))])
    assert pipeline[0].simulated is None and "NeuronCore Pipeline" in pipeline[0].skipped


def test_every_published_row_is_read_and_has_a_setup_or_a_reason():
    rows = read_rows()
    # every row of both tables (and the ten tutorial rows and optimum-neuron's eight CPU-sampling rows added
    # to the second)
    assert len(rows) == 292 + 26 + 10 + 8
    assert all((r.config is None) == bool(r.skip) for r in rows)
    assert all(isinstance(r, Row) for r in rows)
    assert {r.generation for r in rows if r.config} >= {"inf1", "inf2", "trn1", "trn2"}


def test_a_serving_runs_output_throughput_beside_its_own_ttft_and_tpot_is_not_a_point_of_its_own():
    # vLLM Neuron's Llama-3.1-8B baseline: two users, each waiting for its last request, publish
    # TTFT, TPOT and output throughput of one run; optimum-neuron's 128-user throughput has no
    # TTFT or TPOT of its own users (those are of one user) and stays a point (guidellm 0.1.0 keeps
    # one request fewer than its users in flight)
    throughput = {(r.instance, r.config.concurrency if r.config else None): r.independent
                  for r in read_rows() if r.metric == "output_tok_s" and r.model == "llama-3.1-8b"}
    assert throughput[("trn2.48xlarge", 2)] is False
    assert throughput[("trn2.3xlarge", 127)] is True
    assert throughput[("inf2.48xlarge", 31)] is True


def test_a_figure_published_on_two_pages_counts_once():
    # Llama-2-70B at batch 1 on inf2.48xlarge: the latency and the throughput page give the same
    # 76.60 ms time to first token for 128 + 128 tokens, one measurement
    rows = [r for r in read_rows() if (r.model, r.instance, r.metric, r.seq) == ("llama-2-70b", "inf2.48xlarge",
                                                                                   "ttft_ms", "128/128")]
    assert [r.measured for r in rows] == [76.6, 76.6]
    assert [r.duplicate for r in rows] == [False, True]
    results = [Result(r, 80.0) for r in rows]
    assert [r.counted for r in results] == [True, False]
    assert summarise(results).duplicates == 1


def test_the_mixture_of_experts_rows_nothing_is_fitted_on_run_the_deployments_their_sources_state():
    rows = read_held_out_moe()
    assert len(rows) == 14 and all(r.config is not None and r.independent for r in rows)
    runs = {(r.model, r.instance, r.config.cores, r.config.batch, r.config.concurrency, r.config.max_seq,
             r.config.bucketing, r.config.seq, r.config.new_tokens) for r in rows}
    assert runs == {
        ("qwen3-30b-a3b", "trn2.3xlarge", 4, 16, 1, 4096, False, 1500, 250),  # the .env files' sizes, one user
        ("qwen3-30b-a3b", "trn1.32xlarge", 32, 8, 1, 4096, False, 1500, 250),
        ("qwen3-235b-a22b", "trn2.48xlarge", 64, 4, 1, 4096, False, 1500, 250),
        ("llama-4-scout", "trn2.48xlarge", 64, 32, 1, 4096, False, 1500, 250),
        ("llama-4-scout", "trn1.32xlarge", 32, 8, 1, 4096, False, 1500, 250),
        ("llama-4-maverick", "trn2.48xlarge", 64, 8, 1, 4096, False, 1500, 250),
        ("deepseek-v3", "trn2.48xlarge", 64, 1, 1, 512, False, 256, 256),  # seq_len 512, no bucketing
    }
    assert {r.metric for r in rows} == {"ttft_ms", "tpot_ms"} and all(r.config.mode == "decode" for r in rows)
    # Qwen3-MoE in optimum-neuron and DeepSeek-V3's contrib model compile at -O1, Llama 4 at the default
    assert {r.model: r.config.optlevel for r in rows} == {"qwen3-30b-a3b": 1, "qwen3-235b-a22b": 1, "deepseek-v3": 1,
                                                           "llama-4-scout": 2, "llama-4-maverick": 2}
    calibration = {(r.model, r.instance, r.config) for r in read_rows() if r.config is not None}
    assert not calibration & {(r.model, r.instance, r.config) for r in rows}
