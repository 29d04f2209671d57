"""Validation against published Neuron measurements: simulate each row as published, report the error.

Two tables of published figures (``calibration/published.csv``, the Neuron documentation's benchmark
pages; ``calibration/published-2025-2026.csv``, serving on Trainium2 and Inferentia2 and NxD
Inference's Trainium2 tutorials) become
:class:`Row` s. A row's deployment comes from what its publication states, never from its measured
values:

- data-parallel encoder and vision rows run one model copy per NeuronCore the row states, at most
  the model counts the page's NeuronPerf script asks for (two on Inferentia2 and Trainium1, whose
  sizes NeuronPerf does not know: ``calibration/benchmark-tasks.toml``); a *Real Time* row's
  latency is one request with its copy alone, a *Batch* row's throughput every copy busy;
- tensor-parallel decoder rows run one copy over the stated degree with the stated batch, those
  of Transformers NeuronX as it runs them (the compiler's attention ops; KV heads the degree does
  not divide converted to one per query head);
- training rows run data parallel over every core of every node, accumulating the micro-batches
  the published global batch needs; a tensor/pipeline-parallel row runs its published degrees
  with the rest as the NxD Training recipe it comes from sets it (``calibration/recipes-training.toml``);
- 2025-2026 serving rows follow ``calibration/setups-2025-2026.toml`` (the serving command each
  source quotes: compiled batch, users, compiled length, buckets, kernels, prompt chunks); a row from a
  source without an entry there runs what the row itself states (:func:`_stated_setup`).

A measurement whose value follows from another of the same run is reported but not counted as an
independent data point: the throughput of a Real Time row (copies x batch / its latency), the
latency of a Batch row (it depends on how many requests the benchmark queued, which the pages do
not state), a decoder's tokens per second (batch / time per token), a serving run's output
throughput when the same run's time to first token and time per output token are published (its
users each wait for their last request: users x tokens / (TTFT + tokens x TPOT)). A figure published
on two pages (the same setup and value) counts once. Rows the simulator cannot set up are reported
as skipped with the reason, never dropped.
"""

from __future__ import annotations

import csv
import re
import statistics
import tomllib
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from sim.config import SPREADS, RunConfig
from sim.errors import SimError
from sim.hardware.chip import Efficiency, all_chips, get_chip
from sim.hardware.instances import get_instance
from sim.metrics import RunMetrics, compute_metrics
from sim.run import simulate
from sim.workloads import get_model, preset_names
from sim.workloads.models import ENCODER
from sim.workloads.speculation import DRAFT_MODEL
from sim.workloads.transformer import CONVERT_TO_MHA, REPLICATE_TO_TP

CALIBRATION = Path(__file__).with_name("calibration")
PUBLISHED = CALIBRATION / "published.csv"
PUBLISHED_2025 = CALIBRATION / "published-2025-2026.csv"
HELD_OUT = CALIBRATION / "held-out.csv"  # published figures nothing is fitted on (calibration/README.md)
HELD_OUT_MOE = CALIBRATION / "held-out-moe.csv"  # mixture-of-experts serving figures nothing is fitted on
SETUPS_2025 = CALIBRATION / "setups-2025-2026.toml"
RECIPES = CALIBRATION / "recipes-training.toml"
TASKS = CALIBRATION / "benchmark-tasks.toml"
VALIDATION_EVENTS = 0  # validation reads metrics only: no events are kept

# what each published metric is, in the simulator's terms
METRICS_2024 = {"latency_ms_p50": "latency_ms", "throughput_per_s": "throughput", "ttft_ms_p50": "ttft_ms",
                "tpot_ms_p50": "tpot_ms", "per_token_ms_p50": "per_token_ms", "train_seq_per_s_cluster": "train_per_s"}
METRICS_2025 = {"median_tpot_ms": "tpot_ms", "median_ttft_ms": "ttft_ms", "ttft_ms_p99": "ttft_ms",
                "sync_ttft_ms": "ttft_ms", "sync_itl_ms": "tpot_ms", "e2e_latency_s_p99": "e2e_s",
                "output_throughput": "output_tok_s", "request_output_throughput_p99": "request_tok_s",
                "throughput_output_tok_s": "output_tok_s", "throughput_itl_ms": "tpot_ms"}
