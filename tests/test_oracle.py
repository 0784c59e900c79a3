"""Unit tests of the oracle itself: hand-written histories with their expected tables.

If one of these fails, the oracle (not lakecdc) disagrees with ``design/semantics.md``.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from typing import Any

import pytest

try:
    from tests.ogg_render import render_ogg_json, write_runs
    from tests.oracle import Event, Oracle, PrimaryKeyUpdateError
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from ogg_render import render_ogg_json, write_runs  # type: ignore[no-redef]
    from oracle import Event, Oracle, PrimaryKeyUpdateError  # type: ignore[no-redef]

T = "S.T"
K = ("ID",)
_BASE = datetime(2024, 1, 1)


def ts(n: int) -> str:
    return f"{_BASE + timedelta(seconds=n):%Y-%m-%d %H:%M:%S.%f}"


def ev(
    op: str,
    n: int,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    *,
    table: str = T,
    keys: tuple[str, ...] = K,
) -> Event:
    """Event number ``n``: seq order is the order of ``n``."""
    return Event(table, op, ts(n), f"{n:020d}", 0, before, after, keys)


def ins(n: int, **after: Any) -> Event:
    return ev("I", n, after=after)


def upd(n: int, before: dict[str, Any], after: dict[str, Any]) -> Event:
    return ev("U", n, before=before, after=after)


def dele(n: int, **before: Any) -> Event:
    return ev("D", n, before=before)


def trunc(n: int) -> Event:
    return ev("T", n)


def rows(oracle: Oracle, table: str = T) -> dict[tuple[Any, ...], dict[str, Any]]:
    return oracle.table(table)


def run(oracle: Oracle, *events: Event, pk_update: str = "delete-insert") -> dict[str, int]:
    """Apply one run; return the counts of table T as a dict (zeros when T had no event)."""
    counts = oracle.apply_run(list(events), pk_update=pk_update)  # type: ignore[arg-type]
    if T not in counts:
        return {}
    return counts[T].as_dict()


# ---- updates and the three column states --------------------------------------------------------


def test_partial_updates_combine_in_one_run() -> None:
    o = Oracle()
    c = run(
        o,
        ins(1, ID=1, A="a0", B=0, C="c0"),
        upd(2, {"ID": 1}, {"ID": 1, "A": "a1"}),
        upd(3, {"ID": 1}, {"ID": 1, "B": 1}),
    )
    assert rows(o) == {(1,): {"ID": 1, "A": "a1", "B": 1, "C": "c0"}}
    assert (c["events"], c["inserted"], c["updated"], c["duplicate_or_late"]) == (3, 1, 2, 0)
    assert (c["net_inserted"], c["net_updated"], c["net_deleted"]) == (1, 0, 0)


def test_partial_updates_combine_across_runs() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a0", B=0))
    run(o, upd(2, {"ID": 1}, {"ID": 1, "A": "a1"}))
    c = run(o, upd(3, {"ID": 1, "A": "a1", "B": 0}, {"ID": 1, "B": 1}))
    assert rows(o) == {(1,): {"ID": 1, "A": "a1", "B": 1}}
    assert (c["updated"], c["net_updated"]) == (1, 1)


def test_missing_never_overwrites_but_null_does() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=7, C="c"))
    run(o, upd(2, {"ID": 1}, {"ID": 1, "A": None}))  # A present NULL, B and C missing
    assert rows(o) == {(1,): {"ID": 1, "A": None, "B": 7, "C": "c"}}


def test_update_keeps_target_value_not_before_image_for_missing_columns() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="target", B=1))
    # the before image disagrees with the target: missing columns keep the TARGET's value
    run(o, upd(2, {"ID": 1, "A": "stale before", "B": 99}, {"ID": 1, "B": 2}))
    assert rows(o) == {(1,): {"ID": 1, "A": "target", "B": 2}}


def test_update_of_absent_key_inserts_after_then_before_then_null() -> None:
    o = Oracle()
    run(o, ins(1, ID=9, A="x", B=1, C="y"))  # C enters the column set
    c = run(o, upd(2, {"ID": 1, "A": "old", "B": 5}, {"ID": 1, "A": "new"}))
    assert rows(o)[(1,)] == {"ID": 1, "A": "new", "B": 5, "C": None}
    assert (c["inserted"], c["updated"], c["net_inserted"]) == (1, 0, 1)


def test_upsert_keeps_missing_columns_of_a_live_row() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=1))
    c = run(o, ins(2, ID=1, A="b"), ev("R", 3, after={"ID": 1, "C": "c"}))
    assert rows(o) == {(1,): {"ID": 1, "A": "b", "B": 1, "C": "c"}}
    assert c["updated"] == 2


def test_column_never_received_reads_null() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"), ins(2, ID=2, B=2))
    assert rows(o) == {
        (1,): {"ID": 1, "A": "a", "B": None},
        (2,): {"ID": 2, "A": None, "B": 2},
    }
    assert o.columns(T) == ["ID", "A", "B"]


def test_update_without_before_key_is_matched_by_after_key() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=1))
    c = run(o, upd(2, {"A": "a"}, {"ID": 1, "B": 2}))  # before lacks the key: not a pk update
    assert rows(o) == {(1,): {"ID": 1, "A": "a", "B": 2}}
    assert c["updated"] == 1


# ---- deletes ------------------------------------------------------------------------------------


def test_delete_then_reinsert_leaves_no_old_column() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=1, C="c"))
    c = run(o, dele(2, ID=1), ins(3, ID=1, A="new"))
    assert rows(o) == {(1,): {"ID": 1, "A": "new", "B": None, "C": None}}
    assert (c["deleted"], c["inserted"]) == (1, 1)
    assert (c["net_inserted"], c["net_updated"], c["net_deleted"]) == (0, 1, 0)


def test_delete_then_reinsert_across_runs_leaves_no_old_column() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=1))
    run(o, dele(2, ID=1, A="a", B=1))
    run(o, ins(3, ID=1, B=2))
    assert rows(o) == {(1,): {"ID": 1, "A": None, "B": 2}}


def test_insert_then_delete_in_one_run_leaves_nothing() -> None:
    o = Oracle()
    c = run(o, ins(1, ID=1, A="a"), upd(2, {"ID": 1}, {"ID": 1, "A": "b"}), dele(3, ID=1))
    assert rows(o) == {}
    assert (c["events"], c["inserted"], c["updated"], c["deleted"]) == (3, 1, 1, 1)
    assert (c["net_inserted"], c["net_updated"], c["net_deleted"]) == (0, 0, 0)
    assert o.tombstones(T) == {(1,): (ts(3), f"{3:020d}", 0)}


def test_delete_of_absent_key_leaves_a_tombstone_that_blocks_older_inserts() -> None:
    o = Oracle()
    c = run(o, dele(5, ID=1))
    assert rows(o) == {}
    assert (c["deleted"], c["duplicate_or_late"]) == (0, 0)
    c = run(o, ins(4, ID=1, A="older than the delete"))
    assert rows(o) == {}
    assert c["duplicate_or_late"] == 1


def test_late_update_after_delete_in_later_run_does_not_resurrect() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"), dele(3, ID=1))
    c = run(o, upd(2, {"ID": 1, "A": "a"}, {"ID": 1, "A": "late"}))
    assert rows(o) == {}
    assert (c["events"], c["duplicate_or_late"], c["inserted"]) == (1, 1, 0)


# ---- primary-key updates -------------------------------------------------------------------------


def test_pk_update_completes_missing_columns_from_before_then_old_row() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=1, C="c", D=4))
    c = run(
        o,
        upd(
            2,
            {"ID": 1, "B": 10, "C": "before-c"},  # B and C present in before, A and D missing
            {"ID": 2, "C": "after-c"},  # only C present in after
        ),
    )
    assert rows(o) == {(2,): {"ID": 2, "A": "a", "B": 10, "C": "after-c", "D": 4}}
    assert (c["deleted"], c["inserted"]) == (1, 1)
    assert (c["net_inserted"], c["net_deleted"]) == (1, 1)
    assert (1,) in o.tombstones(T)


def test_pk_update_of_absent_old_key_fills_null() -> None:
    o = Oracle()
    run(o, ins(1, ID=9, A="a", B=1))
    c = run(o, upd(2, {"ID": 1, "B": 5}, {"ID": 2}))
    assert rows(o)[(2,)] == {"ID": 2, "A": None, "B": 5}
    assert (c["deleted"], c["inserted"]) == (0, 1)


def test_pk_update_chain_in_one_run_any_arrival_order() -> None:
    events = [
        upd(2, {"ID": 1}, {"ID": 2, "A": "a2"}),
        upd(3, {"ID": 2, "A": "a2"}, {"ID": 3, "B": 3}),
        upd(4, {"ID": 3}, {"ID": 3, "C": "c4"}),
    ]
    results = []
    for perm in itertools.permutations(events):
        o = Oracle()
        run(o, ins(1, ID=1, A="a", B=1, C="c"))
        c = run(o, *perm)
        results.append((rows(o), c))
    expected = {(3,): {"ID": 3, "A": "a2", "B": 3, "C": "c4"}}
    for table, c in results:
        assert table == expected
        assert (c["inserted"], c["deleted"], c["updated"]) == (2, 2, 1)
        assert (c["net_inserted"], c["net_deleted"], c["net_updated"]) == (1, 1, 0)


@pytest.mark.parametrize("mode", ["delete-insert", "update"])
def test_pk_update_modes_give_the_same_content(mode: str) -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=1), ins(2, ID=5, A="other", B=5))
    c = run(o, upd(3, {"ID": 1, "A": "a"}, {"ID": 2, "B": 2}), pk_update=mode)
    assert rows(o) == {
        (2,): {"ID": 2, "A": "a", "B": 2},
        (5,): {"ID": 5, "A": "other", "B": 5},
    }
    if mode == "delete-insert":
        assert (c["deleted"], c["inserted"], c["updated"]) == (1, 1, 0)
    else:
        assert (c["deleted"], c["inserted"], c["updated"]) == (0, 0, 1)
    assert (c["net_inserted"], c["net_deleted"], c["net_updated"]) == (1, 1, 0)
    # either way the old key is dead: a late update of it does not come back
    c = run(o, upd(2, {"ID": 1}, {"ID": 1, "A": "late"}), pk_update=mode)
    assert (1,) not in rows(o)
    assert c["duplicate_or_late"] == 1


def test_pk_update_abend_raises_and_changes_nothing() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"))
    before = o.copy()
    with pytest.raises(PrimaryKeyUpdateError) as info:
        run(
            o,
            ins(2, ID=7, A="same run, earlier"),
            upd(3, {"ID": 1}, {"ID": 2}),
            ins(4, ID=8, B="new column"),
            pk_update="abend",
        )
    err = info.value
    assert (err.table, err.old_key, err.new_key, err.pos) == (T, (1,), (2,), f"{3:020d}")
    message = str(err)
    assert T in message and "(1,)" in message and "(2,)" in message and f"{3:020d}" in message
    assert rows(o) == rows(before) == {(1,): {"ID": 1, "A": "a"}}
    assert o.columns(T) == ["ID", "A"]
    assert o.stored_seq(T, (7,)) is None
    # abend only objects to primary-key updates
    c = run(o, upd(5, {"ID": 1}, {"ID": 1, "A": "b"}), pk_update="abend")
    assert rows(o) == {(1,): {"ID": 1, "A": "b"}}
    assert c["updated"] == 1


def test_stale_pk_update_does_not_abend() -> None:
    o = Oracle()
    run(o, ins(5, ID=1, A="a"))
    c = run(o, upd(3, {"ID": 1}, {"ID": 2}), pk_update="abend")
    assert rows(o) == {(1,): {"ID": 1, "A": "a"}}
    assert c["duplicate_or_late"] == 1


def test_abend_names_the_first_applicable_pk_update_in_seq_order() -> None:
    o = Oracle()
    run(o, ins(1, ID=1), ins(2, ID=3), ins(9, ID=5))
    with pytest.raises(PrimaryKeyUpdateError) as info:
        run(
            o,
            upd(6, {"ID": 3}, {"ID": 4}),
            upd(4, {"ID": 5}, {"ID": 6}),
            upd(5, {"ID": 1}, {"ID": 2}),
            pk_update="abend",
        )
    assert (info.value.old_key, info.value.new_key) == ((1,), (2,))  # seq 4 is stale (row 5 has 9)


def test_pk_update_onto_newer_key_deletes_old_key_only() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"), ins(5, ID=2, A="newer"))
    c = run(o, upd(3, {"ID": 1}, {"ID": 2, "A": "from pk update"}))
    assert rows(o) == {(2,): {"ID": 2, "A": "newer"}}
    assert (c["deleted"], c["inserted"], c["updated"], c["duplicate_or_late"]) == (1, 0, 0, 0)


def test_pk_update_onto_older_live_key_replaces_that_row() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a", B=1), ins(2, ID=2, A="old two", B=2, C="c2"))
    c = run(o, upd(3, {"ID": 1}, {"ID": 2, "B": 3}))
    assert rows(o) == {(2,): {"ID": 2, "A": "a", "B": 3, "C": None}}
    assert (c["deleted"], c["updated"], c["inserted"]) == (1, 1, 0)


def test_stale_pk_update_is_judged_by_the_old_key() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"), upd(5, {"ID": 1}, {"ID": 1, "A": "b"}))
    c = run(o, upd(3, {"ID": 1}, {"ID": 2}))
    assert rows(o) == {(1,): {"ID": 1, "A": "b"}}
    assert c["duplicate_or_late"] == 1


# ---- duplicates, replays, arrival order ----------------------------------------------------------


def test_duplicate_replay_is_counted_not_applied() -> None:
    o = Oracle()
    first = [ins(1, ID=1, A="a", B=1), upd(2, {"ID": 1}, {"ID": 1, "B": 2}), dele(3, ID=2)]
    c = run(o, *first, first[1])  # an exact duplicate inside the run
    assert (c["events"], c["duplicate_or_late"]) == (4, 1)
    state = rows(o)
    c = run(o, *first, ins(4, ID=3, A="c"))  # the whole earlier run replayed
    assert (c["events"], c["duplicate_or_late"], c["inserted"]) == (4, 3, 1)
    assert rows(o) == {**state, (3,): {"ID": 3, "A": "c", "B": None}}


def test_equal_seq_arrival_decides_inside_a_run() -> None:
    a = Event(T, "I", ts(1), f"{1:020d}", 0, None, {"ID": 1, "A": "first"}, K)
    b = Event(T, "I", ts(1), f"{1:020d}", 0, None, {"ID": 1, "A": "second"}, K)
    o = Oracle()
    c = run(o, a, b, a)  # the last to arrive is applied last; a copy of the event just before is not
    assert rows(o) == {(1,): {"ID": 1, "A": "first"}}
    assert c["duplicate_or_late"] == 0
    c = run(o, b)  # across runs the vendor seq decides: an equal seq is stale
    assert rows(o) == {(1,): {"ID": 1, "A": "first"}}
    assert c["duplicate_or_late"] == 1


def test_update_and_delete_that_tie_leave_no_row() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"))
    u = Event(T, "U", ts(2), f"{2:020d}", 0, {"ID": 1}, {"ID": 1, "A": "b"}, K)
    d = Event(T, "D", ts(2), f"{2:020d}", 0, {"ID": 1}, None, K)
    c = run(o, u, d, d)
    assert rows(o) == {}
    assert c["duplicate_or_late"] == 1


def test_arrival_order_inside_a_run_does_not_matter() -> None:
    events = [
        ins(1, ID=1, A="a", B=1),
        upd(2, {"ID": 1}, {"ID": 1, "A": "b"}),
        dele(3, ID=1),
        ins(4, ID=1, B=4),
        upd(5, {"ID": 1}, {"ID": 2}),
        ins(6, ID=3, A="x"),
        trunc(7),
        ins(8, ID=3, B=8),
        upd(9, {"ID": 3}, {"ID": 3, "A": "y"}),
    ]
    outcomes = set()
    for perm in itertools.islice(itertools.permutations(events), 0, None, 997):
        o = Oracle()
        c = run(o, *perm)
        outcomes.add((json.dumps(sorted(rows(o).items())), json.dumps(c, sort_keys=True)))
    assert len(outcomes) == 1


def test_seq_orders_by_op_ts_before_pos() -> None:
    # pos alone would put the update first; op_ts says the insert is older
    i = Event(T, "I", ts(1), f"{9:020d}", 0, None, {"ID": 1, "A": "a", "B": 1}, K)
    u = Event(T, "U", ts(2), f"{1:020d}", 0, {"ID": 1}, {"ID": 1, "B": 2}, K)
    o = Oracle()
    run(o, u, i)
    assert rows(o) == {(1,): {"ID": 1, "A": "a", "B": 2}}


# ---- truncate ------------------------------------------------------------------------------------


def test_truncate_then_later_insert() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"), ins(2, ID=2, A="b"))
    other = Event("S.OTHER", "I", ts(3), f"{3:020d}", 0, None, {"ID": 1}, K)
    c = run(o, trunc(4), ins(5, ID=2, B=5), other)
    assert rows(o) == {(2,): {"ID": 2, "A": None, "B": 5}}
    assert rows(o, "S.OTHER") == {(1,): {"ID": 1}}  # a truncate is per table
    assert (c["events"], c["deleted"], c["inserted"]) == (2, 2, 1)
    assert (c["net_deleted"], c["net_updated"]) == (1, 1)
    # older events of the truncated table are late now, even for keys never seen
    c = run(o, ins(3, ID=9, A="late"), upd(3, {"ID": 2}, {"ID": 2, "A": "late"}))
    assert rows(o) == {(2,): {"ID": 2, "A": None, "B": 5}}
    assert c["duplicate_or_late"] == 2


def test_late_truncate_does_not_remove_newer_rows() -> None:
    o = Oracle()
    run(o, ins(1, ID=1, A="a"), ins(3, ID=2, A="b"), upd(5, {"ID": 1}, {"ID": 1, "A": "a5"}))
    c = run(o, trunc(4))  # arrives after rows 1 (seq 5) and 2 (seq 3) were applied
    assert rows(o) == {(1,): {"ID": 1, "A": "a5"}}
    assert (c["events"], c["deleted"], c["duplicate_or_late"]) == (1, 1, 0)
    assert o.truncate_watermark(T) == (ts(4), f"{4:020d}", 0)
    c = run(o, trunc(2))  # older than the watermark: late
    assert rows(o) == {(1,): {"ID": 1, "A": "a5"}}
    assert (c["events"], c["duplicate_or_late"], c["deleted"]) == (1, 1, 0)
    c = run(o, trunc(4))  # a replay: not below the watermark, so applied; it removes nothing
    assert rows(o) == {(1,): {"ID": 1, "A": "a5"}}
    assert (c["events"], c["duplicate_or_late"], c["deleted"]) == (1, 0, 0)
    assert o.truncate_watermark(T) == (ts(4), f"{4:020d}", 0)


def test_truncate_removing_nothing_still_raises_the_watermark() -> None:
    o = Oracle()
    run(o, ins(5, ID=1, A="a"))
    c = run(o, trunc(4))
    assert rows(o) == {(1,): {"ID": 1, "A": "a"}}
    assert (c["deleted"], c["duplicate_or_late"]) == (0, 0)
    c = run(o, ins(3, ID=2))
    assert c["duplicate_or_late"] == 1


# ---- the seed's GoldenGate examples (seed 000, 13.3.4.1) ---------------------------------------

TCUSTORD = "QASOURCE.TCUSTORD"
TCUSTORD_KEYS = ("CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID")
SEED_MESSAGES = [
    # insert WILL
    '{"table":"QASOURCE.TCUSTORD","op_type":"I","op_ts":"2015-11-05 18:45:36.000000",'
    '"current_ts":"2016-10-05T10:15:51.267000","pos":"00000000000000002928",'
    '"after":{"CUST_CODE":"WILL","ORDER_DATE":"1994-09-30:15:33:00","PRODUCT_CODE":"CAR",'
    '"ORDER_ID":144,"PRODUCT_PRICE":17520.00,"PRODUCT_AMOUNT":3,"TRANSACTION_ID":100}}',
    # update BILL: PRODUCT_AMOUNT and TRANSACTION_ID missing from after
    '{"table":"QASOURCE.TCUSTORD","op_type":"U","op_ts":"2015-11-05 18:45:39.000000",'
    '"current_ts":"2016-10-05T10:15:51.310002","pos":"00000000000000004300",'
    '"before":{"CUST_CODE":"BILL","ORDER_DATE":"1995-12-31:15:00:00","PRODUCT_CODE":"CAR",'
    '"ORDER_ID":765,"PRODUCT_PRICE":15000.00,"PRODUCT_AMOUNT":3,"TRANSACTION_ID":100},'
    '"after":{"CUST_CODE":"BILL","ORDER_DATE":"1995-12-31:15:00:00","PRODUCT_CODE":"CAR",'
    '"ORDER_ID":765,"PRODUCT_PRICE":14000.00}}',
    # delete DAVE
    '{"table":"QASOURCE.TCUSTORD","op_type":"D","op_ts":"2015-11-05 18:45:39.000000",'
    '"current_ts":"2016-10-05T10:15:51.312000","pos":"00000000000000005272",'
    '"before":{"CUST_CODE":"DAVE","ORDER_DATE":"1993-11-03:07:51:35","PRODUCT_CODE":"PLANE",'
    '"ORDER_ID":600,"PRODUCT_PRICE":135000.00,"PRODUCT_AMOUNT":2,"TRANSACTION_ID":200}}',
    # truncate (the seed prints a trailing comma, which is not JSON; dropped here)
    '{"table":"QASOURCE.TCUSTORD","op_type":"T","op_ts":"2015-11-05 18:45:39.000000",'
    '"current_ts":"2016-10-05T10:15:51.312001","pos":"00000000000000005480"}',
]


def seed_events() -> list[Event]:
    out = []
    for line in SEED_MESSAGES:
        m = json.loads(line)
        out.append(
            Event(
                m["table"],
                m["op_type"],
                m["op_ts"],
                m["pos"],
                0,
                m.get("before"),
                m.get("after"),
                TCUSTORD_KEYS,
            )
        )
    return out


WILL = ("WILL", "1994-09-30:15:33:00", "CAR", 144)
BILL = ("BILL", "1995-12-31:15:00:00", "CAR", 765)
DAVE = ("DAVE", "1993-11-03:07:51:35", "PLANE", 600)


def test_seed_tcustord_into_an_empty_table() -> None:
    insert, update, delete, truncate = seed_events()
    o = Oracle()
    c = o.apply_run([delete, update, insert])[TCUSTORD].as_dict()
    assert o.table(TCUSTORD) == {
        WILL: {
            "CUST_CODE": "WILL",
            "ORDER_DATE": "1994-09-30:15:33:00",
            "PRODUCT_CODE": "CAR",
            "ORDER_ID": 144,
            "PRODUCT_PRICE": 17520.00,
            "PRODUCT_AMOUNT": 3,
            "TRANSACTION_ID": 100,
        },
        # BILL was not in the target: inserted from after, then before for the missing columns
        BILL: {
            "CUST_CODE": "BILL",
            "ORDER_DATE": "1995-12-31:15:00:00",
            "PRODUCT_CODE": "CAR",
            "ORDER_ID": 765,
            "PRODUCT_PRICE": 14000.00,
            "PRODUCT_AMOUNT": 3,
            "TRANSACTION_ID": 100,
        },
    }
    assert (c["events"], c["inserted"], c["updated"], c["deleted"]) == (3, 2, 0, 0)
    assert DAVE in o.tombstones(TCUSTORD)
    c = o.apply_run([truncate])[TCUSTORD].as_dict()
    assert o.table(TCUSTORD) == {}
    assert (c["events"], c["deleted"]) == (1, 2)


def test_seed_tcustord_over_existing_rows() -> None:
    insert, update, delete, truncate = seed_events()
    o = Oracle()
    earlier = "2015-11-01 00:00:00.000000"
    o.apply_run(
        [
            Event(
                TCUSTORD,
                "I",
                earlier,
                "00000000000000000100",
                0,
                None,
                {
                    "CUST_CODE": "BILL",
                    "ORDER_DATE": "1995-12-31:15:00:00",
                    "PRODUCT_CODE": "CAR",
                    "ORDER_ID": 765,
                    "PRODUCT_PRICE": 15000.00,
                    "PRODUCT_AMOUNT": 5,
                    "TRANSACTION_ID": 99,
                },
                TCUSTORD_KEYS,
            ),
            Event(
                TCUSTORD,
                "I",
                earlier,
                "00000000000000000200",
                0,
                None,
                {
                    "CUST_CODE": "DAVE",
                    "ORDER_DATE": "1993-11-03:07:51:35",
                    "PRODUCT_CODE": "PLANE",
                    "ORDER_ID": 600,
                    "PRODUCT_PRICE": 135000.00,
                    "PRODUCT_AMOUNT": 2,
                    "TRANSACTION_ID": 200,
                },
                TCUSTORD_KEYS,
            ),
        ]
    )
    c = o.apply_run([insert, update, delete])[TCUSTORD].as_dict()
    table = o.table(TCUSTORD)
    assert set(table) == {WILL, BILL}
    # PRODUCT_AMOUNT / TRANSACTION_ID were missing: the target's 5 / 99 stay (not before's 3 / 100)
    assert table[BILL]["PRODUCT_PRICE"] == 14000.00
    assert (table[BILL]["PRODUCT_AMOUNT"], table[BILL]["TRANSACTION_ID"]) == (5, 99)
    assert (c["inserted"], c["updated"], c["deleted"]) == (1, 1, 1)
    o.apply_run([truncate, insert])  # the replayed insert is older than the truncate
    assert o.table(TCUSTORD) == {}


# ---- the renderer --------------------------------------------------------------------------------


def test_render_seed_messages_round_trip() -> None:
    events = seed_events()
    lines = render_ogg_json(events).splitlines()
    assert len(lines) == 4
    for line, original in zip(lines, SEED_MESSAGES, strict=True):
        got, want = json.loads(line), json.loads(original)
        assert list(got)[:5] == ["table", "op_type", "op_ts", "current_ts", "pos"]
        assert got.pop("primary_keys") == list(TCUSTORD_KEYS)
        got.pop("current_ts"), want.pop("current_ts")
        assert got == want
    # current_ts decreases through the file: never usable for ordering
    stamps = [json.loads(line)["current_ts"] for line in lines]
    assert stamps == sorted(stamps, reverse=True)
    assert "primary_keys" not in render_ogg_json(events, primary_keys=False)


def test_render_keeps_missing_null_and_empty_apart(tmp_path: Any) -> None:
    e = upd(1, {"ID": 1, "A": None}, {"ID": 1, "B": "", "C": 'é"\\'})
    text = render_ogg_json([e])
    msg = json.loads(text)
    assert msg["before"] == {"ID": 1, "A": None}
    assert msg["after"] == {"ID": 1, "B": "", "C": 'é"\\'}
    assert text.endswith("\n") and text.count("\n") == 1
    paths = write_runs([e, ins(2, ID=2)], [[1, 0], [0]], tmp_path / "landing")
    assert [p.name for p in paths] == ["run-0001.json", "run-0002.json"]
    first = [json.loads(line) for line in paths[0].read_text(encoding="utf-8").splitlines()]
    assert [m["op_type"] for m in first] == ["I", "U"]


def test_render_rejects_what_goldengate_cannot_write() -> None:
    with pytest.raises(ValueError):
        render_ogg_json([ev("R", 1, after={"ID": 1})])
    with pytest.raises(ValueError):
        render_ogg_json([ev("D", 1, after={"ID": 1})])
