"""TensorE cost against hand calculations from the NKI ISA's instruction costs."""

import math
from dataclasses import replace

import pytest

from sim.cost.tensor import plan_matmul, plan_transpose
from sim.hardware.chip import get_chip
from sim.scheduler import TensorRamp


def tiling_cycles(m, k, n, count, te, dtype):
    """Closed form: the cheaper orientation of count x ceil(K/(rows*k_pack)) x ceil(S/cols)
    stationary tiles, each streaming the moving dimension in <= free_max slices of
    max(min(mm_init, stationary width), slice) cycles (times k_pack / rate), LoadStationary
    exposed only where it outlasts the matmuls it hides behind."""
    pack, rate = te.k_pack[dtype], te.rate[dtype]
    best = math.inf
    for stationary, moving in ((m, n), (n, m)):
        slices = [te.moving_free_max] * (moving // te.moving_free_max)
        slices += [moving % te.moving_free_max] if moving % te.moving_free_max else []
        floor = min(te.mm_init_cycles, stationary, te.cols)
        mm = sum(max(s, floor) for s in slices) * pack / rate
        per_stationary = mm + max(0.0, te.load_stationary_cycles * min(stationary, te.cols) / te.cols - mm)
        tiles = count * math.ceil(k / (te.rows * pack)) * math.ceil(stationary / te.cols)
        best = min(best, tiles * per_stationary)
    return best


def test_bert_large_ffn_matmul_runs_at_full_array_rate_on_trn1():
    te = get_chip("trn1").tensor
    plan = plan_matmul(te, 128, 1024, 4096, 1, "bf16")
    # every PE busy every cycle: cycles = MACs / (128 x 128)
    assert plan.cycles == 128 * 1024 * 4096 / (128 * 128) == 32768


def test_ragged_matmul_picks_the_cheaper_orientation():
    te = get_chip("trn1").tensor
    plan = plan_matmul(te, 100, 200, 700, 1, "bf16")
    # stationary 700 -> 6 column tiles, moving 100 -> one 100-cycle slice, 2 contraction tiles
    assert plan.cycles == 2 * 6 * 100 == 1200
    assert plan.instructions == 12
    assert (plan.stationary, plan.moving) == (700, 100)


def test_a_decode_step_pays_the_minimum_initiation_interval_per_instruction():
    te = get_chip("trn1").tensor
    # one token through a 4096x4096 projection: the weights are held stationary, 32 x 32 tiles,
    # and each instruction streams one column but costs MM_INIT = 64 cycles (the other way,
    # 32 contraction tiles of 8 full 512-column slices, would take 131072 cycles)
    plan = plan_matmul(te, 1, 4096, 4096, 1, "bf16")
    assert plan.cycles == 32 * 32 * 64 == 65536
    assert plan.psum_tiles == 32 and plan.psum_free == 32


def test_head_width_64_uses_half_the_contraction_rows():
    te = get_chip("inf2").tensor
    # scores of 12 heads: [128 queries, 64] @ [64, 128 keys]: one contraction tile of 64 rows
    # per head still takes a whole 128-cycle instruction, half the PEs idle
    plan = plan_matmul(te, 128, 64, 128, 12, "bf16")
    assert plan.cycles == 12 * 128
    assert 2 * 128 * 64 * 128 * 12 / (plan.cycles * 2 * 128 * 128) == 0.5


def test_a_load_stationary_longer_than_its_matmuls_is_exposed():
    te = replace(get_chip("trn1").tensor, load_stationary_cycles=200)
    plan = plan_matmul(te, 64, 128, 64, 1, "bf16")
    # one 128x64 stationary tile (loaded in 200 x 64/128 = 100 cycles), one 64-wide moving slice
    # of 64 cycles: 36 cycles of the load exposed
    assert plan.cycles == 64 + (100 - 64)


def test_a_narrow_stationary_tile_lowers_the_instruction_floor():
    te = get_chip("trn1").tensor
    # 8 tokens x 16 outputs: a 16-column stationary tile streaming 8 columns costs
    # max(min(64, 16), 8) = 16 cycles, not the 64-cycle turnaround of a full-width tile (its
    # load, 32 x 16/128 = 4 cycles, hides behind it)
    assert plan_matmul(te, 8, 128, 16, 1, "bf16").cycles == 16


def test_fp32_costs_four_times_bf16_and_fp8_follows_the_published_chip_totals():
    trn1, trn2, trn3 = get_chip("trn1").tensor, get_chip("trn2").tensor, get_chip("trn3").tensor

    def cycles(te, dtype):
        return plan_matmul(te, 256, 2048, 1024, 1, dtype).cycles

    assert cycles(trn1, "fp32") == 4 * cycles(trn1, "bf16")
    # FP8 double-row mode contracts 256 rows per instruction; the chip's 1,299 FP8 TFLOPS
    # against 667 BF16 set its pace
    assert cycles(trn2, "bf16") / cycles(trn2, "fp8") == pytest.approx(1299 / 667, rel=1e-5)
    assert plan_matmul(trn2, 256, 2048, 1024, 1, "fp8").k_tiles == 8
    assert cycles(trn3, "bf16") / cycles(trn3, "fp8") == pytest.approx(2517 / 671, rel=1e-5)
    assert plan_matmul(trn3, 256, 2048, 1024, 1, "fp8").k_tiles == 4


@pytest.mark.parametrize("chip", ["inf1", "inf2", "trn1", "trn2", "trn3"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096, 1), (128, 64, 128, 16), (3, 5, 7, 2), (50176, 147, 64, 1),
                                   (513, 1000, 1025, 3)])