# a serving benchmark's figure by what its name says, for names the table above does not list
# (vLLM's, guidellm's, LLMPerf's: mean_itl_ms, p50_ttft_s, ...), each with the unit its name ends in
METRIC_WORDS_2025 = (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "tpot_ms"), ("inter_token", "tpot_ms"),
                     ("e2e", "e2e_s"), ("request_output_throughput", "request_tok_s"),
                     ("output_throughput", "output_tok_s"), ("throughput_output", "output_tok_s"))
SERVING_METRICS = ("output_tok_s",)  # figures only a serving run (many requests on one server) has
GUIDELLM_0_1 = "guidellm 0.1.0"  # the benchmark tool of optimum-neuron's vLLM runs (setups-2025-2026.toml client)
TNX = "transformers-neuronx"  # the stack of the benchmark pages' decoder rows (sim/stacks.py)
MODEL_NAMES = {"distilbert-base": "distilbert", "llama-3.1-8b-instruct": "llama-3.1-8b"}


@dataclass(frozen=True)
class Row:
    """One published figure, with the setup its publication states."""

    model: str
    instance: str
    metric: str  # latency_ms, throughput, ttft_ms, tpot_ms, e2e_s, train_per_s, ...
    measured: float
    source: str
    config: RunConfig | None  # the simulation that reproduces it; None when it cannot be set up
    skip: str = ""  # why not, when config is None
    independent: bool = True  # a data point of its own (not derived from another row of the run)
    duplicate: bool = False  # the same figure of the same setup as an earlier row (published on two pages)
    batch: int = 1
    seq: str = ""  # prompt/output or sequence, for the report
    published_metric: str = ""

    @property
    def generation(self) -> str:
        return self.instance.split(".")[0]

    @property
    def key(self) -> tuple:
        """Rows with equal keys differ only in the instance (for generation ratios)."""
        return self.model, self.batch, self.seq, self.metric, self.config.mode if self.config else ""


@dataclass(frozen=True)
class Result:
    row: Row
    simulated: float | None
    skipped: str = ""

    @property
    def error(self) -> float | None:
        """Signed relative error of the simulated value against the measurement."""
        if self.simulated is None or not self.row.measured:
            return None
        return relative_error(self.simulated, self.row.measured)

    @property
    def counted(self) -> bool:
        return self.error is not None and self.row.independent and not self.row.duplicate


def relative_error(simulated: float, measured: float) -> float:
    return (simulated - measured) / measured


def _int(text: str, default: int = 0) -> int:
    match = re.match(r"\s*(\d+)", text)
    return int(match.group(1)) if match else default


# what a page appends to a model's name that the preset's name leaves out (its casing, its
# checkpoint's variant), dropped one at a time until a preset matches
NAME_SUFFIXES = ("-uncased", "-cased", "-hf", "-discriminator", "-instruct", "-v0.1", "-v0.2", "-v0.3", "-v2")


def _preset(model: str) -> str:
    """The preset a published model name runs as: the name itself, an alias, or the name without
    its organisation (``google/``) and the suffixes of :data:`NAME_SUFFIXES`; unchanged when none
    is a preset (the row is then skipped, naming it)."""
    name = model.strip()
    if name in MODEL_NAMES or name in preset_names():
        return MODEL_NAMES.get(name, name)
    name = name.split("/")[-1].lower()
    name = name.removeprefix("meta-")  # Meta's checkpoints: Meta-Llama-3-8B
    while True:
        name = MODEL_NAMES.get(name, name)
        if name in preset_names():
            return name
        suffix = next((x for x in NAME_SUFFIXES if name.endswith(x)), None)
        if suffix is None:
            return model
        name = name[: -len(suffix)]


# weights stored narrower than the model runs (the decoder pages' "Weight Storage Data Type"):
# Transformers NeuronX keeps them so in device memory and dequantizes them on the engines
WEIGHT_STORAGE = {"int8": "int8-weights", "fp8": "fp8-weights", "f8e4m3": "fp8-weights"}


def _weight_quant(dtype_text: str) -> str | None:
    found = re.search(r"weights?\s*(?:storage)?\s*[:=]?\s*(\w+)", dtype_text, re.I)
    return WEIGHT_STORAGE.get(found[1].lower()) if found else None


