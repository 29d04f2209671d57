"""Sweeps: every combination of models, instances, batches, sequence lengths, cores, data types,
modes and node counts simulated, one row each, on this machine's cores, a Dask cluster or Ray.

A row holds the configuration, every field of ``neuronviz simulate --json`` (nested fields
flattened: ``engine_utilization_tensor``), the costs a buyer compares (per million inferences,
per million tokens, per training step) and a status: ``ok``, or ``error`` with the reason the
configuration cannot run (it does not fit, a data type the chip lacks). Results are Arrow
tables in Parquet (or CSV). While a sweep runs, its finished rows are appended to a :class:`Journal`
beside the results file every few seconds (never rewritten), so an interrupted or killed sweep
keeps what it finished and ``resume`` skips it; the results file is written once, at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import re
import signal
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sim.errors import ConfigError, SimError
from sim.hardware.instances import get_instance
from sim.io.atomic import NAME_MAX, _remove_stale_temporaries, atomic_file
from sim.io.atomic import SUFFIX as TMP_SUFFIX
from sim.metrics import compute_metrics
from sim.progress import Progress
from sim.quant import QUANTS
from sim.record import run_record
from sim.run import RunConfig, simulate
from sim.workloads import get_model

KEY_FIELDS = ("model", "instance", "mode", "batch", "seq", "new_tokens", "cores", "dtype", "nodes")
STATUS_OK, STATUS_ERROR = "ok", "error"
ENGINES = ("local", "dask", "ray")
MAX_ROWS = 1_000_000  # a bigger grid is a typo in a list, not a sweep anyone can look at
HASH_CHARS = 12  # hex digits of a hash that tell apart journal folders whose names were cut


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep."""

    model: str
    instance: str
    mode: str = "inference"
    batch: int = 1
    seq: int | None = None  # None: the model's default
    new_tokens: int = 128
    cores: int | None = None  # None: the fewest that hold the model
    dtype: str = "bf16"
    nodes: int = 1
    quant: str | None = None  # weight matmuls quantized (sim.quant.QUANTS); None: in dtype

    @property
    def key(self) -> str:
        """Identifies the configuration in a results file (``resume`` skips the keys it holds);
        a quantization is appended only when there is one, so older files' keys still match."""
        key = "|".join("" if getattr(self, f) is None else str(getattr(self, f)) for f in KEY_FIELDS)
        return key if self.quant is None else f"{key}|quant={self.quant}"

    def config(self) -> RunConfig:
        return RunConfig(model=self.model, instance=self.instance, mode=self.mode, batch=self.batch, seq=self.seq,
                         new_tokens=self.new_tokens, cores=self.cores, dtype=self.dtype, nodes=self.nodes,
                         quant=self.quant)


def grid(models: Sequence[str], instances: Sequence[str], batches: Sequence[int] = (1,),
         seqs: Sequence[int | None] = (None,), cores: Sequence[int | None] = (None,),
         dtypes: Sequence[str] = ("bf16",), modes: Sequence[str] = ("inference",), nodes: Sequence[int] = (1,),
         new_tokens: int = 128, quants: Sequence[str | None] = (None,)) -> list[Point]:
    """Every combination, in a stable order (models outermost, node counts innermost)."""
    if not models or not instances:
        raise ConfigError("a sweep needs at least one model and one instance")
    for name, values in (("--batch", batches), ("--nodes", nodes), ("--cores", cores), ("--seq", seqs)):
        bad = [v for v in values if v is not None and v < 1]
        if bad:
            raise ConfigError(f"{name} must be positive whole numbers, got {bad[0]}")
    for name in models:
        get_model(name)  # an unknown model or a bad config.json is one error, not a row per configuration
    for name in instances:
        get_instance(name)
    bad = [q for q in quants if q is not None and q not in QUANTS]
    if bad:
        raise ConfigError(f"unknown quantization '{bad[0]}': choose none or one of {', '.join(QUANTS)}")
    count = math.prod(map(len, (models, instances, batches, seqs, cores, dtypes, modes, nodes, quants)))
    if count > MAX_ROWS:
        raise ConfigError(f"the sweep has {count:,} configurations, more than {MAX_ROWS:,}: shorten a list")
    return [Point(m, i, mode, b, s, new_tokens, c, d, n, q)
            for m, i, mode, b, s, c, d, n, q in itertools.product(models, instances, modes, batches, seqs, cores,
                                                                   dtypes, nodes, quants)]