def test_plan_matches_closed_form(chip, shape):
    te = get_chip(chip).tensor
    m, k, n, count = shape
    for dtype in get_chip(chip).dtypes:
        want = tiling_cycles(m, k, n, count, te, dtype)
        assert plan_matmul(te, m, k, n, count, dtype).cycles == pytest.approx(want, rel=1e-12)


def test_a_transpose_is_one_identity_matmul_per_block():
    te = get_chip("trn1").tensor
    # [300, 200] -> blocks of 128, 128 and 44 partitions in column tiles of 128 and 72; each
    # block costs max(p, min(64, c)): 128 + 128 + 64 in both column tiles
    plan = plan_transpose(te, 300, 200, 2)
    assert plan.cycles == 2 * 2 * (128 + 128 + 64)
    # a [40, 30] block: max(40, min(64, 30)) = 40 cycles
    assert plan_transpose(te, 40, 30, 1).cycles == 40
    assert plan.instructions == 2 * 2 * 3
    assert plan.psum_free == 2 * 2 * 300


def test_throttled_array_starts_at_half_rate_and_ramps_over_three_microseconds():
    ramp = TensorRamp(get_chip("trn2").tensor.throttle)
    # from idle, work done in t us is 0.5 t + t^2 / 12 (rate rising from 1/2 to 1 over 3 us):
    # 1 us of full-rate work takes t = -3 + sqrt(21) us
    assert ramp.duration(0.0, 1e-6) == pytest.approx((-3 + math.sqrt(21)) * 1e-6)
    # a long burst right after it: the ramp completes at 3 us, having done 2.25 us of work
    first = (-3 + math.sqrt(21)) * 1e-6
    assert ramp.duration(first, 10e-6) == pytest.approx(10e-6 + 3e-6 - first - (2.25e-6 - 1e-6))
    # once ramped, work takes its full-rate time; a gap shorter than half the window keeps it
    assert ramp.duration(ramp.last_end + 1e-6, 2e-6) == pytest.approx(2e-6)
    # an idle gap of half the 3 us window or more leaves utilisation at one half: it starts again
    assert ramp.duration(ramp.last_end + 1.6e-6, 1e-6) == pytest.approx((-3 + math.sqrt(21)) * 1e-6)


def test_semaphore_waits_between_instructions_reengage_the_throttle_only_below_half_use():
    ramp = TensorRamp(get_chip("trn2").tensor.throttle)
    ramp.duration(0.0, 10e-6)  # ramped to full rate
    # 3 us of instructions after 2 us of waits spread between them (active 60% of the time):
    # no idle gap, so they run at full rate
    assert ramp.duration(ramp.last_end + 2e-6, 3e-6, wait_s=2e-6) == pytest.approx(3e-6)
    # after 4 us of waits (active 3 of 7 us, under one half) the limit is back: from half rate,
    # 2.25 us of work in the 3 us ramp, the other 0.75 us at full rate
    assert ramp.duration(ramp.last_end + 4e-6, 3e-6, wait_s=4e-6) == pytest.approx(3.75e-6)
    # an idle gap before the waits still counts as idle
    ramp.duration(ramp.last_end, 10e-6)
    assert ramp.duration(ramp.last_end + 1.6e-6 + 1e-6, 3e-6, wait_s=1e-6) == pytest.approx(3.75e-6)


def test_only_trainium2_and_trainium3_throttle():
    assert get_chip("trn2").tensor.throttle is not None and get_chip("trn3").tensor.throttle is not None
    assert all(get_chip(c).tensor.throttle is None for c in ("inf1", "inf2", "trn1"))


def test_attention_tiles_narrower_than_a_psum_bank_share_its_wait_and_its_evacuation():
    from sim.hardware.instances import get_instance
    from sim.lowering import TENSOR, CoreContext, lower
    from sim.workloads.builder import ProgramBuilder

    chip = get_chip("inf2")
    ctx = CoreContext(chip, "bf16", "bf16", 1, 1, 1, get_instance("inf2.xlarge").topology)
    b = ProgramBuilder(2)
    # CLIP's text tower: 100 prompts x 8 heads, each [9 x 64] @ [64 x 9]; then the same shapes
    # with the right operand a weight, or keys from a KV cache, streamed in from device memory
    # (each instruction waits on its own tile)
    b.matmul("scores", 9, 64, 9, count=800, weights=False)
    b.matmul("weighted", 9, 64, 9, count=800)
    b.matmul("cached", 9, 64, 9, count=800, weights=False, hbm_elems=800 * 64 * 9)
    packed, alone, cached = (lower(ctx, op) for op in b.program.ops)

    def waits(lowered):
        return sum(s.wait_s for s in lowered.compute if s.resource == TENSOR) * lowered.chunks

    one_wait = chip.efficiency.mm_wait_cycles / chip.tensor.clock_hz
    # a bank is 2 KiB a partition, 512 FP32 elements: 56 tiles 9 wide side by side, one wait
    # for all their instructions (800 / 56 banks' worth)
    assert waits(packed) == pytest.approx(800 / 56 * one_wait)
    assert waits(alone) == waits(cached) == pytest.approx(800 * one_wait)

    def evacuation(lowered):
        return sum(s.dur_s for s in lowered.compute if s.resource != TENSOR) * lowered.chunks

    # ScalarE reads PSUM at one FP32 element a partition a cycle, 64 cycles an instruction at
    # least: one instruction a bank (15) reads the 800 x 9 elements of a partition in 7,200
    # cycles; one a tile (800), each 9 elements, pays the 64-cycle floor 800 times
    clock = chip.scalar.clock_hz
    assert evacuation(packed) == pytest.approx(800 * 9 / clock)
    assert evacuation(alone) == pytest.approx(800 * 64 / clock)
