"""Protocol Buffers' wire format over NumPy arrays: many small messages read and written at once.

A Perfetto trace is millions of packets of a few fields each; a generated class per packet costs
microseconds in Python objects alone. Here a batch of messages is read in rounds instead: each
round reads the next field of every message not yet at its end, with array operations, so a
batch costs a few rounds of NumPy calls however many messages it holds; the few messages left
after most have ended (an interning packet of thousands of names) are finished one field at a
time. Only the fields asked for (by tag: field number and wire type) are kept, a repeated one up
to a count per message; the others are skipped, whatever they hold, so nothing nested in them is
parsed (no depth to exhaust, no packed field of billions of entries expanded). Any damage to the
fields read (a varint of more than ten bytes, a length past its message's end, a wire type
protobuf does not have, a group) calls the reader's ``damaged``, which raises.

Writing is the reverse: rows of messages laid out as parts (fixed bytes, varints, fixed 64-bit
values, nested messages, records of their own), each part written into every row at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

VARINT, I64, LEN, I32 = 0, 1, 2, 5
MASK64 = (1 << 64) - 1
MAX_FIELD = (1 << 29) - 1
MAX_KEY = MAX_FIELD << 3 | 7
MAX_WANTED = 1 << 12  # tags asked for are below it (fields up to 511)
TAIL = 32  # messages left in a batch below which the rest are read one field at a time

Damaged = Callable[[], NoReturn]


def tag(field: int, wire: int) -> int:
    """The key a field is written under: its number and wire type."""
    return field << 3 | wire


# ---------------------------------------------------------------------------------------------
# reading


def varints(buf: np.ndarray, pos: np.ndarray, end: np.ndarray,
            inside: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The varints at ``pos``, each within its ``end`` (``inside``: each starts before it): their
    values, the positions after them, and a mask of the damaged ones (running past their end or
    over ten bytes), None if none is."""
    if not len(pos):
        return np.zeros(0, np.uint64), pos.copy(), None
    bad = None if inside else pos >= end
    if bad is not None and bad.any():
        pos = np.where(bad, 0, pos)
    else:
        bad = None
    b = buf[pos]
    longer = b >= 0x80
    if bad is None and not longer.any():  # the commonest: every one a byte
        return b.astype(np.uint64), pos + 1, None
    bad = np.zeros(len(pos), bool) if bad is None else bad
    value = (b & 0x7F).astype(np.uint64)
    after = pos + 1
    shift = 7
    while longer.all() and shift <= 63 and (after < end).all():  # each one longer still: whole arrays
        b = buf[after]
        value |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        after += 1
        longer = b >= 0x80
        shift += 7
    more = np.flatnonzero(longer & ~bad)
    while len(more):
        if shift > 63:
            bad[more] = True
            break
        q = after[more]
        over = q >= end[more]
        if over.any():
            bad[more[over]] = True
            more, q = more[~over], q[~over]
        b = buf[q]
        value[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = q + 1
        more = more[b >= 0x80]
        shift += 7
    return value, after, bad if bad.any() else None


def _fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The little-endian unsigned integers of ``width`` bytes at ``pos``."""
    raw = buf[pos[:, None] + np.arange(width)]
    return raw.view(f"<u{width}").ravel().astype(np.uint64)


def varint_at(data, at: int, end: int, damaged: Damaged) -> tuple[int, int]:
    """The varint at ``data[at]`` (bytes or a memoryview), within ``end``, and the position after it."""
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            damaged()
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value & MASK64, at
        shift += 7


@dataclass(frozen=True)
class Fields:
    """The occurrences of one field in a batch of messages, in the order of the bytes: the message
    each is in, its byte offset, its value (a varint's or fixed integer's; a length-delimited
    field's payload offset) and its payload's length (0 but for length-delimited fields).
    ``every``: each message has it once, the k-th occurrence in message k (the indices that
    :meth:`last` and :meth:`first` then give, taken by :meth:`pick` without a copy)."""

    msg: np.ndarray
    at: np.ndarray
    value: np.ndarray
    size: np.ndarray
    every: np.ndarray | None = None

    @staticmethod
    def empty() -> Fields:
        return Fields(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64))

    def last(self, n: int) -> np.ndarray:
        """Of each of ``n`` messages, the index of its last occurrence of the field (protobuf's
        rule for a field given twice), -1 where it has none."""
        if self.every is not None:
            return self.every
        return self._ends(n, np.append(np.diff(self.msg) != 0, True))

    def first(self, n: int) -> np.ndarray:
        """Of each of ``n`` messages, the index of its first occurrence, -1 where it has none."""
        if self.every is not None:
            return self.every
        return self._ends(n, np.diff(self.msg, prepend=-1) != 0)

    def _ends(self, n: int, edge: np.ndarray) -> np.ndarray:
        idx = np.full(n, -1, np.int64)
        if len(self.msg):
            k = np.flatnonzero(edge)
            idx[self.msg[k]] = k
        return idx

    def pick(self, idx: np.ndarray, column: str = "value") -> np.ndarray:
        """A column of the occurrences ``idx`` (from :meth:`last` or :meth:`first`), 0 where -1."""
        values = getattr(self, column)
        if idx is self.every:
            return values
        if not len(values):
            return np.zeros(len(idx), values.dtype)
        return np.where(idx >= 0, values[np.maximum(idx, 0)], 0).astype(values.dtype)

    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """The payloads of a length-delimited field: their starts and ends."""
        start = self.value.astype(np.int64)
        return start, start + self.size

    def capped(self, cap: int) -> Fields:
        """The first ``cap`` occurrences in each message."""
        if not len(self.msg):
            return self
        first = np.flatnonzero(np.diff(self.msg, prepend=-1) != 0)
        rank = np.arange(len(self.msg)) - np.repeat(first, np.diff(np.append(first, len(self.msg))))
        return self.where(rank < cap)

    def where(self, keep: np.ndarray) -> Fields:
        if keep is self.every:
            return self
        return Fields(self.msg[keep], self.at[keep], self.value[keep], self.size[keep])

    @staticmethod
    def join(parts: list[Fields]) -> Fields:
        """Occurrences of several fields (or forms of one) in one list, in the order of the bytes."""
        parts = [p for p in parts if len(p.msg)]
        if not parts:
            return Fields.empty()
        if len(parts) == 1:
            return parts[0]
        at = np.concatenate([p.at for p in parts])
        o = np.argsort(at, kind="stable")
        return Fields(*(np.concatenate([getattr(p, k) for p in parts])[o] for k in ("msg", "at", "value", "size")))


def scan(buf: np.ndarray, start: np.ndarray, end: np.ndarray, wanted: set[int], damaged: Damaged,
         caps: dict[int, int] | None = None) -> dict[int, Fields]:
    """The fields with a tag in ``wanted`` (each under :data:`MAX_WANTED`) of the messages
    ``buf[start[i]:end[i]]`` (spans in increasing order, apart), message ``i`` by index; a tag in
    ``caps`` kept at most that many times a message. Every field read over is checked, kept or not."""
    caps = caps or {}
    tags = sorted(wanted)
    slot_of = np.zeros(MAX_WANTED + 1, np.intp)  # a wanted tag's place in ``tags``, plus one (0: not wanted)
    slot_of[tags] = np.arange(1, len(tags) + 1)
    kept: dict[int, list[tuple[np.ndarray, ...]]] = {t: [] for t in tags}
    counts = {t: np.zeros(len(start), np.int64) for t in caps}
    msg = np.flatnonzero(end > start)
    pos, stop = start[msg].astype(np.int64), end[msg].astype(np.int64)
    while len(msg):
        if len(msg) <= TAIL:
            _scan_tail(buf, msg, pos, stop, kept, damaged, caps, counts)
            break
        at = pos
        key, pos, bad = varints(buf, pos, stop, inside=True)
        if bad is not None or key.min() < 8 or key.max() > MAX_KEY:  # field 0, or over protobuf's last
            damaged()
        wire = (key & np.uint64(7)).astype(np.intp)
        count = np.bincount(wire, minlength=8)
        if count[[3, 4, 6, 7]].any():  # groups (no Perfetto message has them) and wire types protobuf lacks
            damaged()
        if count[wire[0]] == len(wire):  # a round of one wire type: the commonest
            value, size, after = _values(buf, int(wire[0]), pos, stop, damaged)
        else:
            value, size, after = np.zeros(len(msg), np.uint64), np.zeros(len(msg), np.int64), pos.copy()
            for w in np.flatnonzero(count).tolist():
                k = np.flatnonzero(wire == w)
                value[k], size[k], after[k] = _values(buf, w, pos[k], stop[k], damaged)
        slot = slot_of[np.minimum(key, MAX_WANTED).astype(np.intp)]
        present = np.bincount(slot, minlength=len(tags) + 1)
        for s in np.flatnonzero(present[1:]).tolist():
            t = tags[s]
            sel = np.flatnonzero(slot == s + 1) if present[s + 1] < len(slot) else np.arange(len(slot))
            if t in caps:
                c = counts[t]
                c[msg[sel]] += 1
                sel = sel[c[msg[sel]] <= caps[t]]
            kept[t].append((msg[sel], at[sel], value[sel], size[sel]))
        live = after < stop
        if not live.all():
            msg, after, stop = msg[live], after[live], stop[live]
        pos = after
    return {t: _joined(parts, len(start)) for t, parts in kept.items()}


def _values(buf: np.ndarray, wire: int, pos: np.ndarray, stop: np.ndarray,
            damaged: Damaged) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The values of fields of one wire type whose keys end at ``pos``: the value (a length-delimited
    field's payload offset), the payload's length, and where the next field starts."""
    if wire == VARINT:
        value, after, bad = varints(buf, pos, stop)
        if bad is not None:
            damaged()
        return value, np.zeros(len(pos), np.int64), after
    if wire == LEN:
        n, body, bad = varints(buf, pos, stop)
        if bad is not None or (n > (stop - body).astype(np.uint64)).any():
            damaged()
        size = n.astype(np.int64)
        return body.astype(np.uint64), size, body + size
    width = 8 if wire == I64 else 4
    if (pos + width > stop).any():
        damaged()
    return _fixed(buf, pos, width), np.zeros(len(pos), np.int64), pos + width


def _joined(parts: list[tuple[np.ndarray, ...]], n: int) -> Fields:
    """One field's occurrences in ``n`` messages, gathered round by round, in the order of the bytes."""
    if not parts:
        return Fields.empty()
    if len(parts) == 1:
        msg, at, value, size = parts[0]
        once = len(msg) == n and bool((np.diff(msg) > 0).all())  # n of n messages, none twice: each once
        return Fields(msg, at, value, size, msg if once else None)
    msg, at, value, size = (np.concatenate([p[i] for p in parts]) for i in range(4))
    o = np.argsort(msg, kind="stable")  # each round's in message order, a message's rounds in order
    return Fields(msg[o], at[o], value[o], size[o])


def _scan_tail(buf: np.ndarray, msgs: np.ndarray, starts: np.ndarray, stops: np.ndarray, kept: dict, damaged: Damaged,
               caps: dict[int, int], counts: dict[int, np.ndarray]) -> None:
    """:func:`scan` for the last few messages, a field at a time."""
    data = memoryview(buf)
    found: dict[int, list[tuple[int, int, int, int]]] = {t: [] for t in kept}
    for m, at, stop in zip(msgs.tolist(), starts.tolist(), stops.tolist(), strict=True):
        seen = {t: int(c[m]) for t, c in counts.items()}  # occurrences kept in the rounds before
        for here, key, value, size in walk(data, at, stop, damaged):
            if key in found:
                if key in caps:
                    seen[key] += 1
                    if seen[key] > caps[key]:
                        continue
                found[key].append((m, here, value, size))
    for t, rows in found.items():
        if rows:
            m, at, value, size = zip(*rows, strict=True)
            kept[t].append((np.array(m, np.int64), np.array(at, np.int64), np.array(value, np.uint64),
                            np.array(size, np.int64)))


def walk(data, at: int, stop: int, damaged: Damaged) -> Iterator[tuple[int, int, int, int]]:
    """The fields of the message ``data[at:stop]`` (bytes or a memoryview), one at a time, checked
    as :func:`scan` checks them: each one's offset, tag, value (a length-delimited field's
    payload offset) and payload length."""
    while at < stop:
        here = at
        key, at = varint_at(data, at, stop, damaged)
        wire, field = key & 7, key >> 3
        size = 0
        if field == 0 or field > MAX_FIELD:
            damaged()
        if wire == VARINT:
            value, at = varint_at(data, at, stop, damaged)
        elif wire == LEN:
            size, value = varint_at(data, at, stop, damaged)
            at = value + size
            if at > stop:
                damaged()
        elif wire in (I64, I32):
            width = 8 if wire == I64 else 4
            if at + width > stop:
                damaged()
            value = int.from_bytes(data[at:at + width], "little")
            at += width
        else:
            damaged()
        yield here, key, value, size


def message(data, at: int, stop: int, damaged: Damaged) -> dict[int, tuple[int, int, int]]:
    """The last occurrence of each field of one message (a few read at a time): by tag, its
    offset, value and payload length."""
    return {key: (here, value, size) for here, key, value, size in walk(data, at, stop, damaged)}


def packed_varints(buf: np.ndarray, f: Fields, cap: int, damaged: Damaged) -> Fields:
    """The first ``cap`` varints of each packed payload in ``f`` (the rest not read)."""
    msg, at, end = f.msg, *f.spans()
    parts = []
    for _ in range(cap):
        live = at < end
        msg, at, end = msg[live], at[live], end[live]
        if not len(msg):
            break
        value, after, bad = varints(buf, at, end)
        if bad is not None:
            damaged()
        parts.append((msg, at, value, np.zeros(len(msg), np.int64)))
        at = after
    return _joined(parts, -1)


def packed_fixed64(buf: np.ndarray, f: Fields, cap: int, damaged: Damaged) -> Fields:
    """The first ``cap`` fixed 64-bit values of each packed payload in ``f``."""
    if (f.size % 8).any():
        damaged()
    count = np.minimum(f.size // 8, cap)
    idx = np.repeat(np.arange(len(count)), count)
    offset = (np.arange(len(idx)) - np.repeat(np.cumsum(count) - count, count)) * 8
    at = f.value.astype(np.int64)[idx] + offset
    return Fields(f.msg[idx], at, _fixed(buf, at, 8), np.zeros(len(idx), np.int64))


def texts(buf: np.ndarray, start: np.ndarray, end: np.ndarray, limit: int) -> list[str]:
    """The strings of the payloads ``buf[start[i]:end[i]]``, read as UTF-8 (damage replaced) and
    cut to ``limit`` characters (at most four bytes a character are read of each)."""
    data = memoryview(buf)
    seen: dict[bytes, str] = {}
    out = []
    for a, b in zip(start.tolist(), np.minimum(end, start + 4 * limit).tolist(), strict=True):
        raw = bytes(data[a:b])
        text = seen.get(raw)
        if text is None:
            text = seen[raw] = raw.decode("utf-8", "replace")[:limit]
        out.append(text)
    return out


# ---------------------------------------------------------------------------------------------
# writing


def varint_bytes(value: int) -> bytes:
    """One unsigned value as a varint."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """The bytes each of ``values`` (unsigned) takes as a varint."""
    values = values.astype(np.uint64, copy=False)
    size = np.ones(len(values), np.int64)
    for k in range(1, 10):
        longer = values >= np.uint64(1 << 7 * k)
        if not longer.any():
            break
        size += longer
    return size


def _put_varints(out: np.ndarray, at: np.ndarray, values: np.ndarray) -> None:
    values = values.astype(np.uint64)
    while len(values):
        more = values >= 0x80
        out[at] = (values & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
        values, at = values[more] >> np.uint64(7), at[more] + 1


class Rows:
    """Messages, a row each, built part by part in the order they are written: fixed bytes,
    varints, fixed 64-bit values, records of their own, nested messages. A part may be in some
    rows only (a mask). Each part is written into every row at once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._parts: list[tuple[str, object, np.ndarray | None]] = []
        self._sizes: list[np.ndarray] = []
        self._total = np.zeros(n, np.int64)

    def raw(self, data: bytes, rows: np.ndarray | None = None) -> Rows:
        """The bytes ``data`` (a key, or a key and its value)."""
        return self._add("raw", data, rows, np.full(self.n, len(data), np.int64))

    def varint(self, values: np.ndarray, rows: np.ndarray | None = None) -> Rows:
        """A varint of each row's value (``values``: one a row, unsigned)."""
        values = values.astype(np.uint64)
        return self._add("varint", values, rows, varint_sizes(values))

    def fixed64(self, values: np.ndarray, rows: np.ndarray | None = None) -> Rows:
        """Each row's value as 8 little-endian bytes (an integer, or a double by its bits)."""
        bits = np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<"), copy=False)
        return self._add("fixed64", bits.view(np.uint8).reshape(-1, 8), rows, np.full(self.n, 8, np.int64))

    def records(self, row: np.ndarray, data: np.ndarray) -> Rows:
        """Records of bytes (``data``, one a line) written into the rows ``row`` (ascending), in order."""
        return self._add("records", (row, data), None, np.bincount(row, minlength=self.n) * data.shape[1])

    def message(self, key: bytes, inner: Rows, rows: np.ndarray | None = None) -> Rows:
        """The rows of ``inner`` as a length-delimited field under ``key``."""
        return self._add("message", (key, inner), rows, len(key) + varint_sizes(inner._total) + inner._total)

    def _add(self, kind: str, value: object, rows: np.ndarray | None, size: np.ndarray) -> Rows:
        if rows is not None:
            size = np.where(rows, size, 0)
        self._parts.append((kind, value, rows))
        self._sizes.append(size)
        self._total += size
        return self

    def tobytes(self) -> bytes:
        """The rows one after the other."""
        out = np.zeros(int(self._total.sum()), np.uint8)
        self._write(out, np.cumsum(self._total) - self._total, None)
        return out.tobytes()

    def _write(self, out: np.ndarray, base: np.ndarray, rows: np.ndarray | None) -> None:
        for (kind, value, own), size in zip(self._parts, self._sizes, strict=True):
            mask = own if rows is None else rows if own is None else rows & own
            at = base if mask is None else base[mask]
            if kind == "raw":
                for j, byte in enumerate(value):
                    out[at + j] = byte
            elif kind == "varint":
                _put_varints(out, at, value if mask is None else value[mask])
            elif kind == "fixed64":
                out[at[:, None] + np.arange(8)] = value if mask is None else value[mask]
            elif kind == "records":
                row, data = value
                rank = np.arange(len(row)) - np.searchsorted(row, row, "left")
                if rows is not None:
                    row, data, rank = row[rows[row]], data[rows[row]], rank[rows[row]]
                out[(base[row] + rank * data.shape[1])[:, None] + np.arange(data.shape[1])] = data
            else:
                key, inner = value
                for j, byte in enumerate(key):
                    out[at + j] = byte
                _put_varints(out, at + len(key), inner._total if mask is None else inner._total[mask])
                inner._write(out, base + len(key) + varint_sizes(inner._total), mask)
            base = base + size
