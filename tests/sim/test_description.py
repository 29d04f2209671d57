"""A run's typed description, read once from its metadata with the defaults every reader shares."""

from sim.description import Deployment, Workload, describe
from sim.run import RunConfig, simulate


def test_a_simulated_run_describes_itself_typed():
    cfg = RunConfig(model="bert-base", instance="trn1.32xlarge", mode="training", batch=8, nodes=2, grad_accum=3)
    run = simulate(cfg, max_events=0).run
    assert run.workload == Workload("bert-base", "training", 8, 128, "bf16", "bf16", "encoder", "bert", None, 3, 1)
    d = run.deployment
    assert (d.chip, d.instance, d.copies, d.nodes, d.data_parallel, d.shards) == ("trn1", "trn1.32xlarge", 32, 2, 64,
                                                                                 1)
    assert run.software.config == RunConfig(**{**cfg.__dict__, "seq": 128})  # runs again as it ran
    assert run.hardware.instance_chips == 16 and run.hardware.topology == "torus"


def test_a_bare_record_takes_the_defaults_every_view_shares():
    run = describe({"mode": "inference", "model": "m", "copies": 4})
    assert run.deployment == Deployment(copies=4, data_parallel=4)  # copies over every instance: its copies
    assert (run.workload.requests, run.workload.batch, run.software.config, run.hardware) == (1, 1, None, None)
