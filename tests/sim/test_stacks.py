"""The serving stack is a setting: a server's handling of each request and sampling on the host
are events of the run's host track, paid only by the stacks that do them (sim/stacks.py)."""

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.hardware.chip import get_chip
from sim.host import HOST, HOST_SAMPLING, LOGIT_BYTES, REQUEST_HANDLING
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.stacks import STACKS, stacks
from sim.workloads import get_model

EFF = get_chip("inf2").efficiency
LLAMA = dict(model="llama-2-7b", instance="inf2.24xlarge", cores=8, seq=128, new_tokens=5)


def _host_events(trace, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The durations and bytes of the host track's events named ``name``."""
    ev = trace.events
    named = (np.asarray(trace.op_names, dtype=object)[ev["op"]] == name) & (ev["track"] == trace.track_index(HOST))
    return ev["dur_ns"][named], ev["bytes"][named]


def test_every_stack_says_whether_a_server_handles_requests_and_where_tokens_are_sampled():
    assert set(STACKS) == {"transformers-neuronx", "nxd-inference", "vllm", "optimum-neuron"}
    assert {k for k, s in stacks().items() if s.server} == {"vllm", "optimum-neuron"}
    assert {k for k, s in stacks().items() if s.sampling == "host"} == {"transformers-neuronx"}


def test_only_a_server_handles_the_request_before_its_prompt_is_encoded():
    ttft = {}
    for stack in ("vllm", "optimum-neuron", "nxd-inference", "transformers-neuronx"):
        trace = simulate(RunConfig(mode="decode", stack=stack, sampling="device", **LLAMA), max_events=100_000)
        durations, _ = _host_events(trace, REQUEST_HANDLING)
        assert durations.tolist() == ([EFF.server_request_s * 1e9] if stacks()[stack].server else [])
        ttft[stack] = compute_metrics(trace).time_to_first_token_s
    # the same device work under every stack: the server's handling is the whole difference
    assert ttft["vllm"] - ttft["nxd-inference"] == pytest.approx(EFF.server_request_s, rel=1e-9)
    assert ttft["transformers-neuronx"] == pytest.approx(ttft["nxd-inference"], rel=1e-9)


@pytest.mark.parametrize("batch", [1, 4])
def test_sampling_on_the_host_copies_every_steps_logits_back_after_it(batch):
    # Transformers NeuronX samples on the host: after the prompt's pass and each of the 4 token
    # steps, the compiled batch's logits (batch x 32,000 in fp32) come back at the host's sampling rate
    trace = simulate(RunConfig(mode="decode", stack="transformers-neuronx", batch=batch, **LLAMA), max_events=100_000)
    vocab = get_model("llama-2-7b").vocab
    assert vocab == 32_000
    durations, nbytes = _host_events(trace, HOST_SAMPLING)
    assert nbytes.tolist() == [batch * vocab * LOGIT_BYTES] * 5
    assert durations == pytest.approx(batch * vocab * LOGIT_BYTES / EFF.host_sampling_bytes_per_s * 1e9)
    device = simulate(RunConfig(mode="decode", stack="transformers-neuronx", sampling="device", batch=batch, **LLAMA))
    met, dev = compute_metrics(trace), compute_metrics(device)
    step = durations[0] * 1e-9
    assert met.per_token_s - dev.per_token_s == pytest.approx(step, rel=1e-6)  # each step waits for its sample
    assert met.time_to_first_token_s - dev.time_to_first_token_s == pytest.approx(step, rel=1e-6)
    assert not _host_events(device, HOST_SAMPLING)[0].size


def test_a_server_sampling_on_the_host_samples_each_prompt_and_each_step_of_the_compiled_batch():
    cfg = RunConfig(mode="serve", stack="optimum-neuron", sampling="host", batch=4, requests=3, **LLAMA)
    trace = simulate(cfg, max_events=100_000)
    _, nbytes = _host_events(trace, HOST_SAMPLING)
    vocab = get_model("llama-2-7b").vocab
    prompts = (nbytes == vocab * LOGIT_BYTES).sum()  # a prompt encoded alone returns its own logits
    steps = (nbytes == 4 * vocab * LOGIT_BYTES).sum()  # a token step returns the compiled batch's
    assert prompts == 3 and steps > 0 and prompts + steps == nbytes.size
    assert (_host_events(trace, REQUEST_HANDLING)[0] == EFF.server_request_s * 1e9).sum() == 3


@pytest.mark.parametrize(("change", "message"), [
    (dict(stack="tgi"), "unknown serving stack 'tgi': choose one of transformers-neuronx, nxd-inference, vllm, "
                        "optimum-neuron"),
    (dict(sampling="gpu"), "unknown sampling 'gpu': choose one of device, host"),
    (dict(mode="inference", stack="vllm"), "the serving stack and its sampling are settings of decode and serve modes"),
    (dict(model="t5-3b", stack="vllm"), "--stack is not modelled for encoder-decoders such as t5-3b"),
])
def test_a_stack_the_simulator_does_not_know_is_refused_in_one_line(change, message):
    with pytest.raises(ConfigError) as err:
        simulate(RunConfig(**{**LLAMA, "mode": "decode", **change}))
    assert str(err.value) == message


@pytest.mark.parametrize(("mode", "kw"), [("decode", dict(batch=2)), ("serve", dict(batch=2, requests=4)),
                                           ("decode", dict(prefill_chunk=64, seq=200))])
def test_with_sampling_on_the_host_the_drawn_span_is_still_the_reported_time(mode, kw):
    from tests.sim.test_one_truth import _drawn_end, _drawn_first_token

    trace = simulate(RunConfig(**{**LLAMA, "mode": mode, "stack": "optimum-neuron", "sampling": "host", **kw}),
                     max_events=100_000)
    met, start = compute_metrics(trace), float(trace.events["start_ns"].min())
    assert _host_events(trace, HOST_SAMPLING)[0].size
    if mode == "serve":
        assert max(trace.meta["serving"]["finish_ns"]) == pytest.approx(_drawn_end(trace), abs=1.0)
        return
    assert _drawn_end(trace) - start == pytest.approx(met.latency_s * 1e9, abs=1.0)
    assert _drawn_first_token(trace) - start == pytest.approx(met.time_to_first_token_s * 1e9, abs=1.0)


def test_a_run_of_a_model_this_machine_cannot_read_has_no_class_and_no_error_beside_its_numbers(tmp_path):
    # a trace simulated elsewhere from a config.json path that does not exist here still opens: its
    # numbers carry no validation error rather than failing the header
    import json

    from sim.validated import headline_errors, headline_text, software_label
    from sim.workloads import get_model

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2,
                                  "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000}))
    trace = simulate(RunConfig(model=str(config), chip="inf2", mode="decode", seq=64, new_tokens=4), max_events=0)
    assert set(headline_errors(trace)) == {"time_to_first_token_ms", "per_token_ms"}
    config.unlink()
    get_model.cache_clear()  # as on another machine
    assert headline_errors(trace) == {} and headline_text(trace) == ""
    assert software_label(trace.run.software.config) == ""
