"""Quantized and sparse weights: how a run's weight matmuls store, read and multiply their weights.

What NxD Inference and the NKI library do, as their documents state:

- **weight-only** (``int8-weights``, ``fp8-weights``; NxD ``quantization_dtype`` int8 or f8e4m3
  with ``per_tensor_symmetric`` or ``per_channel_symmetric``): the weights sit in device memory
  at one byte and are dequantized (cast and scaled) to the model's data type on VectorE before
  the matmul, which runs as before;
- **FP8 matmuls** (``fp8``; the NKI MLP kernel's static and row-wise FP8, Trainium2's double-row
  FP8): weights in FP8, each matmul's input activations quantized to FP8 on VectorE (a static
  per-tensor scale: one pass; row-wise ``channel`` scales: a pass for each row's absolute maximum,
  one to scale), the array multiplying at its FP8 rate; a per-tensor dequantization scale folds
  into the PSUM evacuation, per-channel scales take a VectorE pass over the outputs;
- **MX formats** (``mxfp8``, ``mxfp4``; Trainium3): weights in OCP microscaling formats, every
  ``group`` of them along the contraction sharing one 8-bit scale; VectorE's QuantizeMX
  quantizes the input activations; the array multiplies and dequantizes in one instruction;
- **M:N structured sparsity** (``--sparsity 2:4``; Trainium2 and Trainium3): at most M of every N
  weights along the contraction are non-zero; they are stored compressed (the M values and an
  index of log2(N) bits each) and the array runs up to ``N / M`` times faster, up to its sparse
  peak, on its BF16 path (FP8 double-row and MX matmuls do not combine with sparsity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sim.errors import ConfigError
from sim.hardware.chip import Chip

QUANTS = ("int8-weights", "fp8-weights", "fp8", "mxfp8", "mxfp4")
SCALES = ("tensor", "channel")
FORMAT_BITS = {"int8": 8, "fp8": 8, "mxfp8": 8, "mxfp4": 4}  # bits of one stored value


@dataclass(frozen=True)
class Precision:
    """How one run's weight matmuls (the ops with weights) hold and multiply their weights."""

    weight_bits: float  # per weight in device memory, with its share of scales and sparse indices
    matmul_dtype: str  # what the array multiplies weights in: a dtype of the chip, or an MX format
    dequantize_weights: bool = False  # weight-only: a VectorE pass casting the weights before the matmul
    stored: str = ""  # weight-only: the dtype the weights are stored in (what that pass reads)
    input_passes: int = 0  # VectorE passes quantizing a weight matmul's input activations
    input_rate: float | None = None  # elements a cycle of those passes (None: VectorE's rate for the dtype)
    scale_outputs: bool = False  # per-channel dequantization scales applied in a VectorE pass over the outputs
    sparse_speedup: float = 1.0  # the array's speed-up on structurally sparse weights

    @property
    def extra_work(self) -> bool:
        return self.dequantize_weights or self.input_passes > 0 or self.scale_outputs


def dense(matmul_dtype: str, dtype_bytes: int) -> Precision:
    """Weights stored and multiplied in ``matmul_dtype`` (no quantization, no sparsity)."""
    return Precision(8.0 * dtype_bytes, matmul_dtype)


def parse_sparsity(text: str) -> tuple[int, int]:
    """``"2:4"`` -> (2, 4): at most M of every N weights non-zero."""
    parts = text.split(":") if isinstance(text, str) else []
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ConfigError(f"sparsity is M:N, at most M non-zero weights in every N (e.g. 2:4); got {text!r}")
    m, n = int(parts[0]), int(parts[1])
    if not 0 < m < n:
        raise ConfigError(f"sparsity M:N needs 0 < M < N; got {text}")
    return m, n


def precision(chip: Chip, base: Precision, quant: str | None, scales: str, sparsity: str | None) -> Precision:
    """``base`` (the run's dtype) with ``quant`` and ``sparsity`` applied on ``chip``; raises
    :class:`ConfigError` for what the chip or the formats do not allow."""
    if scales not in SCALES:
        raise ConfigError(f"unknown quantization scales '{scales}': choose one of {', '.join(SCALES)}")
    if quant is not None and quant not in QUANTS:
        raise ConfigError(f"unknown quantization '{quant}': choose one of {', '.join(QUANTS)}")
    te = chip.tensor
    p = base
    if quant in ("int8-weights", "fp8-weights"):
        stored = quant.split("-")[0]
        if stored not in chip.vector.elems_per_cycle:
            readable = [q for q in ("int8-weights", "fp8-weights") if q.split("-")[0] in chip.vector.elems_per_cycle]
            raise ConfigError(f"{chip.name}'s engines do not read {stored}: its weights cannot be stored in it"
                              + (f" (choose --quant {' or '.join(readable)})" if readable else ""))
        p = Precision(FORMAT_BITS[stored], base.matmul_dtype, dequantize_weights=True, stored=stored)
    elif quant == "fp8":
        if "fp8" not in chip.dtypes or te.mx is not None:
            allowed = " (its array multiplies MXFP8 and MXFP4: --quant mxfp8 or mxfp4)" if te.mx else ""
            raise ConfigError(f"{chip.name} has no FP8 matmuls{allowed}")
        p = Precision(FORMAT_BITS["fp8"], "fp8", input_passes=2 if scales == "channel" else 1,
                      scale_outputs=scales == "channel")
    elif quant in ("mxfp8", "mxfp4"):
        if te.mx is None or quant not in te.rate:
            raise ConfigError(f"{chip.name} has no MX matmuls: {quant} is Trainium3's (choose --quant fp8 or "
                              "a weight-only format)")
        p = Precision(FORMAT_BITS[quant] + te.mx.scale_bits / te.mx.group, quant, input_passes=1,
                      input_rate=te.mx.quantize_elems_per_cycle)
    if sparsity is None:
        return p
    m, n = parse_sparsity(sparsity)
    if te.sparse is None:
        raise ConfigError(f"{chip.name} has no structured sparsity (Trainium2 and Trainium3 do)")
    if f"{m}:{n}" not in te.sparse.patterns:
        raise ConfigError(f"{chip.name} takes the sparsity patterns {', '.join(te.sparse.patterns)}; not {m}:{n}")
    if te.mx is not None and p.matmul_dtype in ("mxfp8", "mxfp4"):
        raise ConfigError("MX matmuls do not combine with structured sparsity (sparse matmuls run on the BF16 path)")
    # the sparse path runs at up to N/M times the BF16 rate; against the dtype's own dense rate
    sparse_rate = min(n / m, te.sparse.max_rate) * te.rate["bf16"]
    speedup = max(1.0, sparse_rate / te.rate[p.matmul_dtype])
    bits = (p.weight_bits + math.log2(n)) * m / n
    return replace(p, weight_bits=bits, sparse_speedup=speedup)
