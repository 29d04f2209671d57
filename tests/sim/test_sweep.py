"""Sweeps: the grid, rows for configurations that cannot run, the same rows on a process pool,
a Dask cluster and Ray, interrupt and resume, and the queries over a results table."""

import math
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from neuronviz.cli import main
from sim.errors import ConfigError, SimError, TraceFileError
from sim.sweep import Journal, Point, best, candidates, frontier, grid, pareto_front, read_results, run_point, sweep

SMALL = dict(models=["bert-base"], instances=["inf2.xlarge", "trn1.2xlarge"], batches=[1, 4], seqs=[128, 256])


def _rows(path):
    return read_results(path).to_pylist()


def test_the_grid_is_every_combination_in_a_stable_order():
    points = grid(["bert-base", "distilbert"], ["inf2.xlarge", "trn1.2xlarge"], [1, 8], [128], dtypes=["bf16", "fp32"])
    assert len(points) == 2 * 2 * 2 * 2
    assert points[0] == Point("bert-base", "inf2.xlarge", "inference", 1, 128, 128, None, "bf16", 1)
    assert points[1].dtype == "fp32" and points[-1].model == "distilbert"
    assert len({p.key for p in points}) == len(points)


@pytest.mark.parametrize("kwargs, message", [
    (dict(models=["no-such-model"], instances=["inf2.xlarge"]), "unknown model 'no-such-model'"),
    (dict(models=["bert-base"], instances=["inf9.xlarge"]), "unknown instance 'inf9.xlarge'"),
    (dict(models=["bert-base"], instances=["inf2.xlarge"], batches=[-1]), "--batch must be positive"),
    (dict(models=["bert-base"], instances=["inf2.xlarge"], batches=list(range(1, 1001)),
          seqs=list(range(1, 1002))), "more than 1,000,000"),
])
def test_a_bad_grid_is_one_error(kwargs, message):
    with pytest.raises(SimError, match=message):
        grid(**kwargs)


def test_a_configuration_that_cannot_run_is_a_row_with_its_reason():
    row = run_point(Point("llama-2-70b", "inf2.xlarge", mode="decode"))
    assert row["status"] == "error" and "does not fit" in row["reason"]
    assert row["config_id"] == "llama-2-70b|inf2.xlarge|decode|1||128||bf16|1"
    row = run_point(Point("bert-base", "inf1.xlarge", dtype="fp8"))
    assert row["status"] == "error" and "fp8" in row["reason"]


def test_quantizations_are_a_dimension_whose_keys_leave_older_files_matching():
    points = grid(["gpt2"], ["trn2.48xlarge", "trn3-ultraserver-gen1"], quants=[None, "mxfp4"])
    assert [p.quant for p in points] == [None, "mxfp4", None, "mxfp4"]
    assert points[0].key == "gpt2|trn2.48xlarge|inference|1||128||bf16|1"  # as files written before quant
    assert points[1].key.endswith("|quant=mxfp4")
    rows = [run_point(p) for p in points]
    assert [r["status"] for r in rows] == ["ok", "error", "ok", "ok"]
    assert "Trainium2 has no MX matmuls" in rows[1]["reason"]
    assert rows[3]["latency_ms"] < rows[2]["latency_ms"]
    with pytest.raises(ConfigError, match="unknown quantization 'int3'"):
        grid(["gpt2"], ["trn2.48xlarge"], quants=["int3"])


