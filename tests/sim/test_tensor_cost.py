"""TensorE cost against the tiling formula, worked by hand."""

import math

import pytest

from sim.cost.tensor import plan_matmul
from sim.hardware.chip import get_chip


def tiling_cycles(m, k, n, count, rows, cols, free_max, mm_init, ls, rate):
    """Closed form: the cheaper orientation of count x ceil(K/(rows*max(rate,1))) x ceil(S/cols)
    stationary tiles, each streaming the moving dimension in <= free_max slices of
    max(slice, mm_init) cycles (scaled by 1/rate below the BF16 rate), LoadStationary exposed
    only where it outlasts the matmul it hides behind."""
    best = math.inf
    for stationary, moving in ((m, n), (n, m)):
        slices = [free_max] * (moving // free_max) + ([moving % free_max] if moving % free_max else [])
        mm = sum(max(s, mm_init) for s in slices) / min(rate, 1.0)
        per_stationary = mm + max(0.0, ls - mm)
        best = min(best, count * math.ceil(k / (rows * max(rate, 1.0))) * math.ceil(stationary / cols) * per_stationary)
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


def test_fp32_costs_four_times_bf16_and_fp8_halves_it_on_trn2():
    trn1, trn2 = get_chip("trn1").tensor, get_chip("trn2").tensor
    def cycles(te, dtype):
        return plan_matmul(te, 256, 1024, 1024, 1, dtype).cycles

    assert cycles(trn1, "fp32") == 4 * cycles(trn1, "bf16")
    assert cycles(trn2, "fp8") == cycles(trn2, "bf16") / 2


@pytest.mark.parametrize("chip", ["inf1", "inf2", "trn1", "trn2", "trn3"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096, 1), (128, 64, 128, 16), (3, 5, 7, 2), (50176, 147, 64, 1),
                                   (513, 1000, 1025, 3)])
def test_plan_matches_closed_form(chip, shape):
    te = get_chip(chip).tensor
    m, k, n, count = shape
    for dtype in get_chip(chip).dtypes:
        want = tiling_cycles(m, k, n, count, te.rows, te.cols, te.moving_free_max, te.mm_init_cycles,
                             te.load_stationary_cycles, te.rate[dtype])
        assert plan_matmul(te, m, k, n, count, dtype).cycles == pytest.approx(want, rel=1e-12)
