"""NxD Inference's NKI kernels for the QKV projection and the MLP (qkv_kernel_enabled,
mlp_kernel_enabled): one kernel each, without compiled code's per-instruction semaphore waits,
loading the weights in tiles of 16 rows a partition (nki-library's mlp_tkg: [2048, I] tiles)."""

import numpy as np
import pytest

from sim.analysis import layer_table
from sim.errors import ConfigError
from sim.run import RunConfig, simulate


def _decode(**kw):
    base = dict(model="llama-3.1-70b", instance="trn2.48xlarge", mode="decode", batch=1, seq=128, new_tokens=2,
                cores=64)
    return simulate(RunConfig(**{**base, **kw}))


def _wait_ns(trace, layer: str) -> float:
    """TensorE time ``layer`` spent waiting on semaphores before its instructions."""
    return next(s for s in layer_table(trace) if s.name == layer).tensor_wait_ns


def test_the_kernels_matmuls_wait_on_no_semaphores_where_compiled_code_does():
    compiled, qkv, both = _decode(), _decode(nki_kernels=("qkv",)), _decode(nki_kernels=("qkv", "mlp"))
    attention, mlp = "decode ctx 130/layer0.attention", "decode ctx 130/layer0.mlp"
    # the MLP kernel takes all of the block's matmuls: no wait is left
    assert _wait_ns(compiled, mlp) > 0 and _wait_ns(both, mlp) == 0
    # the QKV kernel takes the projection; the output projection is compiled code and still waits
    assert 0 < _wait_ns(qkv, attention) < _wait_ns(compiled, attention)
    assert _wait_ns(qkv, mlp) == _wait_ns(compiled, mlp)


def _weight_read(trace, layer: str, op: str) -> tuple[float, float]:
    """Seconds and bytes of ``op``'s reads on the first physical core."""
    track = next(i for i, t in enumerate(trace.tracks) if t.name == "NC0 dma_read")
    ops = [i for i, (name, la) in enumerate(zip(trace.op_names, trace.op_layer, strict=True))
           if name == op and trace.layer_names[la] == layer]
    ev = trace.events
    sel = np.isin(ev["op"], ops) & (ev["track"] == track)
    return float(ev["dur_ns"][sel].sum()) * 1e-9, float(ev["bytes"][sel].sum())


def test_the_mlp_kernel_streams_its_weights_in_runs_the_dma_engines_take_at_full_rate():
    # Llama-3.1-70B over 64 logical cores of Trainium2 (LNC=2): a physical core holds 28672 / 64 / 2
    # = 224 gate and 224 up columns of each of the 8192 hidden rows, 7,340,032 bytes in BF16
    layer = "decode ctx 130/layer0.mlp"
    seconds, nbytes = _weight_read(_decode(), layer, "gate_up")
    k_seconds, k_bytes = _weight_read(_decode(nki_kernels=("mlp",)), layer, "gate_up")
    assert nbytes == k_bytes == 8192 * 448 * 2
    # compiled code: one 448-column row, 896 bytes, per descriptor; the packet rate carries 896 / 2560
    # of an engine's 23 GB/s (16 engines a core), below the core's memory share
    engines = 16 * 23e9
    share = 2.9e12 / 4 * 0.95 / 2  # a stack's 95% of 725 GB/s for the two cores beside it
    assert nbytes / seconds == pytest.approx(engines * 896 / 2560, rel=1e-9)
    # the kernel: 16 rows a partition, 14,336 bytes in one run: the engines' full rate, capped by the share
    assert k_bytes / k_seconds == pytest.approx(min(engines, share), rel=1e-9)


def test_a_decoder_with_the_kernels_generates_faster():
    compiled, kernels = (_decode(new_tokens=8, nki_kernels=k).meta for k in ((), ("qkv", "mlp")))
    assert kernels["per_token_ns"] < compiled["per_token_ns"]


@pytest.mark.parametrize("kw, message", [
    (dict(nki_kernels=("rmsnorm",)), "unknown NKI kernel 'rmsnorm': choose from qkv, mlp, attention, moe"),
    (dict(nki_kernels="qkv"), "NKI kernels are a list of names"),
    (dict(mode="training", new_tokens=1, nki_kernels=("mlp",)), "for decode and serve modes"),
])
def test_kernels_nxd_inference_lacks_are_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        _decode(**kw)