def test_a_row_holds_the_simulate_json_fields_and_the_costs():
    row = run_point(Point("bert-base", "inf2.xlarge", batch=4))
    assert row["status"] == "ok" and row["reason"] == ""
    for field in ("latency_ms", "throughput_per_s", "mfu_percent", "tensor_active_percent", "hbm_read_bytes"):
        assert row[field] > 0, field
    # one inf2.xlarge running every copy: the price of an hour over the inferences of an hour
    assert row["cost_per_million_inferences_usd"] == pytest.approx(
        row["price_usd_per_hour"] / (row["throughput_per_s"] * 3600) * 1e6)
    decode = run_point(Point("gpt2", "inf2.xlarge", mode="decode", seq=128, new_tokens=32))
    assert decode["cost_per_million_tokens_usd"] == pytest.approx(decode["cost_per_million_usd"])
    assert decode["cost_per_million_inferences_usd"] > 30 * decode["cost_per_million_tokens_usd"]  # 32 tokens a request
    served = run_point(Point("gpt2", "inf2.xlarge", mode="serve", batch=4, seq=128, new_tokens=16))
    assert served["cost_per_million_tokens_usd"] == pytest.approx(served["cost_per_million_usd"])
    assert served["cost_per_million_inferences_usd"] == pytest.approx(  # a request is 16 output tokens
        16 * served["cost_per_million_tokens_usd"])
    assert served["ttft_p99_ms"] >= served["ttft_p50_ms"] > 0
    train = run_point(Point("bert-base", "trn1.32xlarge", mode="training", batch=8, nodes=2))
    price = train["price_usd_per_hour"] * 2  # both instances
    assert train["cost_per_step_usd"] == pytest.approx(price * train["latency_under_load_ms"] / 3.6e6)
    # a million samples: both instances' price over their samples a second (the old sweep counted it twice)
    assert train["cost_per_million_inferences_usd"] == pytest.approx(price / (train["throughput_per_s"] * 3600) * 1e6)


def test_the_process_pool_gives_the_rows_of_one_process(tmp_path):
    points = grid(**SMALL)
    sweep(points, tmp_path / "one.parquet", workers=1)
    sweep(points, tmp_path / "pool.parquet", workers=2)
    assert _rows(tmp_path / "one.parquet") == _rows(tmp_path / "pool.parquet")
    assert [r["config_id"] for r in _rows(tmp_path / "pool.parquet")] == [p.key for p in points]


