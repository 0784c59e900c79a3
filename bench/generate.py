"""Deterministic GoldenGate op-modeled JSON workload for the benchmark.

One 12-column source table, ``BENCH.ORDERS``, keyed by ``ID``. :func:`generate` writes, into one
workload directory:

* ``preload.json``: one insert per key ``1..keys``, all with ``op_ts`` before the workload;
* ``preload.parquet``: the same rows as a typed table (to preload targets without parsing JSON);
* ``events.json``: the workload, one GoldenGate message per line, in ``op_ts``/``pos`` order:
  30% inserts (of keys absent at that point: deleted earlier, or new beyond the preloaded range),
  60% updates of present keys (half *full*: complete before and after images; half *partial*:
  complete before image, after image holding only ``ID`` and the changed columns), 10% deletes
  of present keys (before image only);
* ``expected.parquet``: the true final source table after preload and workload, sorted by ``ID``;
* ``meta.json``: the parameters and the counts of each kind of event.

The source is simulated without a per-event Python object: a short loop picks the key of each
event, and every column's value is then resolved by index arithmetic. For each column, the values
of the preload rows and one fresh candidate value per event sit in one array (preload row ``k`` at
``ID - 1``, event ``e`` at ``keys + e``); the state of a key after an event is, per column, the
candidate of the last event on that key that set the column, or the preload row if none did. The
JSON lines are assembled by polars from pre-formatted value fragments.

Run ``python -m bench.generate --events N --keys K --out DIR`` to generate one workload by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

TABLE = "BENCH.ORDERS"
KEY = "ID"

#: Source columns after ``ID``, with their Arrow types; dates are ``YYYY-MM-DD`` strings.
COLUMNS: dict[str, pa.DataType] = {
    "CUSTOMER_ID": pa.int64(),
    "ORDER_DATE": pa.string(),
    "SHIP_DATE": pa.string(),
    "STATUS": pa.string(),
    "CHANNEL": pa.string(),
    "QUANTITY": pa.int64(),
    "UNIT_PRICE": pa.decimal128(10, 2),
    "AMOUNT": pa.decimal128(12, 2),
    "DISCOUNT": pa.decimal128(10, 2),
    "PRIORITY": pa.int64(),
    "NOTE": pa.string(),
}
#: The full source schema, in column order.
SOURCE_SCHEMA = pa.schema([(KEY, pa.int64()), *COLUMNS.items()])

INSERT, UPDATE, DELETE = 0, 1, 2
OP_CODES = ("I", "U", "D")
OP_PROBABILITIES = (0.30, 0.60, 0.10)
PARTIAL_SHARE = 0.5  # share of updates whose after image carries only the changed columns
CHANGE_PROBABILITY = 0.15  # per column, for an update; one random column always changes
REINSERT_SHARE = 0.5  # share of inserts reusing a deleted key when one exists

PRELOAD_START_US = 1_703_980_800_000_000  # 2023-12-31 00:00:00 UTC
WORKLOAD_START_US = 1_704_067_200_000_000  # 2024-01-01 00:00:00 UTC
DATE_ORIGIN = np.datetime64("2020-01-01")
STATUSES = ("NEW", "PAID", "PACKED", "SHIPPED", "DELIVERED", "CANCELLED", "RETURNED")
CHANNELS = ("WEB", "STORE", "PHONE", "PARTNER")
SPECIAL_NOTES = ('customer said "leave at door"', "back\\slash path C:\\tmp", "café – ünïcode ✓")
CHUNK_EVENTS = 500_000  # events formatted and written per step

FILES = ("preload.json", "preload.parquet", "events.json", "expected.parquet", "meta.json")


@dataclass(frozen=True)
class Workload:
    """Paths of one generated workload."""

    directory: Path
    events: int
    keys: int

    @property
    def preload_json(self) -> Path:
        return self.directory / "preload.json"

    @property
    def preload_parquet(self) -> Path:
        return self.directory / "preload.parquet"

    @property
    def events_json(self) -> Path:
        return self.directory / "events.json"

    @property
    def expected_parquet(self) -> Path:
        return self.directory / "expected.parquet"

    @property
    def meta(self) -> dict[str, int]:
        """Parameters and counts recorded by :func:`generate`."""
        return json.loads((self.directory / "meta.json").read_text())

    def exists(self) -> bool:
        return all((self.directory / name).exists() for name in FILES)


def workload_dir(workdir: Path, events: int, keys: int, seed: int) -> Path:
    """The cache directory of one workload under ``workdir``."""
    return workdir / f"ogg_e{events}_k{keys}_s{seed}"


@dataclass
class _Column:
    """One column's values for preload rows and event candidates, in two forms."""

    typed: pa.Array  # for preload.parquet and expected.parquet
    fragments: pl.Series  # the same values as JSON text (``null``, ``12``, ``"x"``, ``1.50``)


