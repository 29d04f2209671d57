"""Seeded corpora of damaged and hostile files, shared by the loader's fuzz harness
(``tests/sim/test_fuzz.py``, ``bench/bench_fuzz.py``) and the app's (``tests/neuronviz/test_app.py``)."""

import copy
import io
import json
import random
import zipfile
from collections.abc import Iterator

# values a hostile field may hold instead of its own
ODD_VALUES = (None, "", "x", [], {}, [1, 2], {"a": 1}, True, -1, 0, 10**30, -(10**30), 1e308, 0.5, "NaN", [None])


def mutate_value(rng: random.Random, value):
    """``value`` with one field somewhere inside replaced by an odd value (or removed)."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(sorted(value, key=str))
        out = dict(value)
        if rng.random() < 0.2:
            del out[key]
        else:
            out[key] = mutate_value(rng, value[key])
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = mutate_value(rng, out[i])
        return out
    return rng.choice(ODD_VALUES)


def _mutated_manifest(rng: random.Random, data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        manifest = mutate_value(rng, json.loads(zin.read("manifest.json")))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as zout:
            for info in zin.infolist():
                body = json.dumps(manifest).encode() if info.filename == "manifest.json" else zin.read(info.filename)
                zout.writestr(info.filename, body)
    return out.getvalue()


def nvtrace_cases(native: bytes, seed: int, count: int) -> Iterator[bytes]:
    """Damaged versions of the .nvtrace file ``native``: bytes flipped anywhere, cut short or with
    garbage appended, or a manifest whose fields hold values of other types and ranges."""
    rng = random.Random(20261125 + seed)
    for case in range(count):
        kind = case % 3
        if kind == 0:
            data = bytearray(native)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            yield bytes(data)
        elif kind == 1:
            yield native[:rng.randrange(len(native))] if rng.random() < 0.7 else native + rng.randbytes(100)
        else:
            yield _mutated_manifest(rng, native)


def chrome_cases(doc: dict, seed: int, count: int) -> Iterator[str]:
    """Damaged versions of the Chrome trace document ``doc``: the run metadata neuronviz writes, or
    some events, with fields of other types and ranges; every fifth cut short."""
    rng = random.Random(7 + seed)
    events = doc["traceEvents"]
    for case in range(count):
        if case % 4 == 0:
            damaged = mutate_value(rng, copy.deepcopy(doc))
        else:
            damaged = {**doc, "traceEvents": list(events)}
            picked = damaged["traceEvents"]
            for _ in range(rng.randint(1, 5)):
                i = rng.randrange(len(picked))
                picked[i] = mutate_value(rng, picked[i])
        text = json.dumps(damaged)
        yield text[:rng.randrange(len(text))] if case % 5 == 0 else text
