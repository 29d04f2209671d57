"""Model graphs as data: presets, Hugging Face configs, and the programs built from them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from sim.workloads.builder import ProgramBuilder
from sim.workloads.graph import Program
from sim.workloads.models import CLIP, CNN, DECODER, ENCODER, ENCODER_DECODER, ModelSpec, get_model, preset_names
from sim.workloads.resnet import resnet_program, unet_program, vgg_program
from sim.workloads.training import training_program
from sim.workloads.transformer import Phase, transformer_program

__all__ = ["ModelSpec", "Phase", "Program", "build_program", "get_model", "host_bytes", "parameters",
           "preset_names", "shared_programs", "speculative_step", "training_program"]

# token ids and attention masks reach a traced model as int32 tensors, as the Neuron benchmark
# script traces them (aws-neuron-sdk archive/src/benchmark/pytorch/inf2_benchmark.py: torch.int)
TOKEN_ID_BYTES = 4
# CLIP's benchmark traces the token ids as its processor returns them, int64 (aws-neuron-sdk
# archive/src/benchmark/pytorch/hf-openai-clip_benchmark.py: inputs['input_ids'])
CLIP_TOKEN_ID_BYTES = 8


# programs built inside shared_programs(), by (id of the spec, phase, dtype): with the spec, which keeps its id its own
_built: ContextVar[dict[tuple, tuple[ModelSpec, Program]] | None] = ContextVar("shared_programs", default=None)


@contextmanager
def shared_programs() -> Iterator[None]:
    """Inside, :func:`build_program` copies the program it built before for the same model,
    phase and dtype instead of building it again (a simulation's memory probe, its phases and
    its run under load ask for the same graph: bert-large's takes 4 ms to build, a copy of its
    lists of ops and layers microseconds). Each call still returns a program of its own, as
    outside. Each thread and context has its own programs."""
    token = _built.set({})
    try:
        yield
    finally:
        _built.reset(token)


def build_program(spec: ModelSpec, phase: Phase, dtype_bytes: int) -> Program:
    """The forward program one core runs for ``phase`` (its shard when ``phase.tp > 1``)."""
    built = _built.get()
    if built is None:
        return _build(spec, phase, dtype_bytes)
    key = (id(spec), phase, dtype_bytes)
    if key not in built:
        built[key] = (spec, _build(spec, phase, dtype_bytes))
    program = built[key][1]
    return Program(list(program.ops), list(program.layers))


def _build(spec: ModelSpec, phase: Phase, dtype_bytes: int) -> Program:
    b = ProgramBuilder(dtype_bytes)
    # a convolution's shards split its images' rows; a transformer's shards their heads and widths
    b.items = max(1, phase.batch // phase.tp) if spec.family == CNN else phase.batch
    if spec.model_type == "unet":
        unet_program(b, spec, phase)
    elif spec.family == CNN:
        (vgg_program if spec.conv_plan else resnet_program)(b, spec, phase)
    else:
        transformer_program(b, spec, phase)
    return b.program


def parameters(spec: ModelSpec) -> int:
    """The model's weights as its programs own them: one forward pass; an encoder-decoder's
    encoder pass and one decoder step, the token table they share counted once."""
    seq = spec.default_seq
    count = sum(op.params for op in build_program(spec, Phase(1, seq, seq), 2).ops)
    if spec.family == ENCODER_DECODER:
        step = build_program(spec, Phase(1, 1, seq, decode_step=True, encoder_positions=seq), 2)
        count += sum(op.params for op in step.ops)
    return count


def speculative_step(spec: ModelSpec, draft: ModelSpec, k: int, phase: Phase, dtype_bytes: int) -> Program:
    """One step of speculative decoding on a core: the draft model's ``k`` decode steps, each
    proposing a token, then the model verifying all of them and proposing its own in one pass
    over ``k + 1`` tokens against the cache (its logits at every position, to compare)."""
    b = ProgramBuilder(dtype_bytes)
    b.items = phase.batch
    for i in range(k):
        b.prefix = f"draft {i + 1}/"
        transformer_program(b, draft, phase)
    b.prefix = "verify/"
    transformer_program(b, spec, replace(phase, seq=k + 1))
    return b.program


def host_bytes(spec: ModelSpec, phase: Phase, dtype_bytes: int) -> tuple[int, int]:
    """Bytes one execution of a traced model (one inference) copies between host memory and the
    device, as (inputs, outputs): its inputs (an encoder's or decoder's token ids and attention mask, an image model's
    pixels, in the model's dtype) and its outputs in that dtype (class logits; an encoder's
    hidden states and pooled output, or masked-LM logits for every token; a decoder's logits for
    its last position; a U-Net's class logits for every pixel)."""
    batch, seq = phase.batch, phase.seq
    if spec.family == ENCODER:
        inputs = 2 * batch * seq * TOKEN_ID_BYTES
        outputs = {"classifier": batch * spec.num_labels, "none": batch * (seq + 1) * spec.hidden,
                   "mlm": batch * seq * spec.vocab}[phase.head]
    elif spec.family == DECODER:
        inputs, outputs = 2 * batch * seq * TOKEN_ID_BYTES, batch * spec.vocab
    elif spec.family == CLIP:
        text, prompts, length = spec.text_tower, spec.num_labels, spec.prompt_tokens
        tokens = spec.patch_tokens(seq)
        inputs = prompts * length * CLIP_TOKEN_ID_BYTES + batch * spec.channels * seq * seq * dtype_bytes
        outputs = (2 * batch * prompts + (prompts + batch) * spec.projection_dim
                   + prompts * (length + 1) * text.hidden + batch * (tokens + 1) * spec.hidden)
    else:  # an image model: the images in, the class logits out (a U-Net's for every pixel)
        inputs = batch * spec.channels * seq * seq * dtype_bytes
        outputs = batch * spec.num_labels * (seq * seq if spec.model_type == "unet" else 1)
    return inputs, outputs * dtype_bytes
