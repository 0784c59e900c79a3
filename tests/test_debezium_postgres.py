"""A real PostgreSQL, Debezium's PostgreSQL connector in Kafka Connect and a real broker
(tests/services.py), into Delta through ``lakecdc.apply(lakecdc.Kafka(...))`` and
``lakecdc.stream``: every Delta table ends equal to ``SELECT *`` of its PostgreSQL table, cell by
cell, run after run, also across a stream killed with SIGKILL and started again.

The connector's settings (:func:`tests.services.debezium_postgres_config`) are chosen deliberately:

* ``plugin.name=pgoutput``: PostgreSQL's own logical decoding plugin (no server extension);
* ``skipped.operations=none``: Debezium skips ``TRUNCATE`` by default; here it publishes it (op ``t``);
* ``decimal.handling.mode=precise``: ``numeric(p, s)`` as a Connect ``Decimal`` with its scale and
  precision (exact; ``double`` would round, ``string`` would lose the type);
* ``time.precision.mode=adaptive_time_microseconds``: ``timestamp(6)`` as ``MicroTimestamp``
  (exact microseconds), ``timestamptz`` as ``ZonedTimestamp`` text;
* ``binary.handling.mode=bytes``: ``bytea`` as bytes (base64 in JSON);
* JSON converters with ``schemas.enable=true`` for keys and values: the Connect schema gives
  lakecdc the column types and the key columns.

**Type mapping asserted** (:data:`EXPECTED_TYPES`, PostgreSQL -> Delta): integer -> int;
numeric(p, s) -> decimal(p, s); unconstrained numeric (``VariableScaleDecimal``) -> decimal of
the values' widest precision and scale; boolean -> boolean; text -> string; date -> date;
timestamp(6) -> timestamp (its wall time read as UTC); timestamptz -> timestamp (the instant, UTC);
json and jsonb -> string (the JSON text); bytea -> binary; uuid -> string; text[] and int[] ->
string (the array as JSON text). A column added by ``ALTER TABLE ... ADD COLUMN`` joins the
Delta table with the first change that carries it (NULL in the rows written before).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from lakecdc.run.kafka import CHECKPOINT, Kafka

try:
    from tests.services import debezium_postgres_config
    from tests.test_kafka import printed_lines, wait_for
except ModuleNotFoundError:  # (run from tests/)
    from services import debezium_postgres_config  # type: ignore[no-redef]
    from test_kafka import printed_lines, wait_for  # type: ignore[no-redef]

if TYPE_CHECKING:
    from tests.services import KafkaConnect, Postgres

pytest_plugins = ["tests.services"]  # the fixtures kafka_connect and postgres
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.services, pytest.mark.slow]

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (pip install -e '.[dev]')")

REPO = Path(__file__).resolve().parents[1]
CHILD = REPO / "tests" / "debezium_stream_child.py"

#: The Delta type of each PostgreSQL column of the workload (Spark's simple strings).
EXPECTED_TYPES: dict[str, dict[str, str]] = {
    "items": {
        "id": "int", "name": "string", "qty": "int", "price": "decimal(12,4)", "total": "decimal(30,10)",
        "ratio": "decimal", "active": "boolean", "born": "date", "seen": "timestamp", "seen_tz": "timestamp",
        "doc": "string", "docb": "string", "blob": "binary", "uid": "string", "tags": "string",
        "nums": "string", "note": "string", "graded": "decimal(6,2)",
    },
    "docs": {"id": "int", "title": "string", "body": "string"},
    "wiped": {"id": "int", "v": "string"},
}

DDL = """
create schema {s};
create table {s}.items (
    id int primary key, name text not null, qty int, price numeric(12, 4), total numeric(30, 10),
    ratio numeric, active boolean, born date, seen timestamp(6), seen_tz timestamptz, doc json,
    docb jsonb, blob bytea, uid uuid, tags text[], nums int[]);