# --- published.csv (the Neuron documentation's benchmark pages) -------------------------------

def _parallel_settings(text: str) -> dict[str, int]:
    """``key=value`` items of a training row's parallelism text (TP, PP, DP, nodes, microbatch, global_batch)."""
    return {k.strip(): _int(v) for k, v in re.findall(r"(\w+)=([\d]+)", text)}


AUTOCAST_NONE_SINCE = (2, 27)  # neuronx-cc's --auto-cast default: matmult before Neuron 2.27.0, none since


def _dtype(text: str, sdk: str, instance: str) -> tuple[str, str | None]:
    """The run's data type and compiler auto-cast from the page's data type column; an FP32 row
    without an auto-cast statement was compiled with its SDK's default (neuron-cc for inf1:
    the chip's own). "BF16 autocast" is PyTorch's: the model stays in FP32 and only the matmuls
    run in BF16 (normalisations, softmax and the loss in FP32), as the compiler's matmult
    auto-cast does."""
    t = text.lower()
    if t.startswith("bf16 autocast"):
        return "fp32", "matmult"
    if not t.startswith("fp32"):
        return ("fp16" if t.startswith("fp16") else "bf16"), None
    if "matmult" in t or instance.startswith("inf1"):
        return "fp32", "matmult" if "matmult" in t else None
    found = re.search(r"Neuron (\d+)\.(\d+)", sdk)
    version = (int(found[1]), int(found[2])) if found else (0, 0)
    return "fp32", "none" if version >= AUTOCAST_NONE_SINCE else "matmult"


@cache
def _benchmark_tasks() -> dict:
    with open(TASKS, "rb") as f:
        return tomllib.load(f)


def _tasks() -> list[dict]:
    return _benchmark_tasks()["task"]


def _generations() -> list[dict]:
    return _benchmark_tasks()["generation"]


def _generation(source: str) -> dict:
    """How a generating row's page runs it, as the script the row links states
    (``benchmark-tasks.toml`` [[generation]]): beams, compiled length, attention; {} if unstated."""
    return next((g for g in _generations() if any(page in source for page in g["pages"])), {})


def _copies(stated: int | None, source: str) -> int | None:
    """The model copies an encoder or vision row's run keeps busy: those the row states, at most
    the model counts its page's benchmark script asks NeuronPerf for (``benchmark-tasks.toml``
    [[copies]]); None (every NeuronCore) when the row states none and its page caps none."""
    cap = next((c["most"] for c in _benchmark_tasks().get("copies", []) if any(p in source for p in c["pages"])), None)
    if cap is None:
        return stated
    return cap if stated is None else min(stated, cap)


def _head(model: str, source: str) -> str:
    """What an encoder row's model returns to the host, as its benchmark page states
    (``benchmark-tasks.toml``; the last entry that matches); the simulator's default otherwise."""
    head = "classifier"
    for task in _tasks():
        if any(page in source for page in task["pages"]) and (not task["models"] or model in task["models"]):
            head = task["head"]
    return head


INSTANCE_NAME = re.compile(r"\b((?:inf|trn)\d[a-z]?\.\d*x?large|trn\d-ultraserver[\w-]*)\b", re.I)


