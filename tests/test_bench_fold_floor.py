"""bench/fold_floor.py: the per-column folds it times beside the peer do what its text says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import fold_floor, peers  # noqa: E402

pytestmark = pytest.mark.spark

FULL = {"ID": 1, "CUSTOMER_ID": 7, "ORDER_DATE": "2024-01-01", "SHIP_DATE": None, "STATUS": "NEW",
        "CHANNEL": "WEB", "QUANTITY": 2, "UNIT_PRICE": 1.50, "AMOUNT": 3.00, "DISCOUNT": None, "PRIORITY": 1,
        "NOTE": "first"}


def _event(op: str, pos: int, before: dict | None, after: dict | None) -> str:
    message = {"table": "BENCH.ORDERS", "op_type": op, "op_ts": "2024-01-01 00:00:00.000000",
               "current_ts": "2024-01-01T00:00:01.000000", "pos": f"{pos:020d}", "primary_keys": ["ID"]}
    message.update({k: v for k, v in (("before", before), ("after", after)) if v is not None})
    return json.dumps(message)


@pytest.fixture
def events(tmp_path: Path) -> Path:
    """Key 1: an insert, a partial update of STATUS, a partial update setting NOTE to NULL;
    key 2: an insert, then a delete. Written out of order: the folds order by op_ts, pos."""
    lines = [
        _event("U", 3, FULL, {"ID": 1, "NOTE": None}),
        _event("I", 1, None, FULL),
        _event("U", 2, FULL, {"ID": 1, "STATUS": "SHIPPED"}),
        _event("I", 4, None, {**FULL, "ID": 2, "NOTE": "second"}),
        _event("D", 5, {**FULL, "ID": 2}, None),
    ]
    path = tmp_path / "events.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_folds_keep_each_columns_newest_carried_value_where_the_peer_keeps_the_newest_row(spark, events: Path) -> None:
    by_key = lambda table, key="k": {row[key]: row for row in table.to_pylist()}  # noqa: E731
    maps = by_key(fold_floor.fold_maps(spark, events))
    typed = by_key(fold_floor.fold_typed(spark, events))
    peer = by_key(peers.latest_per_key(spark, events), "ID")
    assert set(maps) == {"1", "2"} and set(typed) == {1, 2} and set(peer) == {1, 2}  # one row per key
    # maps: each column's newest carried value; a carried NULL counts (a struct holding NULL)
    one = maps["1"]
    assert one["STATUS"] == {"v": "SHIPPED"} and one["CUSTOMER_ID"] == {"v": "7"} and one["NOTE"] == {"v": None}
    assert one["SHIP_DATE"] == {"v": None} and one["_op"] == "U"
    assert maps["2"]["_op"] == "D" and maps["2"]["NOTE"] == {"v": "second"}  # (deletes are not its business)
    # typed: the same, except that a NULL reads as "not carried": the older NOTE comes back
    assert typed[1]["STATUS"] == "SHIPPED" and typed[1]["CUSTOMER_ID"] == 7 and typed[1]["NOTE"] == "first"
    # the peer: the newest row only, so the columns the last update did not carry are lost
    assert peer[1]["NOTE"] is None and peer[1]["STATUS"] is None and peer[1]["CUSTOMER_ID"] is None


def test_arguments_default_to_the_issue_workload() -> None:
    args = fold_floor.parse_args([])
    assert (args.events, args.keys, args.repeat, args.no_runs) == (1_000_000, 200_000, 3, False)
    assert fold_floor.parse_args(["--no-runs", "--repeat", "1"]).no_runs


def test_measure_takes_turns_and_prints_every_contenders_ratio(spark, tmp_path: Path, capsys) -> None:
    args = fold_floor.parse_args(["--events", "2000", "--keys", "500", "--repeat", "2", "--workdir", str(tmp_path)])
    seconds = fold_floor.measure(spark, args)
    out = capsys.readouterr().out
    names = ["peer", "fold-typed", "fold-maps", "peer run", "lakecdc run"]
    assert list(seconds) == names and all(len(runs) == 1 for runs in seconds.values())  # the warm-up left out
    turns = [line.split(": ", 1)[1].rsplit(" ", 2)[0] for line in out.splitlines() if line.startswith("  round ")]
    assert turns == names * 2  # round after round, the contenders taking turns
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in out.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert rows["peer"] == "1.00" and rows["peer run"] == "1.00" and set(rows) == {"contender", *names}
    assert "2,000 events over 500 keys, one JVM, median of 1:" in out