create table {s}.docs (id int primary key, title text, body text);  -- REPLICA IDENTITY DEFAULT
create table {s}.wiped (id int primary key, v text);
create table {s}.fence (phase int primary key);
"""

#: An items row from its id ``i`` (an SQL expression over ``i``): every type, some NULLs.
ITEM = """
    i, 'item ' || i || ' ✓', i * 3, (i * 1.2345)::numeric(12, 4) - 10,
    case when i % 4 = 0 then null else (i * 123456789.0123456789)::numeric(30, 10) end,
    (i::numeric / 7)::numeric(10, 5),
    i % 2 = 0, date '2024-01-01' + i, timestamp '2024-03-10 01:59:59.123456' + i * interval '37 minutes',
    timestamptz '2024-03-31 00:30:00.5+01' + i * interval '1 hour 1 second',
    json_build_object('i', i, 'tags', json_build_array('a', i), 'pi', 3.14159),
    jsonb_build_object('i', i, 'nested', jsonb_build_object('x', 'y"z')),
    case when i % 5 = 0 then null else decode(lpad(to_hex(i * 4099), 8, '0') || '00ff', 'hex') end,
    md5(i::text)::uuid, array['t' || i, 'with, comma', null], array[i, -i]
"""

#: A text of 19,200 characters that PostgreSQL compresses to more than 2 kB: stored TOASTed.
BIG = "(select string_agg(md5({seed} || '-' || g), '') from generate_series(1, 600) g)"


class Pipeline:
    """One schema of PostgreSQL tables captured by its own connector (slot, publication, topics)."""

    def __init__(self, pg: Postgres, connect: KafkaConnect) -> None:
        tag = uuid.uuid4().hex[:8]
        self.pg, self.connect = pg, connect
        self.schema, self.prefix, self.connector = f"s_{tag}", f"pg_{tag}", f"lakecdc-pg-{tag}"
        self.phase = 0

    def start(self) -> None:
        """Creates the connector: it snapshots the tables' rows, then streams their changes."""
        self.connect.create_connector(self.connector, debezium_postgres_config(self.pg, self.prefix, self.schema))

    def stop(self) -> None:
        """Deletes the connector and drops its replication slot."""
        try:
            self.connect.delete_connector(self.connector)
        finally:
            for _ in range(20):  # the slot stays active for a moment after the task stops
                active = self.pg.sql(f"select active from pg_replication_slots where slot_name = '{self.prefix}'")
                if active.strip() != "t":
                    break
                time.sleep(0.5)
            self.pg.sql(f"select pg_drop_replication_slot(slot_name) from pg_replication_slots "
                        f"where slot_name = '{self.prefix}' and not active")

    @property
    def topics(self) -> list[str]:
        """The topics lakecdc reads: those of the tables compared (not the fence's)."""
        return [self.topic(t) for t in EXPECTED_TYPES]

    @property
    def source(self) -> Kafka:
        """The connector's topics as lakecdc's input."""
        return Kafka(self.connect.bootstrap, subscribe=self.topics)

    def topic(self, table: str) -> str:
        return f"{self.prefix}.{self.schema}.{table}"

    def sql(self, statements: str) -> None:
        """Runs ``statements`` (``{s}`` is the schema) in one transaction."""
        self.pg.sql(statements.format(s=self.schema))

    def published(self, timeout: float = 90.0) -> None:
        """Returns once Debezium has published every change committed so far: a fence row is
        committed, read back from its topic, and the end offsets of all the connector's topics
        then stay the same for a second."""
        self.phase += 1
        self.sql(f"insert into {{s}}.fence values ({self.phase})")
        consumer = ck.Consumer({"bootstrap.servers": self.connect.bootstrap, "group.id": f"fence-{uuid.uuid4()}",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([self.topic("fence")])
        deadline = time.monotonic() + timeout
        try:
            while True:
                assert time.monotonic() < deadline, f"fence {self.phase} did not arrive in {timeout:.0f}s"
                record = consumer.poll(0.5)
                if record is None or record.error() or record.value() is None:
                    continue
                after = json.loads(record.value())["payload"]["after"]
                if after and after["phase"] == self.phase:
                    break
            ends: dict[Any, int] | None = None
            while ends != (now := self._end_offsets(consumer)):
                ends = now
                time.sleep(1.0)
        finally:
            consumer.close()

    def _end_offsets(self, consumer: Any) -> dict[Any, int]:
        topics = [t for t in consumer.list_topics(timeout=10).topics if t.startswith(self.prefix + ".")]
        out = {}
        for topic in topics:
            for partition in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                out[(topic, partition)] = consumer.get_watermark_offsets(ck.TopicPartition(topic, partition),
                                                                         timeout=10)[1]
        return out

    def pg_rows(self, table: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """The table's column types (``udt_name``) and rows (``row_to_json``, timestamps in UTC)."""
        types = dict(line.split("|") for line in self.pg.sql(
            f"select column_name, udt_name from information_schema.columns "
            f"where table_schema = '{self.schema}' and table_name = '{table}'").splitlines() if line)
        text = self.pg.sql(f"set timezone = 'UTC'; select row_to_json(t) from {self.schema}.{table} t")
        return types, [json.loads(line, parse_float=Decimal) for line in text.splitlines() if line]


def _from_postgres(value: Any, udt: str) -> Any:
    """A ``row_to_json`` value as the Python value its Delta column must hold (mapped back)."""
    if value is None:
        return None
    if udt == "numeric":
        return Decimal(value)
    if udt == "date":
        return dt.date.fromisoformat(value)
    if udt == "timestamp":
        return dt.datetime.fromisoformat(value).replace(tzinfo=dt.timezone.utc)
    if udt == "timestamptz":
        return dt.datetime.fromisoformat(value).astimezone(dt.timezone.utc)
    if udt == "bytea":
        return bytes.fromhex(value[2:])
    return value  # numbers, text, booleans, uuid text; json, jsonb and arrays parsed


def _from_delta(value: Any, udt: str) -> Any:
    """A Delta cell read back for comparison: JSON text (json, jsonb, arrays) parsed, decimals
    as Decimal, timestamps as UTC."""
    if value is None:
        return None
    if udt in ("json", "jsonb") or udt.startswith("_"):
        assert isinstance(value, str), f"a {udt} column holds {value!r}, expected its JSON text"
        return json.loads(value, parse_float=Decimal)
    if udt == "numeric":
        return Decimal(value)
    if isinstance(value, dt.datetime):
        assert value.tzinfo is not None, "timestamps read back without their zone"
        return value.astimezone(dt.timezone.utc)
    return value


def assert_delta_equals_postgres(pipe: Pipeline, target: Path, when: str) -> None:
    """Every table of :data:`EXPECTED_TYPES`: the Delta table's columns have the expected types
    and its rows equal PostgreSQL's, cell by cell (the Delta table read with delta-rs: the rows
    ``lakecdc.read_table`` gives, without a Spark job per table)."""
    for table, expected_types in EXPECTED_TYPES.items():
        udts, pg = pipe.pg_rows(table)
        delta = DeltaTable(str(target / f"{pipe.schema}.{table}"))
        types = {f.name: f.type for f in delta.schema().fields}
        assert set(udts) <= set(types) and not {c for c in types if not c.startswith("_") and c not in udts}, (
            f"{when}: {table}: Delta has columns {sorted(types)}, PostgreSQL {sorted(udts)}")
        for name in udts:
            delta_type, want = _type_text(types[name]), expected_types[name]
            assert delta_type == want or (want == "decimal" and delta_type.startswith("decimal(")), (
                f"{when}: {table}.{name} ({udts[name]}) is {delta_type} in Delta, expected {want}")
        rows = pa.table(delta.to_pyarrow_table(columns=list(udts))).to_pylist()
        got = sorted(({c: _from_delta(r[c], udts[c]) for c in udts} for r in rows), key=lambda r: r["id"])
        want_rows = sorted(({c: _from_postgres(r[c], udts[c]) for c in udts} for r in pg), key=lambda r: r["id"])
        assert [r["id"] for r in got] == [r["id"] for r in want_rows], f"{when}: {table}: the keys differ"
        for g, w in zip(got, want_rows, strict=True):
            diff = {c: (g[c], w[c]) for c in udts if g[c] != w[c]}
            assert not diff, f"{when}: {table} row {w['id']}: (Delta, PostgreSQL) differ: {diff}"


def _type_text(delta_type: Any) -> str:
    """A delta-rs primitive type as Spark's simple string (``integer`` -> ``int``)."""
    text = str(getattr(delta_type, "type", delta_type))
    return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}.get(text, text)


def preload(pipe: Pipeline) -> None:
    """The tables and the rows the connector's snapshot reads."""
    pipe.sql(DDL)
    pipe.sql(f"insert into {{s}}.items select {ITEM} from generate_series(1, 30) i")
    pipe.sql("insert into {s}.docs select i, 'doc ' || i, " + BIG.format(seed="i") + " from generate_series(1, 5) i")
    pipe.sql("insert into {s}.wiped select i, 'w' || i from generate_series(1, 10) i")
    pipe.sql("insert into {s}.fence values (0)")  # its topic exists once the snapshot is published


MID_WORKLOAD = [
    f"insert into {{s}}.items select {ITEM} from generate_series(31, 40) i",
    "update {s}.items set name = 'renamed ' || id, qty = null where id between 1 and 10",
    "update {s}.items set price = -price, seen_tz = null, docb = docb || '{{\"k\": [1, 2.50]}}' where id % 3 = 0",
    "delete from {s}.items where id between 11 and 15",
    "update {s}.items set id = id + 1000 where id in (16, 17)",  # primary-key updates
    "update {s}.docs set title = 'retitled ' || id where id in (1, 2)",  # body TOASTed, unchanged
    "update {s}.docs set body = " + BIG.format(seed="'new'") + " where id = 3",
    "delete from {s}.docs where id = 4",
    "insert into {s}.docs values (6, 'six', " + BIG.format(seed="6") + ")",
    "insert into {s}.wiped values (11, 'w11'), (12, 'w12'); update {s}.wiped set v = 'x' where id = 1",
    "truncate {s}.wiped",
    "insert into {s}.wiped values (100, 'after truncate'), (101, null)",
    "begin; update {s}.items set qty = 7 where id = 20; update {s}.items set id = 2020 where id = 20; "
    "update {s}.items set name = 'moved' where id = 2020; commit",
]

END_WORKLOAD = [
    "alter table {s}.items add column note text, add column graded numeric(6, 2)",
    "update {s}.items set note = 'noted ' || id, graded = id / 3.0 where id between 21 and 25",
    f"insert into {{s}}.items select {ITEM}, 'new ' || i, i + 0.25 from generate_series(41, 45) i",
    "update {s}.items set qty = qty + 1 where id between 26 and 30",  # note stays NULL
    "delete from {s}.items where id in (22, 41)",
    "update {s}.items set id = 3000 + id where id = 23",
    "update {s}.docs set title = 'again' where id = 1; update {s}.docs set title = null, body = null where id = 5",
    "begin; update {s}.docs set title = 't2' where id = 2; update {s}.docs set body = 'short now' where id = 2; commit",
    "truncate {s}.wiped; insert into {s}.wiped values (200, 'last')",
]


def test_debezium_postgres_changes_apply_equal_to_postgres_run_after_run(
    spark: Any, postgres: Postgres, kafka_connect: KafkaConnect, kafka_jar: None, tmp_path: Path,
) -> None:
    """A snapshot, then inserts, updates of a few columns, deletes, primary-key updates, TRUNCATE,
    an unchanged TOASTed column (Debezium's placeholder: never written over the value), every
    column type of :data:`EXPECTED_TYPES` and an ``ALTER TABLE ... ADD COLUMN``, applied from the
    connector's topics in three runs: after each, every Delta table equals its PostgreSQL table."""
    pipe, target = Pipeline(postgres, kafka_connect), tmp_path / "target"
    preload(pipe)
    pipe.start()
    try:
        for when, workload in (("after the snapshot", []), ("mid-workload", MID_WORKLOAD),
                               ("at the end", END_WORKLOAD)):
            for statements in workload:
                pipe.sql(statements)
            pipe.published()
            summary = lakecdc.apply(pipe.source, target, format="debezium-json", spark=spark)
            assert summary.ok, f"{when}: {summary}"
            assert all(t.quarantined == 0 for t in summary.tables), f"{when}: quarantined: {summary.tables}"
            assert_delta_equals_postgres(pipe, target, when)
    finally:
        pipe.stop()
    docs = {r["id"]: r for r in pipe.pg_rows("docs")[1]}
    assert docs[1]["title"] == "again" and len(docs[1]["body"]) == 19200  # kept through two placeholders
    landed = "".join(f.read_text(errors="replace") for f in (target / "_lakecdc" / "kafka").rglob("*")
                     if f.is_file() and CHECKPOINT not in f.parts)
    assert landed.count("__debezium_unavailable_value") >= 3, "Debezium sent no TOAST placeholder: the test proves nothing"


@pytest.fixture(scope="session")
def kafka_jar() -> None:
    """Skips when Spark's Kafka connector is not cached for this PySpark."""
    from lakecdc.spark.jars import cached_jars, spark_version

    if not any("spark-sql-kafka" in jar for jar in cached_jars() or []):
        pytest.skip(f"Spark's Kafka connector for PySpark {spark_version()} is not cached")


def random_workload(rnd: random.Random, chunk: int, live: set[int]) -> list[str]:
    """One chunk of changes to items and docs: inserts of new ids, updates of a few columns,
    deletes and primary-key updates of live ids (``live`` kept up to date), docs' titles changed
    while their TOASTed bodies are not."""
    out = []
    for n in range(12):
        op = rnd.random()
        if op < 0.35 or len(live) < 5:
            i = chunk * 100 + n + 50
            out.append(f"insert into {{s}}.items select {ITEM} from generate_series({i}, {i}) i")
            live.add(i)
            continue
        i = rnd.choice(sorted(live))
        if op < 0.7:
            out.append(f"update {{s}}.items set qty = {n}, price = {rnd.randint(-999, 999)}.5, "
                       f"seen_tz = now() where id = {i}")
        elif op < 0.85:
            out.append(f"delete from {{s}}.items where id = {i}")
            live.discard(i)
        else:
            out.append(f"update {{s}}.items set id = {i + 10_000} where id = {i}")
            live.discard(i)
            live.add(i + 10_000)
    out.append(f"update {{s}}.docs set title = 'chunk {chunk}' where id = {chunk % 5 + 1}")
    return out


def test_a_killed_and_restarted_stream_of_debezium_postgres_topics_ends_equal_to_postgres(
    spark: Any, postgres: Postgres, kafka_connect: KafkaConnect, kafka_jar: None, tmp_path: Path,
) -> None:
    """``lakecdc.stream`` over the connector's topics in a child process, killed with SIGKILL at a
    random moment while PostgreSQL keeps changing and started again, twice; a last
    ``apply`` takes what the killed ones left: every Delta table equals PostgreSQL's (nothing
    lost, nothing applied twice)."""
    pipe, target = Pipeline(postgres, kafka_connect), tmp_path / "target"
    preload(pipe)
    pipe.start()
    rnd, live = random.Random(7), set(range(1, 31))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(CHILD), kafka_connect.bootstrap, ",".join(pipe.topics), str(target)]
    try:
        for kill in range(2):
            if kill:  # changes the killed child did not see: the next one has something to apply
                for statements in random_workload(rnd, 10 + kill, live):
                    pipe.sql(statements)
            log = tmp_path / f"child-{kill}.log"
            with log.open("w") as err:
                child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
            lines = printed_lines(child)
            try:
                assert wait_for(lines, "batch ", limit=240.0), f"child {kill} applied nothing: {log.read_text()[-3000:]}"
                for statements in random_workload(rnd, kill, live):
                    pipe.sql(statements)
                time.sleep(rnd.uniform(0.0, 4.0))  # killed while landing or applying, or between
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait()
        pipe.published()
        summary = lakecdc.apply(pipe.source, target, format="debezium-json", spark=spark)
        assert summary.ok and all(t.quarantined == 0 for t in summary.tables), summary
        assert_delta_equals_postgres(pipe, target, "after the killed streams")
    finally:
        pipe.stop()
