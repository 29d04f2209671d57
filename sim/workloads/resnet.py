"""ResNet, VGG and U-Net graphs: convolutions lowered to matmuls over im2col windows (batch norm folded).

A model copy may span several physical cores (``Phase.tp`` shards: the physical cores of one
logical core on Trn2/Trn3, LNC=2). The Neuron compiler then shards each op of the logical core
over them; here each shard computes its share of every convolution's output rows (batch x
output positions, the matmul M dimension) and reads the convolution's weights whole, and the
stem, pooling and residual work of those rows. The few halo rows a window needs from the
neighbouring shard are left out. The global average pool sums each shard's positions and adds
the partial sums across the shards; the classifier then splits its output classes. VGG's
classifier takes each image's whole feature map: the shards gather it, and each of its layers
splits its outputs (gathered again before the next).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.workloads.builder import ProgramBuilder, share
from sim.workloads.models import ModelSpec
from sim.workloads.transformer import Phase


@dataclass(frozen=True)
class _Rows:
    """A shard's share of the ``batch`` x positions rows of a feature map."""

    batch: int
    shards: int

    def of(self, size: int) -> int:
        """Rows of a ``size`` x ``size`` feature map this shard computes."""
        return share(self.batch * size * size, self.shards)

    def lines(self, size: int) -> int:
        """Image lines of a ``size`` x ``size`` feature map (``size`` an image) this shard computes:
        the units the compiler may tile a run of convolutions into (:class:`Op` ``items``), the
        few halo lines a window reads from the next tile left out as between shards."""
        return max(1, share(self.batch * size, self.shards))