def _row_2024(r: dict[str, str]) -> Row:
    # the instance as a page writes it ("Inf2.48xlarge", "trn1.32xlarge/trn1n.32xlarge": the first)
    found = INSTANCE_NAME.search(r["instance"])
    r = {**r, "instance": found.group(1).lower() if found else r["instance"]}
    model, metric = _preset(r["model"]), METRICS_2024[r["metric"]]
    application, parallel = r["application"], r["parallelism"]
    batch, seq_in, seq_out = _int(r["batch"], 1), _int(r["seq_in"]), _int(r["seq_out"])
    cores = _int(r["cores_per_model_or_tp"]) or None
    dtype, autocast = _dtype(r["dtype"], r["sdk"], r["instance"])
    seq = f"{seq_in}/{seq_out}" if seq_out else str(seq_in)
    common = dict(model=model, instance=r["instance"], metric=metric, measured=float(r["value"]),
                  source=r["source"], batch=batch, seq=seq, published_metric=r["metric"])
    skip = ""
    if model not in preset_names():
        skip = f"no preset for {r['model']}"
    elif parallel == "pipeline":
        skip = "NeuronCore Pipeline (layers split over cores, weights held on chip) is not modelled yet"
    elif metric == "train_per_s" and ("TP=" in parallel or "PP=" in parallel) and _recipe(model, r["instance"]) is None:
        skip = "tensor/pipeline-parallel training without a recipe in recipes-training.toml"
    if skip:
        return Row(**common, config=None, skip=skip, independent=metric not in ("throughput",))
    if metric == "train_per_s" and ("TP=" in parallel or "PP=" in parallel):
        return Row(**common, config=_recipe_config(model, r, batch, seq_in, dtype, autocast))
    if metric == "train_per_s":
        p = _parallel_settings(parallel)
        nodes = max(1, p.get("nodes", 1))
        cores_total = 32 * nodes  # "32xNC DP" on trn1.32xlarge: every NeuronCore of every node
        accum = max(1, p.get("global_batch", batch * cores_total) // (batch * cores_total))
        cfg = RunConfig(model=model, instance=r["instance"], mode="training", batch=batch, seq=seq_in or None,
                        dtype=dtype, autocast=autocast, grad_accum=accum, nodes=nodes)
        return Row(**common, config=cfg)
    if seq_out:  # a tensor-parallel decoder, static batching, attention as Transformers NeuronX runs it
        # (the compiler's ops, KV heads the cores do not divide converted to one per query head); or an
        # encoder-decoder as its page's script generates (its tokens a second are one call's)
        stated = _generation(r["source"])
        if stated and metric == "throughput":
            common["metric"] = metric = "request_tok_s"
        tnx = "Transformers NeuronX" in r["sdk"]
        cfg = RunConfig(model=model, instance=r["instance"], mode="decode", batch=batch, seq=seq_in,
                        new_tokens=seq_out, cores=cores, dtype=dtype, autocast=autocast,
                        attention="compiler" if tnx else stated.get("attention"),
                        gqa=CONVERT_TO_MHA if tnx else REPLICATE_TO_TP, stack=TNX if tnx else None,
                        quant=_weight_quant(r["dtype"]), beams=stated.get("beams", 1), max_seq=stated.get("max_seq"))
        return Row(**common, config=cfg, independent=metric in ("ttft_ms", "tpot_ms", "per_token_ms"))
    head = _head(model, r["source"]) if get_model(model).family == ENCODER else "classifier"
    cfg = RunConfig(model=model, instance=r["instance"], batch=batch, seq=seq_in or None, dtype=dtype,
                    autocast=autocast, copies=_copies(cores, r["source"]), head=head)
    real_time = application == "Real Time"
    independent = metric == ("latency_ms" if real_time else "throughput")
    return Row(**common, config=cfg, independent=independent)


def _recipe(model: str, instance: str) -> dict | None:
    with open(RECIPES, "rb") as f:
        recipes = tomllib.load(f)["recipe"]
    return next((x for x in recipes if x["model"] == model and x["instance"] == instance), None)


def _recipe_config(model: str, r: dict[str, str], batch: int, seq: int, dtype: str, autocast: str | None) -> RunConfig:
    """A tensor/pipeline-parallel training row: its parallelism as published, the rest as its recipe sets it."""
    p, recipe = _parallel_settings(r["parallelism"]), _recipe(model, r["instance"])
    if "dtype" in recipe:  # the recipe's precision setting is the one the run used
        dtype, autocast = recipe["dtype"], None
    tp, pp, dp = p.get("TP", 1), p.get("PP", 1), p.get("DP", 1)
    accum = max(1, p.get("global_batch", batch * dp) // (batch * dp))
    return RunConfig(model=model, instance=r["instance"], mode="training", batch=batch, seq=seq or None, dtype=dtype,
                     autocast=autocast, cores=tp, pipeline=pp, nodes=p.get("nodes", 1), grad_accum=accum,
                     zero1=recipe["zero1"], sequence_parallel=recipe["sequence_parallel"],
                     attention=recipe["attention"], checkpoint_activations=recipe["checkpoint_activations"],
                     checkpoint_granularity=recipe.get("checkpoint_granularity", "full"))


# --- published-2025-2026.csv (serving measurements) --------------------------------------------

def _setups() -> list[dict]:
    with open(SETUPS_2025, "rb") as f:
        return tomllib.load(f)["setup"]


def _metric_2025(name: str) -> tuple[str, float] | None:
    """The metric a 2025-2026 figure is, and the factor taking its value to that metric's unit;
    None for a figure the simulator does not produce."""
    if name in METRICS_2025:
        return METRICS_2025[name], 1.0
    metric = next((m for word, m in METRIC_WORDS_2025 if word in name.lower()), None)
    if metric is None:
        return None
    words = name.lower().split("_")
    unit = "ms" if "ms" in words else "s" if "s" in words else ""
    if metric.endswith("_ms") and unit == "s":
        return metric, 1e3
    if metric == "e2e_s" and unit == "ms":
        return metric, 1e-3
    return metric, 1.0


def _spread(text: str) -> int:
    """The spread a length states ("1500 (+-150, guidellm emulated)": 150), 0 without one."""
    found = re.search(r"\+-\s*(\d+)", text)
    return int(found.group(1)) if found else 0


def _users(text: str) -> int | None:
    """The users a batch column states ("32 compiled, 128 users", "2 (concurrency 2)"), if any."""
    found = re.search(r"(?:(\d+) users?\b|concurrency (\d+))", text)
    return int(found.group(1) or found.group(2)) if found else None


def _stated_setup(r: dict[str, str]) -> dict | None:
    """The setup of a row whose source has no entry in ``setups-2025-2026.toml``, from what the row
    itself states: its instance, tensor-parallel degree, compiled batch and users, prompt and
    output lengths; the compiled length the smallest power of two that holds them (with the
    longest lengths of a stated spread); NxD Inference's buckets, except with optimum-neuron,
    which compiles one graph of the compiled length; prompts in one pass. None without an instance."""
    found = INSTANCE_NAME.search(r["instance"])
    if found is None:
        return None
    seq, new_tokens, batch = _int(r["input_len"]), _int(r["output_len"]), _int(r["batch"], 1)
    spread = SPREADS * (_spread(r["input_len"]) + _spread(r["output_len"]))
    users = _users(r["batch"])
    concurrency = users if users is not None else (1 if r["metric"].startswith("sync") else batch)
    return dict(instance=found.group(1).lower(), tp=_int(r["tp"]) or None, batch=batch, concurrency=concurrency,
                max_seq=1 << max(0, seq + new_tokens + spread - 1).bit_length(),
                bucketing="optimum" not in (r["sdk"] + r["source"]).lower(), prefill_chunk=0, seq=seq,
                new_tokens=new_tokens, stack=_stated_stack(r))


def _stated_stack(r: dict[str, str]) -> str:
    """The serving stack a 2025-2026 row names in its software or source: optimum-neuron's, vLLM on
    Neuron, else NxD Inference offline."""
    text = (r["sdk"] + " " + r["source"]).lower()
    return "optimum-neuron" if "optimum" in text else "vllm" if "vllm" in text else "nxd-inference"


def _lengths(buckets: list[int] | None) -> tuple[int, ...] | None:
    return tuple(buckets) if buckets else None


def _row_2025(r: dict[str, str], setups: list[dict]) -> Row:
    published_model = r["model"]
    model = _preset(published_model.split(" + ")[0])
    metric, factor = _metric_2025(r["metric"])
    value = float(r["value"]) * factor
    setup = next((s for s in setups if s["source"] in r["source"]), None) or _stated_setup(r)
    common = dict(model=model, instance=setup["instance"] if setup else r["instance"], metric=metric,
                  measured=value, source=r["source"], batch=setup["batch"] if setup else _int(r["batch"], 1),
                  seq=f"{r['input_len'].split()[0]}/{r['output_len'].split()[0]}", published_metric=r["metric"])
    skip = ""
    speculative = " + " in published_model  # the model and its draft
    if speculative:
        skip = _speculation_skip(setup.get("speculation") if setup else None)
    elif setup is None:
        skip = "no instance named, and no setup for this source in setups-2025-2026.toml"
    elif model not in preset_names():
        skip = f"no preset for {published_model}"
    if skip:
        return Row(**common, config=None, skip=skip, independent=metric != "request_tok_s")
    # the users the row states ("32 compiled, 128 users"), else its source's
    users = _users(r["batch"])
    concurrency = users if users is not None else setup["concurrency"]
    if setup.get("client") == GUIDELLM_0_1 and concurrency > 1:
        # its scheduler (scheduler/base.py, _run_async) starts request i only while
        # i + 1 - completed < max_concurrency: one request fewer in flight than its users
        concurrency -= 1
    if r["metric"].startswith("throughput_"):  # a guidellm throughput run: what its source states of it
        setup = {**setup, **setup.get("throughput", {})}
    # one user alone is what decode mode simulates; several users, or a server's rates, a serving run
    serving = concurrency > 1 or metric in SERVING_METRICS
    spreads = {}
    if serving:  # the spread of the lengths the row states ("1500 (+-150, guidellm emulated)")
        spreads = {key: _spread(text) for key, text in (("seq_spread", r["input_len"]),
                                                         ("new_tokens_spread", r["output_len"]))}
    cfg = RunConfig(model=model, instance=setup["instance"], mode="serve" if serving else "decode",
                    batch=setup["batch"], seq=setup["seq"], new_tokens=setup["new_tokens"], cores=setup["tp"],
                    concurrency=concurrency, max_seq=setup["max_seq"], bucketing=setup["bucketing"],
                    prefill_chunk=setup["prefill_chunk"], requests=setup.get("requests") if serving else None,
                    context_buckets=_lengths(setup.get("context_buckets")),
                    token_buckets=_lengths(setup.get("token_buckets")),
                    nki_kernels=tuple(setup.get("nki_kernels", ())),
                    **({"optlevel": setup["optlevel"]} if "optlevel" in setup else {}),
                    sequence_parallel=setup.get("sequence_parallel", False), stack=setup["stack"],
                    sampling=setup.get("sampling"), **spreads,
                    **(_speculation(setup["speculation"]) if speculative else {}))
    return Row(**common, config=cfg, independent=metric != "request_tok_s")


def _speculation_skip(stated: dict | None) -> str:
    """Why a speculative row is not simulated ("" when it is): its source's setup states no
    speculation, or no acceptance, which is the draft's, the model's and the data's: an input
    taken from what the publication states, never from its measured times."""
    if stated is None:
        return "no speculative setup for this source in setups-2025-2026.toml"
    if "acceptance" not in stated:
        return ("its source states no acceptance rate, which is the draft's, the model's and the data's, not the "
                "chip's: an input a simulation takes from the publication, never from its measured times")
    return ""


def _speculation(stated: dict) -> dict:
    """The RunConfig fields of the speculative run a source states (``setups-2025-2026.toml``
    speculation): vLLM's method and num_speculative_tokens, NxD Inference's fused speculation, the
    draft model, and the acceptance its benchmark reported at each draft position."""
    draft = stated.get("draft") if stated["method"] == DRAFT_MODEL else None
    return dict(spec_method=stated["method"], spec_k=stated["num_speculative_tokens"],
                spec_acceptance=tuple(stated["acceptance"]), fused_speculation=stated.get("fused", False),
                draft=_preset(draft) if draft else None)


def read_rows(path: Path = PUBLISHED, path_2025: Path | None = PUBLISHED_2025) -> list[Row]:
    """Every published figure of both tables, as :class:`Row` s."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = _duplicates([_row_2024(r) for r in csv.DictReader(f) if r["metric"] in METRICS_2024])
    if path_2025 is not None:
        setups = _setups()
        with open(path_2025, newline="", encoding="utf-8") as f:
            rows += _derived_throughputs([_row_2025(r, setups) for r in csv.DictReader(f) if _metric_2025(r["metric"])])
    return rows


def read_held_out() -> list[Row]:
    """The published figures no residual is fitted on (``held-out.csv``, and the mixtures of experts'
    serving figures of ``held-out-moe.csv``): how the simulator does on measurements it was not
    tuned to."""
    return read_rows(HELD_OUT, None) + read_held_out_moe()


def read_held_out_moe() -> list[Row]:
    """The mixture-of-experts serving figures no residual is fitted on (``held-out-moe.csv``, in
    ``published-2025-2026.csv``'s schema, their setups in ``setups-2025-2026.toml``)."""
    setups = _setups()
    with open(HELD_OUT_MOE, newline="", encoding="utf-8") as f:
        return _derived_throughputs([_row_2025(r, setups) for r in csv.DictReader(f) if _metric_2025(r["metric"])])


def _duplicates(rows: list[Row]) -> list[Row]:
    """``rows`` with each figure that repeats an earlier row's (the same model, instance, batch,
    lengths, metric and value: Llama-2-70B's batch-1 runs are on both the latency and the
    throughput pages) marked a duplicate: one measurement, counted once."""
    seen: set[tuple] = set()
    out = []
    for r in rows:
        key = (r.model, r.instance, r.batch, r.seq, r.metric, r.measured)
        out.append(replace(r, duplicate=True) if key in seen else r)
        seen.add(key)
    return out


def _derived_throughputs(rows: list[Row]) -> list[Row]:
    """``rows`` with the output throughputs of runs whose TTFT and TPOT are published too marked
    derived: their users wait for their last request, so the throughput follows from those two."""
    def run(r: Row) -> tuple:
        return r.source, r.model, r.instance, r.seq, r.config.concurrency if r.config else None

    published = {(run(r), r.metric) for r in rows}
    return [replace(r, independent=False)
            if r.metric == "output_tok_s" and {(run(r), "ttft_ms"), (run(r), "tpot_ms")} <= published else r
            for r in rows]


# --- simulation ----------------------------------------------------------------------------------

def simulated_value(row: Row, met: RunMetrics) -> float:
    """The simulated counterpart of ``row``'s published metric."""
    m = row.metric
    if m == "latency_ms":
        return met.latency_s * 1e3
    if m == "ttft_ms":
        return met.time_to_first_token_s * 1e3
    if m == "tpot_ms":
        return met.per_token_s * 1e3
    if m == "per_token_ms":  # a whole generation's latency over the tokens it generated
        return met.latency_s / row.config.new_tokens * 1e3
    if m == "e2e_s":
        return met.latency_s
    if m == "request_tok_s":
        return row.config.new_tokens / met.latency_s
    if m == "output_tok_s":  # the server's, one copy
        return met.serving["output_tokens_per_s"]
    return met.throughput_per_s


Residuals = Mapping[str, Mapping[str, float]]  # residual values by chip key, "default" for every chip


def efficiency_for(chip_key: str, residuals: Residuals | None) -> Efficiency | None:
    """``chip_key``'s efficiency table with ``residuals`` (its own table over the default) in place."""
    if not residuals:
        return None
    values = {**residuals.get("default", {}), **residuals.get(chip_key, {})}
    return replace(all_chips()[chip_key].efficiency, **values)


def _metrics(cfg: RunConfig, residuals: Residuals | None) -> RunMetrics | str:
    try:
        chip = get_chip(cfg.chip).key if cfg.chip else get_instance(cfg.instance).chip.key
        trace = simulate(cfg, max_events=VALIDATION_EVENTS, efficiency=efficiency_for(chip, residuals))
        return compute_metrics(trace)
    except SimError as exc:
        return str(exc)


def validate(rows: Iterable[Row], residuals: Residuals | None = None, workers: int = 1) -> list[Result]:
    """Simulate every row (identical setups once), with ``residuals`` replacing the data file's,
    on ``workers`` processes."""
    rows = list(rows)
    configs = list(dict.fromkeys(r.config for r in rows if r.config is not None))
    if workers > 1 and len(configs) > 1:
        with ProcessPoolExecutor(workers) as pool:
            done = dict(zip(configs, pool.map(_metrics, configs, [residuals] * len(configs)), strict=True))
    else:
        done = {cfg: _metrics(cfg, residuals) for cfg in configs}
    out = []
    for row in rows:
        met = done.get(row.config) if row.config is not None else row.skip
        out.append(Result(row, None, met) if isinstance(met, str) else Result(row, simulated_value(row, met)))
    return out


# --- summaries -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    compared: int  # independent data points simulated
    derived: int  # rows following from another row of the same run
    duplicates: int  # rows repeating an earlier row's figure
    skipped: int
    median_abs_error: float
    ratio_pairs: int
    median_abs_ratio_error: float


def generation_ratios(results: list[Result]) -> list[tuple[Result, Result, float]]:
    """Pairs of independent rows that differ only in the chip generation, with the error of the
    simulated ratio against the measured ratio."""
    by_key: dict[tuple, list[Result]] = {}
    for r in results:
        if r.counted:
            by_key.setdefault(r.row.key, []).append(r)
    pairs = []
    for group in by_key.values():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if a.row.generation != b.row.generation:
                    measured = a.row.measured / b.row.measured
                    pairs.append((a, b, relative_error(a.simulated / b.simulated, measured)))
    return pairs


def summarise(results: list[Result]) -> Summary:
    errors = [abs(r.error) for r in results if r.counted]
    ratios = [abs(e) for _, _, e in generation_ratios(results)]
    derived = sum(1 for r in results if r.error is not None and not r.row.independent)
    duplicates = sum(1 for r in results if r.error is not None and r.row.independent and r.row.duplicate)
    return Summary(len(errors), derived, duplicates, sum(1 for r in results if r.simulated is None),
                   statistics.median(errors) if errors else float("nan"), len(ratios),
                   statistics.median(ratios) if ratios else float("nan"))


@dataclass(frozen=True)
class Group:
    """The independent rows of one chip generation and metric: where the model is close and where not."""

    generation: str
    metric: str
    rows: int
    median_error: float  # signed: below zero, the simulator is faster (or reports less) than measured
    median_abs_error: float


def by_group(results: list[Result]) -> list[Group]:
    groups: dict[tuple[str, str], list[float]] = {}
    for r in results:
        if r.counted:
            groups.setdefault((r.row.generation, r.row.metric), []).append(r.error)
    return [Group(gen, metric, len(e), statistics.median(e), statistics.median(map(abs, e)))
            for (gen, metric), e in sorted(groups.items())]


def group_error(results: list[Result], generation: str, metric: str) -> float | None:
    """The median absolute error of one generation's independent rows of one metric."""
    for g in by_group(results):
        if (g.generation, g.metric) == (generation, metric):
            return g.median_abs_error
    return None


def report(results: list[Result]) -> str:
    """The error by generation and metric, every row, the generation ratios and the summary (Markdown)."""
    lines = ["| generation | metric | independent rows | median error | median absolute error |",
             "|---|---|---:|---:|---:|"]
    lines += [f"| {g.generation} | {g.metric} | {g.rows} | {100 * g.median_error:+.1f}% | "
              f"{100 * g.median_abs_error:.1f}% |" for g in by_group(results)]
    lines += ["", "| model | instance | batch | seq | published metric | measured | simulated | error | counted |",
              "|---|---|---:|---|---|---:|---:|---:|---|"]
    for r in results:
        row = r.row
        sim = f"{r.simulated:,.2f}" if r.simulated is not None else f"skipped: {r.skipped}"
        err = f"{100 * r.error:+.1f}%" if r.error is not None else ""
        counted = ("yes" if r.counted else "" if r.error is None
                   else "derived" if not row.independent else "duplicate")
        lines.append(f"| {row.model} | {row.instance} | {row.batch} | {row.seq} | {row.published_metric} "
                     f"| {row.measured:,.2f} | {sim} | {err} | {counted} |")
    pairs = generation_ratios(results)
    if pairs:
        lines += ["", "| model | metric | batch | seq | instances | measured ratio | simulated ratio | error |",
                  "|---|---|---:|---|---|---:|---:|---:|"]
        for a, b, e in pairs:
            lines.append(f"| {a.row.model} | {a.row.metric} | {a.row.batch} | {a.row.seq} "
                         f"| {a.row.instance} / {b.row.instance} | {a.row.measured / b.row.measured:.3f} "
                         f"| {a.simulated / b.simulated:.3f} | {100 * e:+.1f}% |")
    s = summarise(results)
    median = f"{100 * s.median_abs_error:.1f}%" if s.compared else "none (no row compared)"
    ratios = (f"{s.ratio_pairs} pairs, median absolute error {100 * s.median_abs_ratio_error:.1f}%" if s.ratio_pairs
              else "none (no workload measured on two generations)")
    lines += ["", f"Independent data points compared: {s.compared} (plus {s.derived} derived and {s.duplicates} "
                  f"duplicate rows shown, not counted); skipped: {s.skipped}. Median absolute error: {median}. "
                  f"Generation ratios: {ratios}."]
    return "\n".join(lines)