def _with_nulls(values: pl.Series, nulls: np.ndarray | None) -> pl.Series:
    """``values`` with NULL where ``nulls`` is true."""
    if nulls is None:
        return values
    return pl.select(pl.when(pl.Series(nulls)).then(None).otherwise(values)).to_series()


def _decimal(cents: np.ndarray, nulls: np.ndarray | None, dtype: pa.Decimal128Type) -> _Column:
    """Decimals with 2 places from integer cents; JSON text such as ``17520.00``."""
    units = pl.Series(cents // 100).cast(pl.String)
    text = _with_nulls(units + "." + pl.Series(cents % 100).cast(pl.String).str.zfill(2), nulls)
    return _Column(text.to_arrow().cast(pa.string()).cast(dtype), text.fill_null("null"))


def _integer(values: np.ndarray, nulls: np.ndarray | None = None) -> _Column:
    series = _with_nulls(pl.Series(values, dtype=pl.Int64), nulls)
    return _Column(series.to_arrow(), series.cast(pl.String).fill_null("null"))


def _plain_string(values: pl.Series) -> _Column:
    """Strings that need no JSON escaping (dates, codes)."""
    return _Column(values.to_arrow().cast(pa.string()), ('"' + values + '"').fill_null("null"))


def _escaped_string(values: pl.Series) -> _Column:
    """Any strings: JSON text escaped as ``json.dumps`` does (non-ASCII kept as UTF-8)."""
    distinct = values.drop_nulls().unique().to_list()
    mapping = {value: json.dumps(value, ensure_ascii=False) for value in distinct}
    text = values.replace_strict(mapping, default=None, return_dtype=pl.String).fill_null("null")
    return _Column(values.to_arrow().cast(pa.string()), text)


def _choice(rng: np.random.Generator, pool: list[str], n: int, null_share: float = 0.0) -> pl.Series:
    """``n`` strings drawn from ``pool``; a ``null_share`` of them NULL."""
    picks = pl.Series(pool, dtype=pl.String).gather(rng.integers(0, len(pool), n))
    return _with_nulls(picks, rng.random(n) < null_share if null_share else None)


def _column_values(rng: np.random.Generator, n: int) -> dict[str, _Column]:
    """Random values for ``n`` rows of every non-key column."""
    dates = pl.Series(DATE_ORIGIN + rng.integers(0, 1500, n).astype("timedelta64[D]")).dt.strftime("%Y-%m-%d")
    ship = pl.Series(DATE_ORIGIN + rng.integers(0, 1530, n).astype("timedelta64[D]")).dt.strftime("%Y-%m-%d")
    ship = _with_nulls(ship, rng.random(n) < 0.25)
    words = ["fragile", "gift", "express", "backorder", "call first", "weekend", "invoice", "bulk"]
    notes = [f"note {i}: {words[i % len(words)]} {words[(i * 7) % len(words)]}" for i in range(2000)]
    notes += list(SPECIAL_NOTES)
    note_values = _choice(rng, notes, n, null_share=0.5)
    columns = {
        "CUSTOMER_ID": _integer(rng.integers(1, 500_001, n)),
        "ORDER_DATE": _plain_string(dates),
        "SHIP_DATE": _plain_string(ship),
        "STATUS": _plain_string(_choice(rng, list(STATUSES), n)),
        "CHANNEL": _plain_string(_choice(rng, list(CHANNELS), n)),
        "QUANTITY": _integer(rng.integers(1, 51, n)),
        "UNIT_PRICE": _decimal(rng.integers(50, 1_000_000, n), None, pa.decimal128(10, 2)),
        "AMOUNT": _decimal(rng.integers(0, 50_000_000, n), None, pa.decimal128(12, 2)),
        "DISCOUNT": _decimal(rng.integers(0, 50_001, n), rng.random(n) < 0.3, pa.decimal128(10, 2)),
        "PRIORITY": _integer(rng.integers(1, 6, n), rng.random(n) < 0.4),
        "NOTE": _escaped_string(note_values),
    }
    if list(columns) != list(COLUMNS):
        raise AssertionError("column generators out of step with COLUMNS")
    return columns


def _draw_ops(rng: np.random.Generator, events: int) -> np.ndarray:
    return rng.choice(np.array([INSERT, UPDATE, DELETE], dtype=np.int8), size=events, p=OP_PROBABILITIES)


def _assign_keys(ops: np.ndarray, keys: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pick the key of every event; return the keys and the IDs present at the end, sorted.

    Updates and deletes target a uniformly chosen present key; inserts reuse a deleted key
    (``REINSERT_SHARE`` of the time, when one exists) or take the next new ID. An update or
    delete drawn while no key is present becomes an insert (``ops`` is modified in place).
    """
    op_list = ops.tolist()
    pick = rng.random(len(op_list)).tolist()
    pick_deleted = rng.random(len(op_list)).tolist()
    present = list(range(1, keys + 1))
    deleted: list[int] = []
    next_id = keys + 1
    out = [0] * len(op_list)
    for i, op in enumerate(op_list):
        if op != INSERT and not present:
            op = op_list[i] = INSERT
        if op == UPDATE:
            out[i] = present[int(pick[i] * len(present))]
        elif op == DELETE:
            j = int(pick[i] * len(present))
            key = present[j]
            present[j] = present[-1]
            present.pop()
            deleted.append(key)
            out[i] = key
        elif deleted and pick[i] < REINSERT_SHARE:
            j = int(pick_deleted[i] * len(deleted))
            key = deleted[j]
            deleted[j] = deleted[-1]
            deleted.pop()
            present.append(key)
            out[i] = key
        else:
            present.append(next_id)
            out[i] = next_id
            next_id += 1
    ops[:] = np.array(op_list, dtype=np.int8)
    return np.array(out, dtype=np.int64), np.sort(np.array(present, dtype=np.int64))


def _change_masks(ops: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per column, whether each event sets it: inserts set all, updates some, deletes none."""
    forced = rng.integers(0, len(COLUMNS), len(ops))
    masks = {}
    for index, name in enumerate(COLUMNS):
        changed = (rng.random(len(ops)) < CHANGE_PROBABILITY) | (forced == index)
        masks[name] = (ops == INSERT) | ((ops == UPDATE) & changed)
    return masks


@dataclass
class _Sources:
    """Per column, the index (into the candidate arrays) of each event's before and after value."""

    before: dict[str, np.ndarray]
    after: dict[str, np.ndarray]


def _resolve(event_keys: np.ndarray, masks: dict[str, np.ndarray], keys: int) -> _Sources:
    """Resolve, per column, where each event's before and after values come from.

    Events are sorted by key (stably, so each key's events stay in workload order); a running
    maximum of "index of the last row that set the column" then finds, for every row, the last
    setter; if that setter belongs to another key, the key has not set the column in the
    workload yet, so the value is the preload row's (index ``ID - 1``).
    """
    n = len(event_keys)
    order = np.argsort(event_keys, kind="stable")
    sorted_keys = event_keys[order]
    same_as_previous = np.zeros(n, dtype=bool)
    same_as_previous[1:] = sorted_keys[1:] == sorted_keys[:-1]
    positions = np.arange(n)
    preload_index = sorted_keys - 1
    before: dict[str, np.ndarray] = {}
    after: dict[str, np.ndarray] = {}
    for name, mask in masks.items():
        last_setter = np.maximum.accumulate(np.where(mask[order], positions, -1))
        clipped = np.maximum(last_setter, 0)
        own = (last_setter >= 0) & (sorted_keys[clipped] == sorted_keys)
        after_sorted = np.where(own, keys + order[clipped], preload_index)
        before_sorted = np.where(same_as_previous, np.roll(after_sorted, 1), preload_index)
        after[name] = np.empty(n, dtype=np.int64)
        after[name][order] = after_sorted
        before[name] = np.empty(n, dtype=np.int64)
        before[name][order] = before_sorted
    return _Sources(before, after)


def _final_state(
    event_keys: np.ndarray, ops: np.ndarray, sources: _Sources, keys: int, present: np.ndarray
) -> dict[str, np.ndarray]:
    """Per column, the candidate index of each present key's final value (keys in ``present`` order)."""
    last_event = np.full(int(max(present.max(initial=0), event_keys.max(initial=0))) + 1, -1, dtype=np.int64)
    last_event[event_keys] = np.arange(len(event_keys))  # later events overwrite earlier ones
    touched = np.flatnonzero(last_event >= 0)
    deleted_last = touched[ops[last_event[touched]] == DELETE]
    alive = np.setdiff1d(np.union1d(np.arange(1, keys + 1), touched), deleted_last)
    if not np.array_equal(alive, present):
        raise AssertionError("simulation inconsistent: final key set differs from the key picker's")
    event_of_key = last_event[present]
    return {
        name: np.where(event_of_key >= 0, after[np.maximum(event_of_key, 0)], present - 1)
        for name, after in sources.after.items()
    }


def _object(id_text: pl.Expr, values: dict[str, pl.Expr]) -> pl.Expr:
    """``{"ID":..,"COL":..,...}`` from JSON fragments; NULL fragments (absent columns) are left out."""
    parts = [pl.lit('{"ID":'), id_text]
    for name, fragment in values.items():
        parts.append(pl.concat_str([pl.lit(f',"{name}":'), fragment]))
    parts.append(pl.lit("}"))
    return pl.concat_str(parts, ignore_nulls=True)


def _header(op: pl.Expr, op_ts_us: pl.Expr, pos: pl.Expr) -> pl.Expr:
    op_ts = op_ts_us.cast(pl.Datetime("us")).dt.strftime("%Y-%m-%d %H:%M:%S%.6f")
    current_ts = (
        (op_ts_us + 1_500_000 + (pos % 7) * 1000).cast(pl.Datetime("us")).dt.strftime("%Y-%m-%dT%H:%M:%S%.6f")
    )
    return pl.concat_str(
        [
            pl.lit(f'{{"table":"{TABLE}","op_type":"'),
            op,
            pl.lit('","op_ts":"'),
            op_ts,
            pl.lit('","current_ts":"'),
            current_ts,
            pl.lit('","pos":"'),
            pos.cast(pl.String).str.zfill(20),
            pl.lit(f'","primary_keys":["{KEY}"]'),
        ]
    )


def _write_lines(frame: pl.DataFrame, line: pl.Expr, handle: object) -> None:
    frame.select(line).write_csv(handle, include_header=False, quote_style="never")  # type: ignore[arg-type]


def _write_preload(path: Path, columns: dict[str, _Column], keys: int) -> None:
    ids = np.arange(1, keys + 1, dtype=np.int64)
    frame = pl.DataFrame({"id": ids, **{name: column.fragments[:keys] for name, column in columns.items()}})
    line = pl.concat_str(
        [
            _header(pl.lit("I"), PRELOAD_START_US + pl.col("id") * 1000, pl.col("id") - 1),
            pl.lit(',"after":'),
            _object(pl.col("id").cast(pl.String), {name: pl.col(name) for name in columns}),
            pl.lit("}"),
        ]
    )
    with path.open("wb") as handle:
        _write_lines(frame, line, handle)


def _write_events(
    path: Path,
    columns: dict[str, _Column],
    event_keys: np.ndarray,
    ops: np.ndarray,
    partial: np.ndarray,
    masks: dict[str, np.ndarray],
    sources: _Sources,
    keys: int,
) -> None:
    op = pl.col("op")
    is_partial = pl.col("partial")
    id_text = pl.col("id").cast(pl.String)
    before = _object(id_text, {name: pl.col(f"b_{name}") for name in columns})
    full_after = _object(id_text, {name: pl.col(f"a_{name}") for name in columns})
    partial_after = _object(
        id_text, {name: pl.when(pl.col(f"m_{name}")).then(pl.col(f"a_{name}")) for name in columns}
    )
    line = pl.concat_str(
        [
            _header(op, WORKLOAD_START_US + (pl.col("seq") // 4) * 1000, keys + pl.col("seq")),
            pl.when(op != "I").then(pl.concat_str([pl.lit(',"before":'), before])),
            pl.when(op != "D").then(
                pl.concat_str(
                    [pl.lit(',"after":'), pl.when(is_partial).then(partial_after).otherwise(full_after)]
                )
            ),
            pl.lit("}"),
        ],
        ignore_nulls=True,
    )
    op_text = pl.Series(list(OP_CODES), dtype=pl.String)
    with path.open("wb") as handle:
        for start in range(0, len(event_keys), CHUNK_EVENTS):
            stop = min(start + CHUNK_EVENTS, len(event_keys))
            data: dict[str, object] = {
                "seq": np.arange(start, stop, dtype=np.int64),
                "id": event_keys[start:stop],
                "op": op_text.gather(ops[start:stop]),
                "partial": partial[start:stop],
            }
            for name, column in columns.items():
                data[f"b_{name}"] = column.fragments.gather(sources.before[name][start:stop])
                data[f"a_{name}"] = column.fragments.gather(sources.after[name][start:stop])
                data[f"m_{name}"] = masks[name][start:stop]
            _write_lines(pl.DataFrame(data), line, handle)


def generate(directory: Path, events: int, keys: int, seed: int = 42) -> Workload:
    """Generate one workload into ``directory`` (replacing it); files appear only when complete."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    ops = _draw_ops(rng, events)
    event_keys, present = _assign_keys(ops, keys, rng)
    partial = (ops == UPDATE) & (rng.random(events) < PARTIAL_SHARE)
    masks = _change_masks(ops, rng)
    sources = _resolve(event_keys, masks, keys)
    columns = _column_values(rng, keys + events)
    final = _final_state(event_keys, ops, sources, keys, present)

    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    preload_ids = pa.array(np.arange(1, keys + 1, dtype=np.int64))
    preload = pa.Table.from_arrays(
        [preload_ids, *(column.typed.slice(0, keys) for column in columns.values())], schema=SOURCE_SCHEMA
    )
    pq.write_table(preload, staging / "preload.parquet")
    expected = pa.Table.from_arrays(
        [pa.array(present), *(columns[name].typed.take(pa.array(final[name])) for name in COLUMNS)],
        schema=SOURCE_SCHEMA,
    )
    pq.write_table(expected, staging / "expected.parquet")
    _write_preload(staging / "preload.json", columns, keys)
    _write_events(staging / "events.json", columns, event_keys, ops, partial, masks, sources, keys)
    counts = np.bincount(ops, minlength=3)
    meta = {
        "events": events,
        "keys": keys,
        "seed": seed,
        "inserts": int(counts[INSERT]),
        "updates": int(counts[UPDATE]),
        "partial_updates": int(partial.sum()),
        "deletes": int(counts[DELETE]),
        "expected_rows": len(present),
        "events_bytes": (staging / "events.json").stat().st_size,
    }
    (staging / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(staging, directory)
    print(
        f"generated {directory}: {events:,} events ({meta['inserts']:,} I, {meta['updates']:,} U of which "
        f"{meta['partial_updates']:,} partial, {meta['deletes']:,} D) over {keys:,} preloaded keys, "
        f"{len(present):,} rows expected, in {time.perf_counter() - started:.1f} s"
    )
    return Workload(directory, events, keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, required=True, help="directory to (re)generate")
    args = parser.parse_args()
    generate(args.out, args.events, args.keys, args.seed)


if __name__ == "__main__":
    main()