def test_a_local_dask_cluster_gives_the_same_rows(tmp_path):
    distributed = pytest.importorskip("distributed")
    points = grid(**SMALL)
    sweep(points, tmp_path / "local.parquet", workers=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        sweep(points, tmp_path / "dask.parquet", engine="dask", address=cluster.scheduler_address)
    assert _rows(tmp_path / "dask.parquet") == _rows(tmp_path / "local.parquet")


def test_ray_gives_the_same_rows_where_it_installs(tmp_path):
    pytest.importorskip("ray")
    points = grid(**SMALL)
    sweep(points, tmp_path / "local.parquet", workers=1)
    sweep(points, tmp_path / "ray.parquet", engine="ray")
    assert _rows(tmp_path / "ray.parquet") == _rows(tmp_path / "local.parquet")


def test_an_interrupted_sweep_resumes_to_the_same_table(tmp_path):
    points = grid(["bert-base"], ["inf1.xlarge", "inf2.xlarge", "trn1.2xlarge"], [1, 2, 4, 8], [128, 256])
    whole, part = tmp_path / "whole.csv", tmp_path / "part.csv"
    sweep(points, whole, workers=1)

    def interrupt_after_some(state):
        if state.done >= 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(points, part, workers=1, progress=interrupt_after_some)
    kept = _rows(part)
    assert 10 <= len(kept) < len(points)
    simulated, total = sweep(points, part, resume=True, workers=1)
    assert simulated == len(points) - len(kept) and total == len(points)
    assert _rows(part) == _rows(whole)
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind
    assert not Journal(part).folder.exists()


def test_every_flush_appends_the_rows_finished_since_the_last_to_the_journal(tmp_path):
    out, seen = tmp_path / "r.parquet", []

    def check_journal(state):
        seen.append(state.done)
        if len(seen) > 1:  # the journal holds every row up to the flush after the previous batch
            assert [r["config_id"] for r in Journal(out).rows()] == [p.key for p in points[:seen[-2]]]

    points = grid(**SMALL)
    sweep(points, out, workers=1, progress=check_journal, save_every_s=0)
    assert seen == list(range(len(points) + 1))  # a configuration a batch on one process: a flush each
    assert [r["config_id"] for r in _rows(out)] == [p.key for p in points]
    assert not Journal(out).folder.exists()


def _full_disk(path, rows):
    raise TraceFileError(f"cannot write {path}: No space left on device")


def test_rows_the_results_file_could_not_take_stay_in_the_journal_for_resume(tmp_path, monkeypatch):
    points, out = grid(**SMALL), tmp_path / "r.parquet"
    whole = tmp_path / "whole.parquet"
    sweep(points, whole, workers=1)
    with monkeypatch.context() as m:
        m.setattr("sim.sweep.write_results", _full_disk)
        with pytest.raises(TraceFileError, match="No space left"):
            sweep(points, out, workers=1, save_every_s=3600)  # nothing flushed before the end
    assert not out.exists() and len(Journal(out).rows()) == len(points)
    assert (Journal(out).folder / Journal.RECORD).read_text() == "r.parquet"  # whose rows they are
    assert sweep(points, out, resume=True, workers=1) == (0, len(points))
    assert _rows(out) == _rows(whole)


def test_a_results_file_that_cannot_be_written_nor_kept_tells_both_failures(tmp_path, monkeypatch):
    out = tmp_path / "r.parquet"
    Journal(out).folder.write_text("in the way")  # the journal cannot take the rows either
    monkeypatch.setattr("sim.sweep.write_results", _full_disk)
    with pytest.raises(ConfigError) as failed:
        sweep(grid(**SMALL)[:2], out, workers=1, save_every_s=3600)
    assert str(failed.value) == (f"cannot write {out}: No space left on device; and cannot keep the finished rows "
                                 f"in {Journal(out).folder}: File exists")


def test_results_files_whose_names_differ_past_the_cut_have_journals_of_their_own(tmp_path, monkeypatch):
    points = grid(**SMALL)
    # .NAME.parts would be 257 bytes: cut to 255, the three names would be one
    a, b, c = (tmp_path / f"{'x' * 240}.parquet.{n}" for n in (1, 2, 3))
    with monkeypatch.context() as m:
        m.setattr("sim.sweep.write_results", _full_disk)
        with pytest.raises(TraceFileError):
            sweep(points, a, workers=1)
    folders = {Journal(p).folder for p in (a, b, c)}
    assert len(folders) == 3 and all(len(os.fsencode(f.name)) <= 255 for f in folders)
    assert sweep(points[:2], b, workers=1) == (2, 2)  # not refused as if a sweep into B was interrupted
    assert sweep(points[:2], c, resume=True, workers=1) == (2, 2)  # nor given A's rows
    assert [r["config_id"] for r in _rows(c)] == [p.key for p in points[:2]]
    assert len(Journal(a).rows()) == len(points)


def test_a_journal_folder_that_holds_another_files_rows_is_refused(tmp_path):
    out = tmp_path / "r.parquet"
    folder = Journal(out).folder
    folder.mkdir()
    (folder / Journal.RECORD).write_text("other.parquet")
    with pytest.raises(ConfigError, match=r"\.r\.parquet\.parts holds the finished rows of a sweep into "
                                          r"other\.parquet, not r\.parquet: move one of them"):
        sweep(grid(**SMALL), out, resume=True, workers=1)


def test_a_temporary_file_left_by_a_killed_append_goes_with_the_journal(tmp_path, monkeypatch):
    points, out = grid(**SMALL), tmp_path / "r.parquet"
    with monkeypatch.context() as m:
        m.setattr("sim.sweep.write_results", _full_disk)
        with pytest.raises(TraceFileError):
            sweep(points, out, workers=1, save_every_s=3600)
    folder = Journal(out).folder
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = folder / f".000001.parquet.{int(gone.stdout)}.abcdefgh.tmp"  # an append killed before its rename
    stale.write_bytes(b"half a part")
    assert sweep(points, out, resume=True, workers=1) == (0, len(points))  # every row in the journal: no append
    assert not folder.exists()


def test_a_journal_folder_that_cannot_be_made_is_a_one_line_error(tmp_path):
    out = tmp_path / "r.parquet"
    Journal(out).folder.write_text("in the way")
    with pytest.raises(ConfigError, match=r"cannot keep the finished rows in .*\.r\.parquet\.parts: File exists"):
        sweep(grid(**SMALL)[:2], out, workers=1, save_every_s=0)


# a sweep that stops for good (as if the machine lost power) once 8 configurations are done
_KILLED_SWEEP = """
import sys, time
from sim.sweep import grid, sweep

def stop_at_8(state):
    if state.done >= 8:
        open(sys.argv[2], "w").close()
        time.sleep(60)

sweep(grid(**eval(sys.argv[3])), sys.argv[1], workers=1, progress=stop_at_8, save_every_s=0)
"""


def test_a_killed_sweep_loses_only_the_rows_since_its_last_flush_and_resumes(tmp_path):
    # inf1 has no fp8: six error rows (no latency column), then six that run, in parts of one row each
    axes = dict(models=["bert-base"], instances=["inf1.xlarge", "inf2.xlarge"], batches=[1, 2, 4], seqs=[128, 256],
                dtypes=["fp8"])
    points = grid(**axes)
    whole, out, stopped = tmp_path / "whole.parquet", tmp_path / "r.parquet", tmp_path / "stopped"
    sweep(points, whole, workers=1)
    child = subprocess.Popen([sys.executable, "-c", _KILLED_SWEEP, str(out), str(stopped), repr(axes)],
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + 120
    while not stopped.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL and stopped.exists()
    assert not out.exists()
    kept = Journal(out).rows()
    assert [r["config_id"] for r in kept] == [p.key for p in points[:7]]  # the 8th was not flushed
    assert [r["status"] for r in kept] == ["error"] * 6 + ["ok"]
    with pytest.raises(ConfigError, match="was interrupted.*--resume"):
        sweep(points, out, workers=1)
    assert sweep(points, out, resume=True, workers=1) == (len(points) - 7, len(points))
    assert _rows(out) == _rows(whole)
    assert not Journal(out).folder.exists()


def test_an_existing_file_is_never_overwritten_without_resume(tmp_path):
    out = tmp_path / "r.parquet"
    out.write_bytes(b"precious")
    with pytest.raises(ConfigError, match="--resume"):
        sweep(grid(**SMALL), out)
    assert out.read_bytes() == b"precious"


def test_the_pareto_front_on_a_hand_built_table():
    latency = [1.0, 2.0, 2.0, 3.0, 4.0, 0.5, None]
    cost = [5.0, 3.0, 4.0, 3.5, 1.0, 9.0, 0.1]
    # 0.5/9 and 1/5 are fastest; 2/3 beats 2/4 and 3/3.5; 4/1 is cheapest; the point without latency is out
    assert pareto_front(latency, cost) == [5, 0, 1, 4]
    assert pareto_front([], []) == []
    assert pareto_front([1.0, math.inf], [2.0, 1.0]) == [0]


def _hand_table():
    rows = [
        dict(config_id="a", instance="inf2.xlarge", model="m", mode="inference", status="ok", latency_ms=2.0,
             throughput_per_s=500.0, cost_per_million_inferences_usd=0.4),
        dict(config_id="b", instance="inf2.xlarge", model="m", mode="inference", status="ok", latency_ms=8.0,
             throughput_per_s=900.0, cost_per_million_inferences_usd=0.25),
        dict(config_id="c", instance="trn1.2xlarge", model="m", mode="inference", status="ok", latency_ms=1.5,
             throughput_per_s=600.0, cost_per_million_inferences_usd=0.6),
        dict(config_id="d", instance="trn1.2xlarge", model="m", mode="inference", status="error", latency_ms=None,
             throughput_per_s=None, cost_per_million_inferences_usd=None),
        dict(config_id="e", instance="inf1.xlarge", model="m", mode="inference", status="ok", latency_ms=20.0,
             throughput_per_s=100.0, cost_per_million_inferences_usd=0.3),
    ]
    return pa.Table.from_pylist(rows)


def test_best_per_instance_and_overall_on_a_hand_built_table():
    table = _hand_table()
    per_instance, overall = best(candidates(table), "cost")
    assert [(r["instance"], r["config_id"]) for r in per_instance] == [
        ("inf2.xlarge", "b"), ("inf1.xlarge", "e"), ("trn1.2xlarge", "c")]
    assert overall["config_id"] == "b"
    per_instance, overall = best(candidates(table, max_latency_ms=5), "cost")
    assert overall["config_id"] == "a" and {r["instance"] for r in per_instance} == {"inf2.xlarge", "trn1.2xlarge"}
    assert best(candidates(table, min_throughput=550), "throughput")[1]["config_id"] == "b"
    assert best(candidates(table), "latency")[1]["config_id"] == "c"
    assert best(candidates(table, max_latency_ms=1), "cost") == ([], None)
    assert [r["config_id"] for r in frontier(candidates(table))] == ["c", "a", "b"]


def test_the_cli_sweeps_and_prints_the_best(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    assert main(["sweep", "--model", "bert-base,distilbert", "--model", "albert-base", "--instances",
                 "inf2.xlarge,trn1.2xlarge", "--batch", "1,4", "--workers", "1", "-o", str(out)]) == 0
    assert f"wrote {out}: 12 rows" in capsys.readouterr().out
    assert {r["model"] for r in _rows(out)} == {"bert-base", "distilbert", "albert-base"}
    assert main(["best", str(out)]) == 0
    text = capsys.readouterr().out
    assert "best overall" in text and "Pareto frontier" in text and "inf2.xlarge" in text
    assert main(["sweep", "--model", "bert-base", "--instances", "inf2.xlarge", "-o", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    assert main(["best", str(bad)]) == 2
    assert "not a readable Parquet results file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--model", "bert-base", "--instances", "inf2.xlarge", "--batch", "4,0", "-o",
              str(tmp_path / "z.parquet")])
    assert exit_info.value.code == 2
    assert "--batch: must be a whole number from 1 to 1,073,741,824, got 0" in capsys.readouterr().err  # as simulate
    with pytest.raises(SystemExit):
        main(["sweep", "--model", "bert-base", "--instances", "inf2.xlarge", "--dtype", "bf16,int4", "-o",
              str(tmp_path / "z.parquet")])
    assert "'int4': choose from bf16, fp16, fp32, fp8, int8" in capsys.readouterr().err


def test_ctrl_c_tells_where_the_finished_rows_are(tmp_path, monkeypatch, capsys):
    out, sweep_args = tmp_path / "r.parquet", ["sweep", "--model", "bert-base", "--instances", "inf2.xlarge",
                                               "--batch", "1,4", "--workers", "1"]

    def interrupted_write(path, rows):
        raise KeyboardInterrupt  # Ctrl-C during the final write: the rows go to the journal

    monkeypatch.setattr("sim.sweep.write_results", interrupted_write)
    assert main([*sweep_args, "-o", str(out)]) == 130
    assert capsys.readouterr().err.endswith(f"interrupted: the finished rows are in {Journal(out).folder}; "
                                            "run the same command with --resume to go on\n")
    monkeypatch.undo()
    assert main([*sweep_args, "-o", str(out), "--resume"]) == 0
    assert f"wrote {out}: 2 rows (0 simulated now)" in capsys.readouterr().out