def _conv(b: ProgramBuilder, name: str, rows: _Rows, size: int, cin: int, cout: int, kernel: int,
          stride: int, act: str = "relu", deps: tuple[int, ...] | None = None) -> tuple[int, int]:
    """A conv as ``[rows, cin*k*k] @ [cin*k*k, cout]`` for the shard's output rows, its weights
    read whole on every shard; returns (op index, output size)."""
    out = -(-size // stride)
    idx = b.matmul(name, rows.of(out), cin * kernel * kernel, cout, act=act, deps=deps,
                   weight_replicas=rows.shards, items=rows.lines(out))
    return idx, out


def _block(b: ProgramBuilder, spec: ModelSpec, rows: _Rows, size: int, cin: int, width: int, stride: int) -> int:
    entry = b.last
    if spec.bottleneck:
        mid = width // 4
        _, size_a = _conv(b, "conv1", rows, size, cin, mid, 1, 1)
        _, out = _conv(b, "conv2", rows, size_a, mid, mid, 3, stride)
        main, _ = _conv(b, "conv3", rows, out, mid, width, 1, 1, act="")
    else:
        _, out = _conv(b, "conv1", rows, size, cin, width, 3, stride)
        main, _ = _conv(b, "conv2", rows, out, width, width, 3, 1, act="")
    shortcut = entry
    if stride != 1 or cin != width:
        shortcut, _ = _conv(b, "shortcut", rows, size, cin, width, 1, stride, act="", deps=(entry,))
    b.vector("residual_relu", elems=rows.of(out) * width, rows=rows.of(out), deps=(main, shortcut),
             items=rows.lines(out))
    return out


def resnet_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """Stem, four stages of residual blocks, global average pool and classifier: one shard's part."""
    batch, size, rows = ph.batch, ph.seq, _Rows(ph.batch, ph.tp)
    with b.layer("stem", "conv"):
        b.copy_in("image", elems=share(batch * spec.channels * size * size, ph.tp),
                  rows=share(batch * spec.channels, ph.tp))
        _, size = _conv(b, "conv", rows, size, spec.channels, spec.stem_width, 7, 2)
        size = -(-size // 2)
        b.vector("maxpool", elems=rows.of(size) * spec.stem_width, rows=rows.of(size), passes=9,
                 items=rows.lines(size))
    cin = spec.stem_width
    for stage, (width, depth) in enumerate(zip(spec.stage_widths, spec.stage_depths, strict=True)):
        for i in range(depth):
            stride = 2 if (i == 0 and stage > 0) else 1
            with b.layer(f"stage{stage + 1}.block{i}", "conv"):
                size = _block(b, spec, rows, size, cin, width, stride)
            cin = width
    with b.layer("head", "head"):
        b.vector("avgpool", elems=rows.of(size) * cin, rows=batch * cin)
        b.collective("pool_allreduce", elems=batch * cin, ranks=ph.tp)
        b.matmul("fc", batch, cin, share(spec.num_labels, ph.tp))


VGG_POOLED = 7  # torchvision's VGG pools its last feature map to 7 x 7 (AdaptiveAvgPool2d) before the classifier


def vgg_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """3x3 convolutions (stride 1, padded) with 2x2 max pools between them, the feature map
    pooled to 7 x 7, and fully connected layers (ReLU between them): one shard's part."""
    batch, size, rows = ph.batch, ph.seq, _Rows(ph.batch, ph.tp)
    cin, block, conv = spec.channels, 1, 0
    for i, width in enumerate(spec.conv_plan):
        if width == 0:  # the max pool ends a block; it runs in the layer of the convolution before it
            continue
        conv += 1
        with b.layer(f"block{block}.conv{conv}", "conv"):
            if i == 0:
                b.copy_in("image", elems=share(batch * cin * size * size, ph.tp), rows=share(batch * cin, ph.tp))
            _conv(b, "conv", rows, size, cin, width, 3, 1)
            cin = width
            if i + 1 < len(spec.conv_plan) and spec.conv_plan[i + 1] == 0:
                size //= 2  # MaxPool2d(2, 2) floors
                b.vector("maxpool", elems=rows.of(size) * cin, rows=rows.of(size), passes=4, items=rows.lines(size))
                block, conv = block + 1, 0
    features = cin * VGG_POOLED * VGG_POOLED
    widths = (*spec.classifier_widths, spec.num_labels)
    with b.layer("classifier", "head"):
        if size != VGG_POOLED:  # each pooled value averages (or, from a smaller map, repeats) a window
            window = max(1, -(-size // VGG_POOLED)) ** 2
            b.vector("avgpool", elems=rows.of(VGG_POOLED) * cin, rows=rows.of(VGG_POOLED), passes=window)
        b.collective("features_gather", elems=batch * features, ranks=ph.tp, kind="all_gather")
        k = features
        for j, width in enumerate(widths):
            last = j == len(widths) - 1
            b.matmul(f"fc{j + 1}", batch, k, share(width, ph.tp), act="" if last else spec.act)
            if not last:
                b.collective(f"fc{j + 1}_gather", elems=batch * width, ranks=ph.tp, kind="all_gather")
            k = width


def _double_conv(b: ProgramBuilder, rows: _Rows, size: int, cin: int, cout: int, mid: int = 0) -> None:
    """milesial/Pytorch-UNet's DoubleConv: two 3x3 convolutions (padded, batch norm and ReLU after
    each), through ``mid`` channels (``cout`` unless given)."""
    _conv(b, "conv1", rows, size, cin, mid or cout, 3, 1)
    _conv(b, "conv2", rows, size, mid or cout, cout, 3, 1)


def unet_program(b: ProgramBuilder, spec: ModelSpec, ph: Phase) -> None:
    """milesial/Pytorch-UNet's UNet (unet/unet_model.py): one shard's part.

    Down: a double convolution at the image's size, then at each further level a 2x2 max pool and
    a double convolution widening to the level's channels (a bilinear U-Net's deepest level
    halves them). Up, level by level: the map doubles in size, by a 2x2 transposed convolution of
    stride 2 that halves its channels (each input position's channels make its four outputs: one
    matmul) or by bilinear upsampling, is padded to the size of the encoder's map of that level
    and joined with it, channels after channels (the compiler lays both out as one tensor, which
    the next convolution reads as one contraction), and a double convolution narrows them. A 1x1
    convolution then gives each pixel its class logits."""
    batch, size, rows = ph.batch, ph.seq, _Rows(ph.batch, ph.tp)
    widths, factor = spec.stage_widths, 2 if spec.bilinear else 1
    deepest = len(widths) - 1
    with b.layer("inc", "conv"):
        b.copy_in("image", elems=share(batch * spec.channels * size * size, ph.tp),
                  rows=share(batch * spec.channels, ph.tp))
        _double_conv(b, rows, size, spec.channels, widths[0])
    skips, cin = [], widths[0]  # the size of each level's map the decoder joins (its channels: the level's width)
    for level in range(1, deepest + 1):
        out = widths[level] // (factor if level == deepest else 1)
        skips.append(size)
        with b.layer(f"down{level}", "conv"):
            size //= 2  # MaxPool2d(2) floors
            b.vector("maxpool", elems=rows.of(size) * cin, rows=rows.of(size), passes=4, items=rows.lines(size))
            _double_conv(b, rows, size, cin, out)
        cin = out
    for step, level in enumerate(range(deepest - 1, -1, -1), 1):
        joined = widths[level + 1]  # Up(in_channels): the upsampled map and the skip's, together
        out = widths[level] // factor if level else widths[0]
        with b.layer(f"up{step}", "conv"):
            if spec.bilinear:  # nn.Upsample(scale_factor=2, mode="bilinear"): four taps an output
                b.vector("upsample", elems=rows.of(2 * size) * cin, rows=rows.of(2 * size), passes=4,
                         items=rows.lines(2 * size))
            else:
                b.matmul("up_conv", rows.of(size), cin, 4 * (joined // 2), act="", weight_replicas=rows.shards,
                         items=rows.lines(size))
            size = skips[level]
            _double_conv(b, rows, size, joined, out, joined // 2 if spec.bilinear else 0)
        cin = out
    with b.layer("outc", "head"):
        b.matmul("conv", rows.of(size), cin, spec.num_labels, act="", weight_replicas=rows.shards,
                 items=rows.lines(size))
