"""Writes the bundled change files of the example jobs (run it after editing a story here, then
commit the files it wrote)::

    .venv/bin/python jobs/make_samples.py

Every family tells the same little story of a shop, in its own vendor's words:

1. customers 1 Ann, 2 Bob and 3 Cid are inserted, then orders 100 (Ann's) and 101 (Bob's);
2. Bob moves to Lyon: an update that logged the changed column only (the others keep their
   values); order 100 is paid (the same kind of update); order 101 is deleted;
3. customer 3 gets the new key 30 (a primary-key update) and orders 102;
4. a consumer restart delivers Bob's move again (a duplicate, changing nothing), and order 102
   ships.

So each job ends with customers {1 Ann Berlin, 2 Bob Lyon, 30 Cid Rome} and orders {100 paid,
102 shipped}; tests/test_jobs.py checks that for every job. Where a format cannot say "this
column was not logged" (DTS writes whole rows) the update carries the whole row; where it has
its own way of saying it (Debezium's TOAST placeholder, Qlik's columnMask, GoldenGate's
missing value) that way is used.

The files are written with the test renderers of tests/ (the same code the decoders' round-trip
tests check against the oracle), so they are what each vendor writes, generated: no third-party
data. Output is deterministic: running this twice writes identical bytes.
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

JOBS = Path(__file__).resolve().parent
REPO = JOBS.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the renderers import both ways

from tests import dts_render as dts  # noqa: E402
from tests import ogg_row_render, qlik_render, shareplex_render  # noqa: E402
from tests.debezium_avro_render import AvroRenderer  # noqa: E402
from tests.debezium_render import MARKER_SCHEMA, Renderer, Style, WholeTransactions, as_debezium  # noqa: E402
from tests.ogg_row_render import render_delimited, row_events, write_json_schema  # noqa: E402
from tests.oracle import Event  # noqa: E402
from tests.qlik_render import Table, json_data, json_metadata, render_history  # noqa: E402
from tests.shareplex_render import shareplex_messages  # noqa: E402


def ts(second: int) -> str:
    return f"2024-05-01 09:00:{second:02d}.000000"


def fresh(directory: Path) -> Path:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    return directory


def write(path: Path, data: str | bytes) -> None:
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size} bytes)")


# -- GoldenGate delimited text, configured by the replicat's gg.properties ------------------------------

GG_COLUMNS = {"SHOP.CUSTOMERS": ["ID", "NAME", "CITY", "TIER"],
              "SHOP.ORDERS": ["ID", "CUSTOMER_ID", "AMOUNT", "STATUS"]}


def goldengate() -> None:
    """Row-modeled delimited text (``|`` fields, empty = not logged) with ``pkUpdateHandling=
    delete-insert``: the key change 3 -> 30 is written as a delete and an insert at one position,
    and the insert lacks TIER (no full supplemental logging): lakecdc joins the pair and keeps TIER."""
    c, o = "SHOP.CUSTOMERS", "SHOP.ORDERS"

    def ev(second: int, pos: int, table: str, op: str, before: dict | None = None, after: dict | None = None) -> Event:
        return Event(table, op, ts(second), f"{pos:020d}", 0, before, after, ("ID",))

    bob_moves = ev(10, 2001, c, "U", {"ID": 2}, {"ID": 2, "CITY": "Lyon"})
    files = [
        [ev(1, 1001, c, "I", None, {"ID": 1, "NAME": "Ann", "CITY": "Berlin", "TIER": "gold"}),
         ev(1, 1002, c, "I", None, {"ID": 2, "NAME": "Bob", "CITY": "Paris", "TIER": "silver"}),
         ev(1, 1003, c, "I", None, {"ID": 3, "NAME": "Cid", "CITY": "Rome", "TIER": "bronze"}),
         ev(2, 1004, o, "I", None, {"ID": 100, "CUSTOMER_ID": 1, "AMOUNT": "25.50", "STATUS": "new"}),
         ev(2, 1005, o, "I", None, {"ID": 101, "CUSTOMER_ID": 2, "AMOUNT": "12.00", "STATUS": "new"})],
        [bob_moves,
         ev(11, 2002, o, "U", {"ID": 100}, {"ID": 100, "STATUS": "paid"}),
         ev(12, 2003, o, "D", {"ID": 101, "CUSTOMER_ID": 2, "AMOUNT": "12.00", "STATUS": "new"}),
         ev(13, 2004, c, "U", {"ID": 3, "NAME": "Cid", "CITY": "Rome", "TIER": "bronze"},
            {"ID": 30, "NAME": "Cid", "CITY": "Rome"}),
         ev(14, 2005, o, "I", None, {"ID": 102, "CUSTOMER_ID": 30, "AMOUNT": "99.90", "STATUS": "new"})],
        [bob_moves,
         ev(20, 3001, o, "U", {"ID": 102}, {"ID": 102, "STATUS": "shipped"})],
    ]
    landing, dirdef = fresh(JOBS / "goldengate" / "landing"), fresh(JOBS / "goldengate" / "dirdef")
    for table, columns in GG_COLUMNS.items():  # the tables' JSON schemas, as GoldenGate writes them to dirdef
        kinds = {col: "integer" if col in ("ID", "CUSTOMER_ID") else "number" if col == "AMOUNT" else "string"
                 for col in columns}
        path = write_json_schema(dirdef, table, kinds)
        print(f"wrote {path.relative_to(REPO)}")
    for n, events in enumerate(files, start=1):
        rows = [r for e in events for r in row_events(e, pk_update_handling="delete-insert")]
        write(landing / f"shop_2024-05-01_09-00-{n:02d}.txt", render_delimited(rows, GG_COLUMNS, field_delimiter="|"))


# -- Debezium JSON: PostgreSQL connector, Connect JSON with schemas, key lines, transaction topic -------


class ShopRenderer(Renderer):
    """Debezium's PostgreSQL connector with ``decimal.handling.mode=string``: integers are int64,
    amounts strings (the test renderer writes Oracle's NUMBER as Connect Decimal instead)."""

    def _field(self, table: str, column: str, *, key: bool) -> dict[str, Any]:
        kind = self.kinds[table].get(column, "str")
        if kind == "str":
            return {"type": "string", "optional": True, "field": column}
        return {"type": "int64", "optional": not key, "field": column}

    def _value_of(self, table: str, column: str, value: Any, *, key: bool) -> Any:
        return value


TOAST = "__debezium_unavailable_value"


def debezium() -> None:
    """Key lines before values, tombstones after deletes, the transaction topic's BEGIN/END markers
    in the same files. Transactions are events sharing a commit time; the third one (customer 3
    becomes 30, order 102) is cut by the end of file 2: its END marker is in file 3. ``notes`` is a
    TOASTed text column: an update that did not change it carries Debezium's placeholder."""
    c, o = "shopdb.public.customers", "shopdb.public.orders"

    def ev(second: int, table: str, op: str, before: dict | None = None, after: dict | None = None) -> Event:
        return Event(table, op, ts(second), "0", 0, before, after, ("id",))

    ann = {"id": 1, "name": "Ann", "city": "Berlin", "tier": "gold", "notes": "prefers email"}
    bob = {"id": 2, "name": "Bob", "city": "Paris", "tier": "silver", "notes": "VIP since 2019"}
    cid = {"id": 3, "name": "Cid", "city": "Rome", "tier": "bronze", "notes": "new"}
    o100 = {"id": 100, "customer_id": 1, "amount": "25.50", "status": "new"}
    o101 = {"id": 101, "customer_id": 2, "amount": "12.00", "status": "new"}
    o102 = {"id": 102, "customer_id": 30, "amount": "99.90", "status": "new"}
    history = [
        ev(1, c, "I", None, ann), ev(1, c, "I", None, bob), ev(1, c, "I", None, cid),     # tx 0
        ev(2, o, "I", None, o100), ev(2, o, "I", None, o101),                             # tx 1
        ev(10, c, "U", bob, {**bob, "city": "Lyon", "notes": TOAST}),                     # tx 2
        ev(10, o, "U", o100, {**o100, "status": "paid"}), ev(10, o, "D", o101),
        ev(13, c, "U", cid, {**cid, "id": 30}), ev(13, o, "I", None, o102),               # tx 3
        ev(20, o, "U", o102, {**o102, "status": "shipped"}),                              # tx 4
    ]
    events, index = as_debezium(history, "postgresql")
    kinds = {t: {col: "int" if col in ("id", "customer_id") else "str" for col in cols}
             for t, cols in {"public.customers": ann, "public.orders": o100}.items()}
    renderer = ShopRenderer(events, kinds, Style("postgresql", schema=True, layout="key-value", server="shop"),
                            {"public.customers": c, "public.orders": o})
    whole = WholeTransactions(renderer, events)
    bob_moves = events[index[5][0]]
    # file 1: tx 0-1; file 2: tx 2 and tx 3 up to the old key's delete; file 3: the rest of tx 3
    # (the new key's insert, order 102), a redelivered copy of Bob's move, tx 4
    cut = index[8][0] + 1
    deliveries = [events[: index[5][0]], events[index[5][0]: cut], [*events[cut: index[10][0]], bob_moves,
                                                                       *events[index[10][0]:]]]
    landing = fresh(JOBS / "debezium" / "landing")
    for n, run in enumerate(deliveries, start=1):
        items, _ready = whole.run(run)
        lines = [renderer.render([x]).rstrip("\n") if kind == "event"
                 else json.dumps(renderer.wrap(x, MARKER_SCHEMA), separators=(",", ":")) for kind, x in items]
        write(landing / f"shop-{n:04d}.json", "".join(line + "\n" for line in lines))


class NoTransactionRenderer(ShopRenderer):
    """A connector without ``provide.transaction.metadata``: envelopes carry no ``transaction``."""

    def envelope(self, e: Event, total_order: int) -> dict[str, Any]:
        return {**super().envelope(e, total_order), "transaction": None}


def debezium_avro() -> None:
    """A second connector (MySQL, Confluent's AvroConverter) of the same shop: inventory.products as
    length-prefixed wire-format messages (key, value; a zero-length tombstone after a delete) and
    the writer schemas as the registry holds them (``<id>.avsc``). Stock changes, a product
    dropped, an update delivered twice."""
    t = "inventory.products"

    def ev(second: int, op: str, before: dict | None = None, after: dict | None = None) -> Event:
        return Event(t, op, ts(second), "0", 0, before, after, ("id",))

    p1, p2, p3 = ({"id": i, "sku": sku, "stock": n} for i, sku, n in ((1, "MUG-01", 40), (2, "CAP-07", 12),
                                                                       (3, "PEN-99", 5)))
    history = [ev(1, "I", None, p1), ev(1, "I", None, p2), ev(1, "I", None, p3),
               ev(10, "U", p2, {**p2, "stock": 11}), ev(12, "D", p3), ev(20, "U", p1, {**p1, "stock": 39})]
    events, _ = as_debezium(history, "mysql")
    kinds = {t: {"id": "int", "sku": "str", "stock": "int"}}
    base = NoTransactionRenderer(events, kinds, Style("mysql", schema=True, layout="values", server="shop"), {t: t})
    avro = AvroRenderer(base, events, {t: ["id"]})
    root = JOBS / "debezium" / "avro"
    landing = fresh(root / "landing")
    for n, run in enumerate([events[:3], [*events[3:5], events[3]], events[5:]], start=1):
        write(landing / f"inventory-{n:04d}.bin", avro.render_wire(run))
    avro.write_registry(fresh(root / "schemas"))
    print(f"wrote {(root / 'schemas').relative_to(REPO)}/ ({len(avro.schemas)} schemas)")


# -- Alibaba DTS: the same subscription data as dts-avro, canal-json and shareplex-json -----------------


def dts_avro() -> None:
    """DTS's default Kafka format: Avro Records, whole-row images, the key change as one UPDATE whose
    images hold different keys, BEGIN/COMMIT and heartbeats (skipped), a DDL (skipped)."""
    c, o = "shop.customers", "shop.orders"
    # MySQL type numbers: 3 INT, 246 DECIMAL, 253 VARCHAR
    cust_fields = [("id", 3), ("name", 253), ("city", 253), ("tier", 253)]
    order_fields = [("id", 3), ("customer_id", 3), ("amount", 246), ("status", 253)]

    def cust(i: int, name: str, city: str, tier: str) -> list[Any]:
        return [dts.integer(i), dts.character(name), dts.character(city), dts.character(tier)]

    def order(i: int, customer: int, amount: str, status: str) -> list[Any]:
        return [dts.integer(i), dts.integer(customer), dts.decimal(amount, 10, 2), dts.character(status)]

    counter = iter(range(1, 1000))

    def rec(op: str, table: str, second: int, *, before: list | None = None, after: list | None = None,
            sql: str | None = None) -> dict[str, Any]:
        n = next(counter)
        fields = cust_fields if table == c else order_fields
        when = 1714554000 + second  # 2024-05-01 09:00:00 UTC
        if op in ("BEGIN", "COMMIT"):
            return dts.record(op, None, id=n, ts=when, position=f"{1000 + 100 * n}@7", txid=f"tx{second}")
        if op == "DDL":
            return dts.record("DDL", table, id=n, ts=when, position=f"{1000 + 100 * n}@7", after=sql)
        return dts.record(op, table, fields, before=before, after=after, id=n, ts=when,
                          position=f"{1000 + 100 * n}@7", tags=dts.pk_tag("id"), txid=f"tx{second}")

    ann, bob, cid = cust(1, "Ann", "Berlin", "gold"), cust(2, "Bob", "Paris", "silver"), cust(3, "Cid", "Rome", "bronze")
    bob_lyon = cust(2, "Bob", "Lyon", "silver")
    o100, o101 = order(100, 1, "25.50", "new"), order(101, 2, "12.00", "new")
    o102 = order(102, 30, "99.90", "new")
    heartbeat = dts.record("HEARTBEAT", None, id=0, ts=1714554000, position="4@7")
    first = [heartbeat, rec("BEGIN", c, 1), rec("INSERT", c, 1, after=ann), rec("INSERT", c, 1, after=bob),
             rec("INSERT", c, 1, after=cid), rec("INSERT", o, 2, after=o100), rec("INSERT", o, 2, after=o101),
             rec("COMMIT", c, 2)]
    moves = rec("UPDATE", c, 10, before=bob, after=bob_lyon)
    second = [rec("BEGIN", c, 10), moves,
              rec("UPDATE", o, 10, before=o100, after=order(100, 1, "25.50", "paid")),
              rec("DELETE", o, 10, before=o101), rec("COMMIT", c, 10),
              rec("DDL", o, 12, sql="ALTER TABLE orders ADD INDEX idx_status (status)"),
              rec("BEGIN", c, 13), rec("UPDATE", c, 13, before=cid, after=cust(30, "Cid", "Rome", "bronze")),
              rec("INSERT", o, 13, after=o102), rec("COMMIT", c, 13)]
    third = [moves, rec("BEGIN", o, 20),
             rec("UPDATE", o, 20, before=o102, after=order(102, 30, "99.90", "shipped")), rec("COMMIT", o, 20)]
    landing = fresh(JOBS / "dts" / "landing" / "avro")
    for n, records in enumerate([first, second, third], start=1):  # as a topic dump writes them
        write(landing / f"dts-shop-{n:04d}.bin", dts.length_prefixed([dts.encode(r) for r in records]))


def canal_json() -> None:
    """DTS's Canal JSON for the shop's payments: one message per statement (rows in ``data``), an
    update's ``old`` holding the previous values of the changed columns, a DDL (skipped)."""
    types = {"id": "bigint(20)", "order_id": "bigint(20)", "amount": "decimal(10,2)", "method": "varchar(16)",
             "state": "varchar(16)"}
    sql_types = {"id": -5, "order_id": -5, "amount": 3, "method": 12, "state": 12}

    def msg(msg_id: int, second: int, kind: str, data: list[dict] | None, old: list[dict] | None = None,
            sql: str = "") -> str:
        es = 1714554000000 + second * 1000
        body = {"data": data, "database": "shop", "es": es, "id": msg_id, "isDdl": kind == "ALTER",
                "mysqlType": None if data is None else types, "old": old,
                "pkNames": None if data is None else ["id"], "sql": sql,
                "sqlType": None if data is None else sql_types, "table": "payments", "ts": es + 350, "type": kind}
        return json.dumps(body, separators=(",", ":"))

    p1 = {"id": "1", "order_id": "100", "amount": "25.50", "method": "card", "state": "pending"}
    p2 = {"id": "2", "order_id": "102", "amount": "99.90", "method": "paypal", "state": "pending"}
    settled = msg(3, 11, "UPDATE", [{**p1, "state": "settled"}], [{"state": "pending"}])
    files = [
        [msg(1, 3, "INSERT", [p1])],
        [settled, msg(4, 12, "ALTER", None, sql="ALTER TABLE payments ADD COLUMN note varchar(64)"),
         msg(5, 14, "INSERT", [p2])],
        [settled, msg(6, 21, "UPDATE", [{**p2, "state": "settled"}], [{"state": "pending"}])],
    ]
    landing = fresh(JOBS / "dts" / "landing" / "canal")
    for n, lines in enumerate(files, start=1):
        write(landing / f"payments-{n:04d}.json", "".join(line + "\n" for line in lines))


def shareplex_json() -> None:
    """DTS's SharePlex JSON for invoices from an Oracle source: one operation per message, an update
    carrying its changed columns in ``data`` and the old key in ``key``; the re-numbering of
    invoice 7001 to 7101 is such an update (a primary-key update)."""
    t = "SALES.INVOICES"

    def ev(second: int, op: str, before: dict | None = None, after: dict | None = None) -> Event:
        return Event(t, op, ts(second), "0", 0, before, after, ("INVOICE_NO",))

    inv1 = {"INVOICE_NO": 7001, "ORDER_ID": 100, "TOTAL": "25.50", "STATUS": "open"}
    inv2 = {"INVOICE_NO": 7002, "ORDER_ID": 101, "TOTAL": "12.00", "STATUS": "open"}
    history = [ev(4, "I", None, inv1), ev(4, "I", None, inv2),
               ev(11, "U", {"INVOICE_NO": 7001}, {"INVOICE_NO": 7001, "STATUS": "paid"}), ev(12, "D", inv2),
               ev(15, "U", {"INVOICE_NO": 7001}, {"INVOICE_NO": 7101})]
    messages, _ = shareplex_messages(history)
    files = [[messages[0], messages[1]], [messages[2], messages[3]], [messages[2], messages[4]]]
    landing = fresh(JOBS / "dts" / "landing" / "shareplex")
    for n, picked in enumerate(files, start=1):
        write(landing / f"invoices-{n:04d}.json", "".join(m.text + "\n" for m in picked))


# -- Qlik Replicate JSON: metadata (MD) and data (DT) messages --------------------------------------------


def qlik() -> None:
    """The metadata message of each table, then full-load rows (REFRESH) and changes. Bob's move
    logged CITY only: Replicate writes every column, the others as null with their columnMask bit
    0, and lakecdc keeps their values. The key change is an UPDATE with beforeData of the old key."""
    c, o = "shop.customers", "shop.orders"
    tables = {c: Table(c, (("ID", "INT8", 1), ("NAME", "STRING", 0), ("CITY", "STRING", 0), ("TIER", "STRING", 0))),
              o: Table(o, (("ID", "INT8", 1), ("CUSTOMER_ID", "INT8", 0), ("AMOUNT", "STRING", 0),
                           ("STATUS", "STRING", 0)))}

    def ev(second: int, table: str, op: str, before: dict | None = None, after: dict | None = None) -> Event:
        return Event(table, op, ts(second), "0", 0, before, after, ("ID",))

    history = [
        ev(1, c, "I", None, {"ID": 1, "NAME": "Ann", "CITY": "Berlin", "TIER": "gold"}),
        ev(1, c, "I", None, {"ID": 2, "NAME": "Bob", "CITY": "Paris", "TIER": "silver"}),
        ev(1, c, "I", None, {"ID": 3, "NAME": "Cid", "CITY": "Rome", "TIER": "bronze"}),
        ev(2, o, "I", None, {"ID": 100, "CUSTOMER_ID": 1, "AMOUNT": "25.50", "STATUS": "new"}),
        ev(2, o, "I", None, {"ID": 101, "CUSTOMER_ID": 2, "AMOUNT": "12.00", "STATUS": "new"}),
        ev(10, c, "U", {"ID": 2, "CITY": "Paris"}, {"ID": 2, "CITY": "Lyon"}),                 # CITY logged only
        ev(11, o, "U", {"ID": 100, "STATUS": "new"}, {"ID": 100, "STATUS": "paid"}),
        ev(12, o, "D", {"ID": 101, "CUSTOMER_ID": 2, "AMOUNT": "12.00", "STATUS": "new"}),
        ev(13, c, "U", {"ID": 3, "NAME": "Cid", "CITY": "Rome", "TIER": "bronze"},
           {"ID": 30, "NAME": "Cid", "CITY": "Rome", "TIER": "bronze"}),
        ev(14, o, "I", None, {"ID": 102, "CUSTOMER_ID": 30, "AMOUNT": "99.90", "STATUS": "new"}),
        ev(20, o, "U", {"ID": 102, "STATUS": "new"}, {"ID": 102, "STATUS": "shipped"}),
    ]
    # Replicate's full load writes REFRESH rows; the renderer makes every insert of an untouched key
    # one, so a first event that touches order 102 makes its later insert a change (and is dropped)
    touch = ev(0, o, "D", {"ID": 102})
    messages = render_history([touch, *history], tables)[1:]
    data = [json_data(m) for m in messages if m is not None]
    files = [[json_metadata(tables[c]), json_metadata(tables[o]), *data[:5]], data[5:10], [data[5], data[10]]]
    landing = fresh(JOBS / "qlik" / "landing")
    for n, lines in enumerate(files, start=1):
        write(landing / f"replicate-{n:04d}.json", "".join(line + "\n" for line in lines))


def main() -> None:
    # the renderers' clocks start in 2030 (a test of ordering); the story happens on 2024-05-01
    ogg_row_render._CURRENT_TS_BASE = datetime(2024, 5, 1, 9, 5)
    shareplex_render._TIME_BASE = datetime(2024, 5, 1, 9, 1)
    qlik_render._FIRST_TS = datetime(2024, 5, 1, 9, 1)
    goldengate()
    debezium()
    debezium_avro()
    dts_avro()
    canal_json()
    shareplex_json()
    qlik()


if __name__ == "__main__":
    main()
