"""Collectives against hand calculations: rings per level, a torus dimension by dimension, the
UltraServer's slower links across instances, and instances joined by EFA."""

from dataclasses import replace

import pytest

from sim.cost.collective import Group, collective, sub_dims
from sim.hardware.chip import get_chip
from sim.hardware.instances import Topology, get_instance


def _seconds(kind, chip, topo, nbytes, ranks, per_chip, nodes=1, lnc=1):
    return collective(kind, chip, topo, nbytes, Group(ranks, per_chip, nodes, lnc)).seconds


def test_an_all_reduce_within_a_chip_is_a_ring_of_its_cores():
    chip, topo = get_chip("trn1"), get_instance("trn1.32xlarge").topology
    hop, link = chip.efficiency.collective_latency_s, chip.intra_chip_link_bytes_per_s
    # two cores: reduce-scatter and all-gather, one hop each, half the buffer each way
    assert _seconds("all_reduce", chip, topo, 1024, 2, 2) == pytest.approx(2 * hop + 1024 / link)
    # an all-gather or a reduce-scatter is one of those two passes
    assert _seconds("all_gather", chip, topo, 1024, 2, 2) == pytest.approx(hop + 512 / link)
    assert _seconds("reduce_scatter", chip, topo, 1024, 2, 2) == pytest.approx(hop + 512 / link)


def test_a_torus_all_reduces_along_each_dimension_in_turn():
    chip, topo = get_chip("trn1"), get_instance("trn1.32xlarge").topology
    eff, n = chip.efficiency, 64e6
    hop, intra = eff.collective_latency_s, chip.intra_chip_link_bytes_per_s
    per_dim = chip.neuronlink_bytes_per_s / 2  # two of the chip's four links point along each dimension
    # 32 cores on 16 chips: the two cores of a chip reduce-scatter and all-gather (2 hops, n/2 each
    # way); the chips then run 4-chip rings along x on n, and along y on n/4
    within = 2 * hop + n / intra
    x = 2 * 3 * hop + 2 * 3 / 4 * n / per_dim
    y = 2 * 3 * hop + 2 * 3 / 4 * (n / 4) / per_dim
    cost = collective("all_reduce", chip, topo, n, Group(32, 2))
    assert cost.seconds == pytest.approx(eff.collective_setup_s + within + x + y)
    assert cost.link_bytes == pytest.approx(2 * (3 / 4 * n + 3 / 4 * n / 4)) and cost.efa_bytes == 0
    # the same 16 chips around one ring: 15 hops a pass instead of 6
    ring = Topology("ring", (16,), chip.neuronlink_bytes_per_s)
    longer = _seconds("all_reduce", chip, ring, n, 32, 2) - _seconds("all_reduce", chip, topo, n, 32, 2)
    assert longer == pytest.approx(2 * 9 * hop + 2 * 15 / 16 * n / ring.link_bytes_per_s - (x + y - 2 * 6 * hop))


def test_smaller_buffers_take_the_runtimes_fewer_steps_mesh_and_rdh():
    """Below 1 MB the runtime's Mesh: a step among a chip's cores and one routed step in which
    each chip writes to the 15 others, on average 32/15 hops away on the 4x4 torus (each ring of
    4: 0, 1, 2, 1 hops); from 1 to 56 MB its RDH: the chips' halving takes log2 4 = 2 steps a
    dimension, moving what a ring moves."""
    chip, topo = get_chip("trn1"), get_instance("trn1.32xlarge").topology
    eff = chip.efficiency
    hop, intra, link = eff.collective_latency_s, chip.intra_chip_link_bytes_per_s, topo.link_bytes_per_s
    small = 16e3  # a decode step's all-reduce
    mesh_pass = hop + small / 2 / intra + hop + 15 / 16 * small * (32 / 15) / link
    assert _seconds("all_reduce", chip, topo, small, 32, 2) == pytest.approx(eff.collective_setup_s + 2 * mesh_pass)
    mid, per_dim = 8e6, chip.neuronlink_bytes_per_s / 2
    rdh_pass = hop + mid / 2 / intra + 2 * hop + 3 / 4 * mid / per_dim + 2 * hop + 3 / 4 * (mid / 4) / per_dim
    assert _seconds("all_reduce", chip, topo, mid, 32, 2) == pytest.approx(eff.collective_setup_s + 2 * rdh_pass)
    # O(1) steps: a small all-reduce over 16 chips waits as many hops as one over 2 chips
    two_chips = _seconds("all_reduce", chip, topo, small, 4, 2)
    assert _seconds("all_reduce", chip, topo, small, 32, 2) - two_chips == pytest.approx(
        2 * 15 / 16 * small * (32 / 15) / link - 2 * 1 / 2 * small / link)


def test_an_ultraserver_crosses_instances_slower_per_byte_than_within_one():
    chip, us = get_chip("trn2"), get_instance("trn2-ultraserver").topology
    inside = get_instance("trn2.48xlarge").topology
    n = 256e6
    # 64 chips = 4x4 within each instance and a ring of 4 across them, at 256 instead of 512 GB/s a dimension
    assert sub_dims(us, 64) == (4, 4, 4) and sub_dims(inside, 8) == (2, 4) and sub_dims(inside, 2) == (2,)
    across = _seconds("all_reduce", chip, us, n, 64, 1) - _seconds("all_reduce", chip, inside, n, 16, 1)
    last_dim = 2 * 3 * chip.efficiency.collective_latency_s + 2 * 3 / 4 * n / 16 / us.outer_bytes_per_s
    assert across == pytest.approx(last_dim)
    assert across > 2 * 3 / 4 * n / 16 / (chip.neuronlink_bytes_per_s / 2)  # slower than an in-instance link


