"""Concurrent table merges (``parallel_tables``): the same tables, the same isolation of failures.

A multi-table history merged four tables at a time must equal the oracle, run after run; a table
whose merge fails while the others merge is reported failed, the others are applied, and the next
run applies it; an abend primary-key update in one table still stops the whole run before any
table is committed.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

import lakecdc
from lakecdc.errors import PrimaryKeyUpdateError

try:
    from tests.helpers import ogg, rows, version, write_jsonl
    from tests.ogg_render import render_ogg_json
    from tests.oracle import Event, Oracle
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import ogg, rows, version, write_jsonl  # type: ignore[no-redef]
    from ogg_render import render_ogg_json  # type: ignore[no-redef]
    from oracle import Event, Oracle  # type: ignore[no-redef]

pytestmark = pytest.mark.spark
TABLES = [f"S.T{i}" for i in range(5)]


def _history(rng: random.Random, start: int, n: int, live: dict[str, set[int]]) -> list[Event]:
    """``n`` events over the tables: inserts, partial updates and deletes of small key spaces."""
    out = []
    for i in range(start, start + n):
        table = rng.choice(TABLES)
        k = rng.randrange(6)
        ts, pos = f"2020-01-01 00:{i // 60:02d}:{i % 60:02d}.000000", f"{i:020d}"
        if k in live[table] and rng.random() < 0.25:
            out.append(Event(table, "D", ts, pos, before={"ID": k}, keys=("ID",)))
            live[table].discard(k)
        elif k in live[table]:
            out.append(Event(table, "U", ts, pos, before={"ID": k}, after={"ID": k, "N": i}, keys=("ID",)))
        else:
            out.append(Event(table, "I", ts, pos, after={"ID": k, "N": i, "S": f"s{i}"}, keys=("ID",)))
            live[table].add(k)
    return out


def _assert_equals_oracle(target: Path, oracle: Oracle) -> None:
    for table in oracle.tables():
        want = sorted(({"ID": k[0], "N": r.get("N"), "S": r.get("S")} for k, r in oracle.table(table).items()),
                      key=lambda r: r["ID"])
        got = [{"ID": r["ID"], "N": r.get("N"), "S": r.get("S")} for r in rows(target / table, "ID")]
        assert got == want, table


def test_tables_merged_concurrently_equal_the_oracle(tmp_path: Path, spark) -> None:
    rng, live, oracle = random.Random(11), {t: set() for t in TABLES}, Oracle()
    landing, target = tmp_path / "landing", tmp_path / "lake"
    start = 1
    for run in range(2):
        events = _history(rng, start, 60, live)
        start += 60
        counts = oracle.apply_run(events)
        shuffled = events[:]
        rng.shuffle(shuffled)  # (one run is sorted by seq first: delivery order does not matter)
        landing.mkdir(exist_ok=True)
        (landing / f"run-{run}.json").write_text(render_ogg_json(shuffled))
        s = lakecdc.apply(landing, target, format="ogg-json", parallel_tables=4, spark=spark)
        assert s.ok, s.render()
        assert [t.source_table for t in s.tables] == sorted(counts)  # summary order: by table
        for t in s.tables:
            c = counts[t.source_table]
            assert (t.inserted, t.updated, t.deleted) == (c.net_inserted, c.net_updated, c.net_deleted), t.source_table
        _assert_equals_oracle(target.resolve(), oracle)


def _data_files(path: Path) -> list[Path]:
    return sorted(p for p in path.glob("**/*.parquet") if "_delta_log" not in p.parts)


def test_a_table_failing_while_others_merge_is_retried_next_run(tmp_path: Path, spark) -> None:
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg(t, "I", "00:00:01", i + 1, after={"ID": 1, "N": 1}, keys=["ID"]) for i, t in enumerate(TABLES)
    ])
    assert lakecdc.apply(landing, target, format="ogg-json", parallel_tables=3, spark=spark).ok
    broken = target.resolve() / "S.T2"
    # S.T2's data file is unreadable (a storage fault): the merge, which must rewrite it, fails;
    # its preparation (the seqs come from the log's statistics) does not notice
    (data,) = _data_files(broken)
    saved = data.read_bytes()
    data.write_bytes(b"not parquet")
    write_jsonl(landing / "b.json", [
        ogg(t, "U", "00:00:02", 10 + i, before={"ID": 1}, after={"ID": 1, "N": 2}, keys=["ID"])
        for i, t in enumerate(TABLES)
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", parallel_tables=3, spark=spark)
    assert not s.ok
    assert {t.source_table: t.status for t in s.tables} == {t: "failed" if t == "S.T2" else "applied" for t in TABLES}
    assert s.table("S.T2").error
    for t in TABLES:
        if t != "S.T2":
            assert rows(target.resolve() / t) == [{"ID": 1, "N": 2}]
    data.write_bytes(saved)  # repaired: the next run applies S.T2 only
    s = lakecdc.apply(landing, target, format="ogg-json", parallel_tables=3, spark=spark)
    assert s.ok and s.table("S.T2").status == "applied", s.render()
    assert {t.source_table for t in s.tables if t.status == "skipped"} == set(TABLES) - {"S.T2"}
    assert rows(broken) == [{"ID": 1, "N": 2}]


def test_an_abend_in_one_table_stops_the_run_before_any_commit(tmp_path: Path, spark) -> None:
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg(t, "I", "00:00:01", i + 1, after={"ID": 1, "N": 1}, keys=["ID"]) for i, t in enumerate(TABLES[:3])
    ])
    assert lakecdc.apply(landing, target, format="ogg-json", parallel_tables=3, spark=spark).ok
    before = {t: version(target.resolve() / t) for t in TABLES[:3]}
    write_jsonl(landing / "b.json", [
        ogg("S.T0", "U", "00:00:02", 10, before={"ID": 1}, after={"ID": 1, "N": 2}, keys=["ID"]),
        ogg("S.T1", "U", "00:00:03", 11, before={"ID": 1}, after={"ID": 9, "N": 2}, keys=["ID"]),
        ogg("S.T2", "U", "00:00:04", 12, before={"ID": 1}, after={"ID": 1, "N": 2}, keys=["ID"]),
    ])
    with pytest.raises(PrimaryKeyUpdateError, match="S.T1"):
        lakecdc.apply(landing, target, format="ogg-json", pk_update="abend", parallel_tables=3, spark=spark)
    assert {t: version(target.resolve() / t) for t in TABLES[:3]} == before
    shutil.rmtree(tmp_path, ignore_errors=True)
