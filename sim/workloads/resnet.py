"""ResNet graphs: convolutions lowered to matmuls over im2col windows (batch norm folded)."""

from __future__ import annotations

from sim.workloads.builder import ProgramBuilder
from sim.workloads.models import ModelSpec
from sim.workloads.transformer import Phase


def _conv(b: ProgramBuilder, name: str, batch: int, size: int, cin: int, cout: int, kernel: int,
          stride: int, act: str = "relu", deps: tuple[int, ...] | None = None) -> tuple[int, int]:
    """A conv as ``[batch*out*out, cin*k*k] @ [cin*k*k, cout]``; returns (op index, output size)."""
    out = -(-size // stride)
    idx = b.matmul(name, batch * out * out, cin * kernel * kernel, cout, act=act, deps=deps)
    return idx, out


def _block(b: ProgramBuilder, spec: ModelSpec, batch: int, size: int, cin: int, width: int,
           stride: int) -> int:
    entry = b.last
    if spec.bottleneck:
        mid = width // 4
        _, size_a = _conv(b, "conv1", batch, size, cin, mid, 1, 1)
        _, out = _conv(b, "conv2", batch, size_a, mid, mid, 3, stride)
        main, _ = _conv(b, "conv3", batch, out, mid, width, 1, 1, act="")
    else:
        _, out = _conv(b, "conv1", batch, size, cin, width, 3, stride)
        main, _ = _conv(b, "conv2", batch, out, width, width, 3, 1, act="")
    shortcut = entry
    if stride != 1 or cin != width:
        shortcut, _ = _conv(b, "shortcut", batch, size, cin, width, 1, stride, act="", deps=(entry,))
    b.vector("residual_relu", elems=batch * out * out * width, rows=batch * out * out,
             deps=(main, shortcut))
    return out


def resnet_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """Stem, four stages of residual blocks, global average pool and classifier."""
    batch, size = ph.batch, ph.seq
    with b.layer("stem", "conv"):
        b.copy_in("image", elems=batch * spec.channels * size * size, rows=batch * spec.channels)
        _, size = _conv(b, "conv", batch, size, spec.channels, spec.stem_width, 7, 2)
        size = -(-size // 2)
        b.vector("maxpool", elems=batch * size * size * spec.stem_width, rows=batch * size * size, passes=9)
    cin = spec.stem_width
    for stage, (width, depth) in enumerate(zip(spec.stage_widths, spec.stage_depths, strict=True)):
        for i in range(depth):
            stride = 2 if (i == 0 and stage > 0) else 1
            with b.layer(f"stage{stage + 1}.block{i}", "conv"):
                size = _block(b, spec, batch, size, cin, width, stride)
            cin = width
    with b.layer("head", "head"):
        b.vector("avgpool", elems=batch * size * size * cin, rows=batch * cin)
        b.matmul("fc", batch, cin, spec.num_labels)