def test_instances_join_over_efa_after_their_own_reduce_scatter():
    chip, topo = get_chip("trn1"), get_instance("trn1.32xlarge").topology
    eff, n = chip.efficiency, 1.34e9  # bert-large's FP32 gradients
    efa = 800e9 / 8  # trn1.32xlarge: 800 Gbps
    assert topo.efa_bytes_per_s == efa
    one = _seconds("all_reduce", chip, topo, n, 32, 2)
    # 16 instances (a power of two): recursive halving and doubling, 4 steps of 15 us each way,
    # every instance's ranks together sending 15/16 of the buffer each way over its EFA
    sixteen = _seconds("all_reduce", chip, topo, n, 32 * 16, 2, nodes=16)
    assert sixteen - one == pytest.approx(2 * (4 * eff.efa_latency_s + 15 / 16 * n / efa))
    # 3 instances: a ring, 2 steps each way
    three = _seconds("all_reduce", chip, topo, n, 32 * 3, 2, nodes=3)
    assert three - one == pytest.approx(2 * (2 * eff.efa_latency_s + 2 / 3 * n / efa))
    cost = collective("all_reduce", chip, topo, n, Group(32 * 16, 2, 16))
    assert cost.efa_bytes == pytest.approx(2 * 15 / 16 * n)
    # a hierarchical all-reduce beats one flat ring over all 512 cores by far at a small size
    flat = 2 * 511 * eff.efa_latency_s
    assert _seconds("all_reduce", chip, topo, 1e5, 512, 2, nodes=16) < flat / 10


def test_an_all_to_all_sends_each_peer_its_share():
    chip, topo = get_chip("trn2"), get_instance("trn2.48xlarge").topology
    eff, n = chip.efficiency, 64e6
    # 8 ranks on one chip: 7 pairwise steps, each sending 1/8 of the buffer over the on-chip path
    on_chip = _seconds("all_to_all", chip, topo, n, 8, 8)
    assert on_chip == pytest.approx(7 * (eff.collective_latency_s + n / 8 / chip.intra_chip_link_bytes_per_s))
    # one rank on each of 4 chips in a 2x2 square: each chip sends 3/4 of its buffer, on average
    # 4/3 hops away (two neighbours at 1 hop, the diagonal at 2), over all its links
    cost = collective("all_to_all", chip, topo, n, Group(4, 1))
    assert cost.link_bytes == pytest.approx(3 / 4 * n)
    assert cost.seconds == pytest.approx(eff.collective_setup_s + 3 * eff.collective_latency_s
                                         + 3 / 4 * n * 4 / 3 / topo.link_bytes_per_s)


def test_groups_spread_evenly_over_instances():
    assert Group(512, 2, 16).chips_per_node == 16
    assert Group(4, 1).chips_per_node == 4
    assert Group(8, 8).chips_per_node == 1
    with pytest.raises(ValueError, match="unknown collective"):
        collective("broadcast", get_chip("trn1"), get_instance("trn1.32xlarge").topology, 1.0, Group(2, 2))


def test_a_collectives_transfers_hold_the_dma_engines_the_loads_after_it_need():
    """An all-reduce of 8 MiB over 32 trn1 cores: each rank's DMA sends and receives 31/32 of the
    buffer in each of two passes, 4 x 31/32 x 8 MiB = 32.5 MB, at the core's 16 engines x 17 GB/s
    = 272 GB/s (below its 418 GB/s share of an HBM stack): 119.5 us. A 2 us load after it waits
    for them: with the collective from 0 to 10 us and 4 us of transfers, it runs 4-6 us, not 0-2."""
    from sim.lowering import COLLECTIVE, DMA_READ, VECTOR, CoreContext, LoweredOp, Stage, lower
    from sim.scheduler import CoreScheduler
    from sim.workloads.graph import Op, OpKind, Program

    ctx = CoreContext(get_chip("trn1"), "bf16", "bf16", 2, 2, 1, get_instance("trn1.32xlarge").topology, shards=32)
    reduce = Op("all_reduce", OpKind.COLLECTIVE, elems=4 << 20, rows=32)  # 4 Mi BF16 elements
    assert lower(ctx, reduce).engines_s == pytest.approx(4 * 31 / 32 * (8 << 20) / 272e9)

    us = 1e-6
    coll = LoweredOp(1, None, (Stage(COLLECTIVE, 10 * us, 0.0, 0.0),), None, False, 0.0, 0.0, 0.0, engines_s=4 * us)
    load = LoweredOp(1, Stage(DMA_READ, 2 * us, 0.0, 1.0), (Stage(VECTOR, 1 * us, 0.0, 0.0),), None, False, 1.0, 0.0,
                     0.0)
    program = Program(ops=[Op("coll", OpKind.COLLECTIVE), Op("next", OpKind.VECTOR)])
    ends = CoreScheduler(24 << 20).run(program, [coll, load], 0, 0.0)
    assert ends / us == pytest.approx([10, 7])
    free = replace(coll, engines_s=0.0)  # were its transfers elsewhere, the load would not wait
    assert CoreScheduler(24 << 20).run(program, [free, load], 0, 0.0)[1] / us == pytest.approx(3)
