"""Neuron Explorer profiles for tests, written as the published schema says they are.

No real capture is available here, so a profile is built from the schema reference page
(``sim/io/data/explorer-schema-7.4.json``: every table, field, Parquet type and whether it
is required): each table written has every documented column in its documented type, filled from
what the test gives and defaulted where it does not (a required field never empty). Values are
the docs' own examples where they give one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sim.io.explorer import SCHEMA_PATH

SCHEMA_FILE = SCHEMA_PATH
SCHEMA = json.loads(SCHEMA_FILE.read_text())
TABLES: dict[str, list[list]] = SCHEMA["tables"]
TYPES = {"int64": pa.int64(), "int32": pa.int32(), "float": pa.float32(), "double": pa.float64(),
         "string": pa.string(), "bool": pa.bool_(), "list<int64>": pa.list_(pa.int64()),
         "list<string>": pa.list_(pa.string())}
DEFAULTS = {"int64": 0, "int32": 0, "float": 0.0, "double": 0.0, "string": "", "bool": False, "list<int64>": [],
            "list<string>": []}

METADATA = {  # trn1.2xlarge as the reference page's examples and the chip data give it
    "profile_schema_version": "7.4.0", "ntff_version": 2, "num_physical_cores": 1, "vnc_enabled": False,
    "first_hw_timestamp": 1_000_000, "last_hw_timestamp": 1_010_000, "first_ts": "2026-11-30 10:00:00+00:00",
    "last_ts": "2026-11-30 10:00:00+00:00", "dma_ddr_bandwidth": 4.1e11, "num_dma_engines_per_neuroncore": 16,
    "hbm_ddr_bandwidth": 4.1e11, "tensor_engine_num_rows": 128, "tensor_engine_num_cols": 128,
    "tensor_engine_clock_freq": 2.8, "vector_engine_clock_freq": 1.4, "vector_engine_num_channels": 128,
    "scalar_engine_clock_freq": 1.4, "scalar_engine_num_channels": 128, "gpsimd_engine_clock_freq": 1.4,
    "gpsimd_engine_num_channels": 8, "neuroncore_clock_freq": 1.4, "ticks_per_nanosec": 1,
    "instance_type": "trn1.2xlarge", "runtime_version": "2.19.1", "explorer_version": "2.31.0",
    "profile_name": "mlp_nki_mm", "is_simulation": False,
}


def table(name: str, rows: Sequence[Mapping[str, Any]], drop: Sequence[str] = (),
          extra: Mapping[str, pa.Array] | None = None, types: Mapping[str, pa.DataType] | None = None) -> pa.Table:
    """Table ``name`` with every documented column (less ``drop``), its rows from ``rows``,
    ``extra`` columns the schema does not have, ``types`` overriding a column's documented type."""
    columns, fields = [], []
    for field, kind, _unit, required in TABLES[name]:
        if field in drop:
            continue
        values = [r.get(field, DEFAULTS[kind] if required else None) for r in rows]
        t = (types or {}).get(field, TYPES[kind])
        columns.append(pa.array(values, type=t) if field not in (types or {}) else pa.array(values).cast(t))
        fields.append(pa.field(field, t, nullable=not required))
    for field, array in (extra or {}).items():
        columns.append(array)
        fields.append(pa.field(field, array.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def write(directory: Path, name: str, rows: Sequence[Mapping[str, Any]], parts: int = 1, **kw) -> None:
    """Write table ``name`` into the profile ``directory``, split over ``parts`` numbered files
    when more than one (``Instruction_0.parquet``...)."""
    directory.mkdir(parents=True, exist_ok=True)
    t = table(name, rows, **kw)
    if parts == 1:
        pq.write_table(t, directory / f"{name}.parquet")
        return
    size = -(-len(rows) // parts)
    for i in range(parts):
        pq.write_table(t.slice(i * size, size), directory / f"{name}_{i}.parquet")


def instruction(engine: str, opcode: str, start: int, end: int, **fields: Any) -> dict[str, Any]:
    return {"engine": engine, "opcode": opcode, "start_ts": start, "end_ts": end, "duration_ns": end - start,
            "operands": "data=0xd,0xd size=4,4", "bir_id": "sg0000:218805", **fields}


def dma(queue_type: str, start: int, end: int, nbytes: int, **fields: Any) -> dict[str, Any]:
    return {"queue_type": queue_type, "start_ts": start, "end_ts": end, "duration_ns": end - start,
            "read_bytes": nbytes, "write_bytes": nbytes, "transfer_bytes": nbytes,
            "throughput": nbytes / max(end - start, 1) * 1e9, **fields}


def small_profile(directory: Path, metadata: Mapping[str, Any] | None = None,
                  summary: Mapping[str, Any] | None = None, every_table: bool = True) -> Path:
    """A profile of a few events on every kind of track, after the docs' examples: a MATMUL in
    ``layer_1`` (HLO ``dot.1``), a Vector op that waited on a semaphore, a Sync semaphore, DMA on an
    input and an output queue, an AllGather and its CC-core instruction, the runtime's execution
    (a system profile's event), a throttle, SBUF, PSUM and HBM samples, and a Summary.
    ``every_table``: the other tables of the schema too, one row each (what a reader must skip)."""
    t0 = (metadata or METADATA).get("first_hw_timestamp", METADATA["first_hw_timestamp"])
    write(directory, "Metadata", [{**METADATA, **(metadata or {})}])
    write(directory, "Instruction", [
        instruction("Tensor", "MATMUL", t0 + 1000, t0 + 1600, layer="layer_1", hlo_name="dot.1",
                    raw_flops=2 * 128 * 128 * 512, adjusted_flops=2 * 128 * 128 * 512, hbm_read_bytes=4096),
        instruction("Vector", "TENSOR_TENSOR", t0 + 1700, t0 + 1900, layer="layer_1", hlo_name="add.2",
                    evt_wait_time_ns=100),
        instruction("Sync", "EVENT_SEMAPHORE", t0 + 2000, t0 + 2050, dma_wait_time_ns=30),
        instruction("Scalar", "ACTIVATE", t0 + 2100, t0 + 2400, layer="layer_2", hlo_name="tanh.3"),
    ])
    write(directory, "DmaPacket", [
        dma("input", t0 + 500, t0 + 900, 65536, queue_name="qSyncIO0-Q0-E0", pcore_idx=0),
        dma("output", t0 + 2500, t0 + 2700, 32768, queue_name="qSyncIO1-Q1-E0", pcore_idx=0),
    ])
    write(directory, "CcOp", [{"start_ts": t0 + 3000, "end_ts": t0 + 3500, "duration_ns": 500,
                               "operation": "AllGather", "algorithm": "Ring", "num_elements": 1024, "dtype": "fp16",
                               "trigger_engine": "Pool", "input_size": 2048, "output_size": 4096}])
    write(directory, "CcInstruction", [{"start_ts": t0 + 3000, "end_ts": t0 + 3200, "duration_ns": 200,
                                        "core_idx": 1, "description": "DMA_ADVANCE"}])
    write(directory, "SystemProfileEvents", [{"name": "nc_exec_running", "start_ts": t0, "end_ts": t0 + 3500,
                                              "duration_ns": 3500, "trace_event_source": "nrt",
                                              "instance_id": "i-0b1ea78ca2865fd32", "process_id": 4242}])
    write(directory, "Throttle", [{"timestamp": t0 + 1000, "duration": 400, "k": 3, "n": 4, "type": "activity_0"}])
    write(directory, "SbufUsage", [{"timestamp": t0 + s, "avg_util_percent": p, "pcore_idx": 0}
                                   for s, p in ((0, 10.0), (1500, 50.0), (3000, 0.0))])
    write(directory, "PsumUsage", [{"timestamp": t0 + 1000, "avg_util_percent": 25.0, "pcore_idx": 0}])
    write(directory, "HbmUsage", [{"timestamp": t0 + 500, "current_throughput": 1.6e11, "total_transfer_bytes": 65536},
                                  {"timestamp": t0 + 900, "current_throughput": 0.0, "total_transfer_bytes": 65536}])
    write(directory, "Summary", [{"total_time": 4e-6, "mfu_estimated_percent": 12.5, "hfu_estimated_percent": 14.0,
                                  "mbu_estimated_percent": 3.25, "tensor_engine_active_time_percent": 15.0,
                                  "vector_engine_active_time_percent": 5.0, "spill_save_bytes": 1024,
                                  "spill_reload_bytes": 512, "hbm_read_bytes": 65536, "hbm_write_bytes": 32768,
                                  "dma_transfer_average_bytes": 49152.0, **(summary or {})}])
    if every_table:
        written = {p.name.split(".")[0] for p in directory.iterdir()}
        for name in TABLES:
            if name not in written:
                write(directory, name, [{}])
    return directory


def rank_profile(directory: Path, rank: int, started_us: int, arrivals: Sequence[int], duration: int = 100,
                 first_hw: int = 5_000_000) -> Path:
    """Rank ``rank`` of a job: its clock started ``started_us`` µs after 10:00:00 (its own hardware
    timestamps from ``first_hw``), a MATMUL before each collective, and an AllReduce arriving at
    each of ``arrivals`` (ns after its start) that ends when the last rank has arrived, ``duration``
    ns later (the job's ranks give the same ``arrivals`` length)."""
    write(directory, "Metadata", [{**METADATA, "first_hw_timestamp": first_hw, "neuroncore_idx": rank,
                                   "first_ts": f"2026-11-30 10:00:00.{started_us:06d}+00:00"}])
    write(directory, "Instruction", [instruction("Tensor", "MATMUL", first_hw + a - 50, first_hw + a, layer="layer_1")
                                     for a in arrivals])
    write(directory, "CcOp", [{"start_ts": first_hw + a, "end_ts": first_hw + a + duration, "duration_ns": duration,
                               "operation": "AllReduce", "algorithm": "Ring", "num_elements": 1024, "dtype": "bf16",
                               "trigger_engine": "Pool", "input_size": 2048, "output_size": 2048} for a in arrivals])
    return directory
