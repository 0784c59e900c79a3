"""The real services the Kafka tests run on (tests/services.py, scripts/services/): a record goes
through the broker, an Avro schema through the registry's Confluent API, and rows changed in
PostgreSQL come out of Debezium's connector in Kafka Connect as change events."""

from __future__ import annotations

import base64
import json
import time
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.services import KafkaBroker, KafkaConnect, Postgres, SchemaRegistry

pytest_plugins = ["tests.services"]  # the fixtures kafka_broker, kafka_connect, postgres, schema_registry
pytestmark = [pytest.mark.slow, pytest.mark.services]

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (pip install -e '.[dev]')")


def _consumer(bootstrap: str, topic: str) -> Any:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"lakecdc-test-{uuid.uuid4()}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    return consumer


def _read(consumer: Any, until: Any, timeout: float = 60.0) -> list[Any]:
    """The records polled until ``until(records)`` holds; fails with what came when it times out.
    (A topic that does not exist yet is waited for: Debezium creates it with its first event.)"""
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while not until(records):
        if time.monotonic() > deadline:
            got = [(r.key(), r.value()) for r in records]
            pytest.fail(f"the records expected did not arrive in {timeout:.0f}s; got {got}")
        record = consumer.poll(0.5)
        if record is None:
            continue
        if record.error():
            if record.error().code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise ck.KafkaException(record.error())
        records.append(record)
    return records


def test_broker_keeps_records_in_order(kafka_broker: KafkaBroker) -> None:
    """Records produced to the broker come back from a consumer with their keys, values, headers
    and consecutive offsets, in the order they were produced."""
    topic = f"lakecdc-test-{uuid.uuid4().hex[:8]}"
    producer = ck.Producer({"bootstrap.servers": kafka_broker.bootstrap, "enable.idempotence": True})
    sent = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(3)]
    for key, value in sent:
        producer.produce(topic, key=key, value=value, headers=[("source", b"lakecdc-test")])
    assert producer.flush(30) == 0, "the broker did not acknowledge every record"

    consumer = _consumer(kafka_broker.bootstrap, topic)
    try:
        records = _read(consumer, lambda rs: len(rs) >= len(sent))
    finally:
        consumer.close()
    assert [(r.key(), r.value()) for r in records] == sent
    assert [r.offset() for r in records] == [0, 1, 2]
    assert {r.partition() for r in records} == {0}
    assert all(r.headers() == [("source", b"lakecdc-test")] for r in records)


AVRO_SCHEMA = {
    "type": "record", "name": "Item", "namespace": "lakecdc.test",
    "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"], "default": None}],
}


def test_registry_serves_avro_schemas_by_subject_and_id(schema_registry: SchemaRegistry) -> None:
    """An Avro schema registered under a subject through the Confluent API gets an id; the same
    schema comes back by that id and as the subject's latest version, and registering it again
    gives the same id, while a changed schema gets a new one."""
    subject = f"lakecdc-test-{uuid.uuid4().hex[:8]}-value"
    registered = schema_registry.request("POST", f"/subjects/{subject}/versions",
                                         {"schema": json.dumps(AVRO_SCHEMA)})
    schema_id = registered["id"]
    assert isinstance(schema_id, int)

    by_id = schema_registry.request("GET", f"/schemas/ids/{schema_id}")
    assert json.loads(by_id["schema"]) == AVRO_SCHEMA
    latest = schema_registry.request("GET", f"/subjects/{subject}/versions/latest")
    assert (latest["subject"], latest["id"], latest["version"]) == (subject, schema_id, 1)
    assert json.loads(latest["schema"]) == AVRO_SCHEMA
    assert subject in schema_registry.request("GET", "/subjects")

    again = schema_registry.request("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(AVRO_SCHEMA)})
    assert again["id"] == schema_id
    wider = {**AVRO_SCHEMA, "fields": [*AVRO_SCHEMA["fields"],
                                       {"name": "price", "type": ["null", "double"], "default": None}]}
    second = schema_registry.request("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(wider)})
    assert second["id"] != schema_id
    assert schema_registry.request("GET", f"/subjects/{subject}/versions") == [1, 2]


def _decimal(encoded: str, scale: int) -> Decimal:
    """A Connect Decimal as Debezium's JSON carries it: the unscaled big-endian integer in base64."""
    return Decimal(int.from_bytes(base64.b64decode(encoded), "big", signed=True)).scaleb(-scale)


def test_debezium_publishes_postgres_changes(postgres: Postgres, kafka_connect: KafkaConnect) -> None:
    """Debezium's PostgreSQL connector (pgoutput, its own slot and publication) snapshots a
    preloaded row, then publishes an insert, an update and a delete made in PostgreSQL as events
    with op r, c, u, d, the after images' values, the delete's key in ``before`` and a tombstone."""
    table = f"items_{uuid.uuid4().hex[:8]}"
    postgres.sql(f"create table {table} (id int primary key, name text not null, price numeric(10, 2), "
                 f"seen timestamptz); insert into {table} values (1, 'first', 1.50, '2024-05-01 10:00:00+00')")
    connector = f"lakecdc-{table}"
    kafka_connect.create_connector(connector, {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": postgres.host,
        "database.port": str(postgres.port),
        "database.user": postgres.user,
        "database.password": postgres.password,
        "database.dbname": postgres.database,
        "topic.prefix": "lakecdc",
        "plugin.name": "pgoutput",
        "slot.name": table,
        "publication.name": table,
        "publication.autocreate.mode": "filtered",
        "table.include.list": f"public.{table}",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    })
    consumer = _consumer(kafka_connect.bootstrap, f"lakecdc.public.{table}")
    try:
        snapshot = _read(consumer, lambda rs: len(rs) >= 1)
        postgres.sql(f"insert into {table} values (2, 'second', 2.25, '2024-05-02 11:30:00+00'); "
                     f"update {table} set name = 'renamed', price = 3.75 where id = 2; "
                     f"delete from {table} where id = 1")
        # insert, update, delete and the delete's tombstone
        changes = _read(consumer, lambda rs: len(rs) >= 4)
    finally:
        consumer.close()
        kafka_connect.delete_connector(connector)

    events = [(json.loads(r.key()), json.loads(r.value()) if r.value() is not None else None)
              for r in snapshot + changes]
    assert [(key["id"], event and event["op"]) for key, event in events] == [
        (1, "r"), (2, "c"), (2, "u"), (1, "d"), (1, None)]
    (_, read), (_, insert), (_, update), (_, delete), _ = events
    assert read["after"]["name"] == "first" and _decimal(read["after"]["price"], 2) == Decimal("1.50")
    assert read["source"]["snapshot"] in ("true", "last", "first_in_data_collection", "last_in_data_collection")
    assert insert["before"] is None
    assert (insert["after"]["id"], insert["after"]["name"]) == (2, "second")
    assert _decimal(insert["after"]["price"], 2) == Decimal("2.25")
    assert insert["after"]["seen"] == "2024-05-02T11:30:00.000000Z"
    assert (update["after"]["name"], _decimal(update["after"]["price"], 2)) == ("renamed", Decimal("3.75"))
    assert delete["after"] is None and delete["before"]["id"] == 1
    assert all(e["source"]["table"] == table and e["source"]["connector"] == "postgresql"
               for _, e in events[:4])
    lsns = [e["source"]["lsn"] for _, e in events[1:4]]
    assert lsns == sorted(lsns), f"the changes' LSNs are out of commit order: {lsns}"