def _flatten(record: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in record.items():
        if isinstance(v, dict):
            out.update({f"{k}_{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def run_point(point: Point) -> dict[str, Any]:
    """Simulate one configuration (its metrics only) and return its row; a configuration that
    cannot run returns a row with the reason."""
    row: dict[str, Any] = {"config_id": point.key, **asdict(point)}
    try:
        trace = simulate(point.config(), max_events=0)
    except SimError as exc:
        return {**row, "status": STATUS_ERROR, "reason": str(exc)}
    except (ValueError, ArithmeticError, MemoryError) as exc:  # a simulator bug must not end the sweep
        return {**row, "status": STATUS_ERROR, "reason": f"simulator error: {type(exc).__name__}: {exc}"}
    rec = _flatten(run_record(trace))
    row.update({k: v for k, v in rec.items() if k not in ("events",)})
    row.update(costs(trace))
    row.update(status=STATUS_OK, reason="")
    return row


def costs(trace) -> dict[str, float | None]:
    """What the configuration costs at the on-demand price of every instance it runs on, by what
    it produces (:func:`sim.metrics.compute_metrics`): per million inferences (requests, for
    decode and serve; samples, for training), per million tokens (generated, or trained on), per
    training step."""
    m = trace.meta
    met = compute_metrics(trace)
    price = m.get("price_usd_per_hour")
    per_inference = met.cost_per_million_requests_usd if m["mode"] in ("decode", "serve") else met.cost_per_million_usd
    return {"price_usd_per_hour": price, "cost_per_million_inferences_usd": per_inference,
            "cost_per_million_tokens_usd": met.cost_per_million_tokens_usd, "cost_per_step_usd": met.cost_per_step_usd}


def run_points(points: list[Point]) -> list[dict[str, Any]]:
    """A batch of configurations (one task of a pool or cluster)."""
    return [run_point(p) for p in points]


def batches(points: Sequence[Point], workers: int) -> list[list[Point]]:
    """Tasks of a few configurations each: enough tasks to balance the workers, few enough that
    per-task overhead stays small."""
    size = max(1, min(16, len(points) // max(1, workers * 8)))
    return [list(points[i:i + size]) for i in range(0, len(points), size)]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle


def execute(points: Sequence[Point], engine: str = "local", address: str | None = None,
            workers: int | None = None) -> Iterator[list[dict[str, Any]]]:
    """Simulate ``points`` and yield their rows a batch at a time, as batches finish.

    ``local``: a process pool of ``workers`` (default: this machine's cores); ``dask``: the
    Dask distributed scheduler at ``address``; ``ray``: the Ray cluster at ``address`` (a local
    one when None). Closing the generator (or Ctrl-C) cancels what has not started."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine '{engine}': choose one of {', '.join(ENGINES)}")
    if not points:
        return
    if engine == "local":
        yield from _execute_local(points, workers or os.cpu_count() or 1)
    elif engine == "dask":
        yield from _execute_dask(points, address)
    else:
        yield from _execute_ray(points, address)


def _execute_local(points: Sequence[Point], workers: int) -> Iterator[list[dict[str, Any]]]:
    if workers == 1:
        for batch in batches(points, 1):
            yield run_points(batch)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn, not fork: the app starts sweeps from a thread of a Qt process
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_sigint)
    futures = [pool.submit(run_points, b) for b in batches(points, workers)]
    try:
        for future in as_completed(futures):
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _execute_dask(points: Sequence[Point], address: str | None) -> Iterator[list[dict[str, Any]]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ConfigError("the Dask engine needs dask.distributed: pip install 'neuronviz[dask]'") from None
    if not address:
        raise ConfigError("the Dask engine needs the scheduler's address (--scheduler tcp://HOST:8786)")
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    futures = client.map(run_points, batches(points, workers), pure=False)
    try:
        for future in as_completed(futures):
            yield future.result()
    finally:
        client.cancel(futures)
        client.close()


def _execute_ray(points: Sequence[Point], address: str | None) -> Iterator[list[dict[str, Any]]]:
    try:
        import ray
    except ImportError:
        raise ConfigError("the Ray engine needs ray: pip install 'neuronviz[ray]'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    remote = ray.remote(run_points)
    workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    pending = [remote.remote(b) for b in batches(points, workers)]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        for ref in pending:
            ray.cancel(ref)
        if started:
            ray.shutdown()


# --- results files -------------------------------------------------------------------------------

def _is_csv(path: str | Path) -> bool:
    return str(path).lower().endswith(".csv")


def read_results(path: str | Path):
    """A results file as an Arrow table (Parquet, or CSV by its name)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    try:
        table = pacsv.read_csv(path) if _is_csv(path) else pq.read_table(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (pa.ArrowException, OSError) as exc:
        kind = "CSV" if _is_csv(path) else "Parquet"
        raise ConfigError(f"{path} is not a readable {kind} results file: {exc}".splitlines()[0]) from None
    missing = [c for c in ("config_id", "status", *KEY_FIELDS) if c not in table.column_names]
    if missing:
        raise ConfigError(f"{path} is not a sweep results file: it has no column '{missing[0]}'")
    return table


def write_results(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    target = Path(path)
    table = _table(rows)
    with atomic_file(target) as f:
        if _is_csv(target):
            pacsv.write_csv(table, f)
        else:
            pq.write_table(table, f)


def _table(rows: list[dict[str, Any]]):
    """``rows`` as one table: every column any row has (an error row has no latency), None where a row lacks it."""
    import pyarrow as pa

    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    return pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows])


class Journal:
    """The finished rows of a sweep in progress, kept on disk until its results file holds them.

    Each :meth:`append` writes the rows finished since the last one as a small Parquet file (one row
    group) in a hidden folder beside the results file, ``.NAME.parts``, atomically: a sweep killed at
    any moment (SIGKILL, a power cut) loses at most the rows since its last append, and ``resume`` reads
    them back. Rows are only added, so an append costs what it adds, not the table so far; each part
    has the columns of its own rows, unified when the results file is written. A NAME too long for the
    folder's name is shortened and followed by a hash of the whole name, so that results files whose
    names differ only past the cut have folders of their own; the folder's ``RECORD`` file holds the
    results file's name, and a folder that holds another file's rows is refused."""

    RECORD = "results-file"  # the name of the results file whose rows the folder holds

    def __init__(self, target: Path) -> None:
        self.target = target
        self.folder = target.parent / _folder_name(target.name)
        found = self.folder.glob("*.parquet") if self.folder.is_dir() else ()
        self.parts = sorted((p for p in found if p.stem.isdigit()), key=lambda p: int(p.stem))  # as appended
        owner = self._owner()
        if owner is not None and owner != target.name:
            raise ConfigError(f"{self.folder} holds the finished rows of a sweep into {owner}, not {target.name}: "
                              "move one of them")

    def _owner(self) -> str | None:
        try:
            return os.fsdecode((self.folder / self.RECORD).read_bytes())
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read {self.folder / self.RECORD}: {exc.strerror or exc}") from None

    def rows(self) -> list[dict[str, Any]]:
        return [row for part in self.parts for row in read_results(part).to_pylist()]

    def append(self, rows: list[dict[str, Any]]) -> None:
        import pyarrow.parquet as pq

        if not rows:
            return
        try:
            self.folder.mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot keep the finished rows in {self.folder}: {exc.strerror or exc}") from None
        if not (self.folder / self.RECORD).exists():
            with atomic_file(self.folder / self.RECORD) as f:
                f.write(os.fsencode(self.target.name))
        number = int(self.parts[-1].stem) + 1 if self.parts else 0
        part = self.folder / f"{number:06d}.parquet"
        with atomic_file(part) as f:
            pq.write_table(_table(rows), f)
        self.parts.append(part)

    def remove(self) -> None:
        """Deletes the parts (once the results file holds their rows), the record, the temporary files
        of appends killed before they could rename (when their process is gone) and the folder, if
        nothing else is in it."""
        for part in self.parts:
            part.unlink(missing_ok=True)
        self.parts = []
        if not self.folder.is_dir():
            return
        written = (_JOURNAL_TEMPORARY.fullmatch(tmp.name) for tmp in self.folder.glob(f".*{TMP_SUFFIX}"))
        for prefix in {found.group(1) for found in written if found}:
            _remove_stale_temporaries(self.folder, prefix)
        (self.folder / self.RECORD).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.folder.rmdir()


# an atomic save's temporary file of a part or the record: .NAME.PID.XXXXXXXX.tmp, its prefix .NAME.
_JOURNAL_TEMPORARY = re.compile(rf"(\.(?:\d+\.parquet|{re.escape(Journal.RECORD)})\.)\d+\.\w+{re.escape(TMP_SUFFIX)}")


def _folder_name(name: str) -> str:
    """``.NAME.parts``; a NAME that makes it too long is cut and followed by a hash of the whole."""
    folder = f".{name}.parts"
    if len(os.fsencode(folder)) <= NAME_MAX:
        return folder
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:HASH_CHARS]
    while len(os.fsencode(f".{name}-{digest}.parts")) > NAME_MAX:
        name = name[:-1]
    return f".{name}-{digest}.parts"


def sweep(points: Sequence[Point], output: str | Path, resume: bool = False, engine: str = "local",
          address: str | None = None, workers: int | None = None, progress=None,
          save_every_s: float = 2.0) -> tuple[int, int]:
    """Run a sweep into ``output``; returns (rows simulated now, rows in the file).

    With ``resume`` the rows already in ``output`` and in its :class:`Journal` (left by a sweep that
    was killed) are kept and their configurations skipped. The rows finished are appended to the
    journal every ``save_every_s``; at the end (also on Ctrl-C or an error) ``output`` is written
    once, atomically, with every row in the grid's order, so a resumed sweep ends with the same
    table as an uninterrupted one, and the journal is removed."""
    target = Path(output)
    journal = Journal(target)
    rows: dict[str, dict[str, Any]] = {}
    if target.exists() or journal.parts:
        if not resume:
            where = output if target.exists() else f"a sweep into {output} was interrupted: {journal.folder}"
            raise ConfigError(f"{where} exists: --resume continues that sweep, or choose another -o")
        if target.exists():
            rows = {r["config_id"]: r for r in read_results(target).to_pylist()}
        rows.update((r["config_id"], r) for r in journal.rows())
    elif not target.parent.is_dir():
        raise ConfigError(f"cannot write {output}: no such directory {target.parent}")
    order = {p.key: i for i, p in enumerate(points)}
    todo = [p for p in points if p.key not in rows]

    state = Progress(len(points), len(points) - len(todo))
    if progress:
        progress(state)
    saved_at, new, unsaved = time.perf_counter(), 0, []
    try:
        for batch in execute(todo, engine, address, workers):
            rows.update((r["config_id"], r) for r in batch)
            unsaved += batch
            new += len(batch)
            state.advance(len(batch))
            if progress:
                progress(state)
            if time.perf_counter() - saved_at >= save_every_s:
                journal.append(unsaved)
                saved_at, unsaved = time.perf_counter(), []
    finally:
        try:
            write_results(target, sorted(rows.values(), key=lambda r: order.get(r["config_id"], len(order))))
        except BaseException as exc:
            _keep(journal, unsaved, exc)  # the rows are kept for --resume when the results file cannot be written
            raise
        journal.remove()
    return new, len(rows)


def _keep(journal: Journal, rows: list[dict[str, Any]], failure: BaseException) -> None:
    """Appends ``rows`` to ``journal`` after ``failure`` to write the results file; when that fails
    too, one error tells both (the first, a full disk say, is what the user must fix)."""
    try:
        journal.append(rows)
    except (SimError, OSError) as exc:
        if not isinstance(failure, Exception):  # Ctrl-C or an exit: the journal's failure is the only error
            raise
        first = str(failure).splitlines()[0] if str(failure) else type(failure).__name__
        raise ConfigError(f"{first}; and {exc}".splitlines()[0]) from None


# --- queries -------------------------------------------------------------------------------------

METRICS = {  # --metric: column, and whether smaller is better
    "cost": ("cost_per_million_inferences_usd", True),
    "throughput": ("throughput_per_s", False),
    "latency": ("latency_ms", True),
}


def candidates(table, max_latency_ms: float | None = None, min_throughput: float | None = None):
    """The rows that ran and meet the latency and throughput limits."""
    import pyarrow.compute as pc

    mask = pc.equal(table["status"], STATUS_OK)
    if max_latency_ms is not None:
        mask = pc.and_kleene(mask, pc.less_equal(table["latency_ms"], max_latency_ms))
    if min_throughput is not None:
        mask = pc.and_kleene(mask, pc.greater_equal(table["throughput_per_s"], min_throughput))
    return table.filter(pc.fill_null(mask, False))


def best(table, metric: str = "cost") -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The best row per instance (best instance first) and overall, by ``metric``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if metric not in METRICS:
        raise ConfigError(f"unknown metric '{metric}': choose one of {', '.join(METRICS)}")
    column, ascending = METRICS[metric]
    if column not in table.column_names:
        return [], None
    table = table.filter(pc.is_valid(table[column]))
    if not table.num_rows:
        return [], None
    ranked = table.sort_by([(column, "ascending" if ascending else "descending"), ("config_id", "ascending")])
    rank = ranked.append_column("_rank", pa.array(range(ranked.num_rows)))
    firsts = sorted(rank.group_by("instance").aggregate([("_rank", "min")])["_rank_min"].to_pylist())
    return ranked.take(firsts).to_pylist(), ranked.slice(0, 1).to_pylist()[0]


def pareto_front(latency: Iterable[float], cost: Iterable[float]) -> list[int]:
    """Indices of the points no other point beats on both latency and cost (lower is better),
    by increasing latency."""
    pts = sorted((lat, c, i) for i, (lat, c) in enumerate(zip(latency, cost, strict=True))
                 if lat is not None and c is not None and math.isfinite(lat) and math.isfinite(c))
    front, best_cost = [], math.inf
    for _, c, i in pts:
        if c < best_cost:
            front.append(i)
            best_cost = c
    return front


def frontier(table) -> list[dict[str, Any]]:
    """The latency / cost-per-million Pareto frontier of ``table``'s rows, per mode (a cost
    per million inferences and one per million training samples do not compare)."""
    rows = table.to_pylist()
    out = []
    for mode in dict.fromkeys(r["mode"] for r in rows):
        same = [r for r in rows if r["mode"] == mode]
        idx = pareto_front([r.get("latency_ms") for r in same], [r.get("cost_per_million_inferences_usd")
                                                                 for r in same])
        out += [same[i] for i in idx]
    return out
