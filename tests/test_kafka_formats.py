"""Binary change messages read from Kafka topics as from a dump of those topics, format by format:
GoldenGate's Kafka handler Avro, Debezium Avro (Confluent wire format, schemas exported from a
registry), Alibaba DTS Avro and Qlik Replicate Avro, each produced to a real broker
(tests/services.py) as the producer would publish them, then applied with ``lakecdc.apply(Kafka(...))``:
the tables equal those applied from a ``kcat -J`` dump of the same records, nothing quarantined.
(The JSON formats through Kafka: tests/test_kafka.py, tests/test_debezium_postgres.py.)
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import lakecdc
from lakecdc.decode import DECODERS
from lakecdc.run.kafka import Kafka

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.services]
pytest_plugins = ["tests.services"]  # the fixture kafka_bootstrap

Record = tuple[str, bytes | None, bytes | None]  # (topic, key, value)


@dataclass
class Case:
    """What a producer publishes: its records in order, and how lakecdc is told to read them."""

    records: list[Record]
    options: dict[str, str] = field(default_factory=dict)
    keys: dict[str, list[str]] | None = None


def ogg_avro_op(tmp: Path) -> Case:
    """GoldenGate's Kafka handler, ``avro_op`` formatter: one Avro message a record, the table's
    schema in the schema directory."""
    from tests.decode.goldengate.test_ogg_avro import FIX, SEED_MESSAGES, SEED_SCHEMA
    from tests.ogg_avro_render import encode

    return Case([("GG.TCUSTORD", None, encode(SEED_SCHEMA["op"], m)) for m in SEED_MESSAGES["op"]],
                {"schemaDirectory": str(FIX / "op")})


def debezium_avro(tmp: Path) -> Case:
    """Debezium with Confluent's Avro converter: keys and values in the wire format, transaction
    markers on their own topic, a tombstone; the schemas as a registry export."""
    from tests.decode.debezium.test_debezium_avro import IDS, MESSAGES, NS, write_registry

    records: list[Record] = [
        ("dbserver1.transaction" if v[1:5] == IDS["tx"].to_bytes(4, "big") else NS, k, v) for k, v in MESSAGES]
    return Case(records, {"schemaDirectory": str(write_registry(tmp / "export", export=True))})


def dts_avro(tmp: Path) -> Case:
    """Alibaba DTS subscription: DTS Record Avro messages (a DDL, insert, update, delete)."""
    from tests.decode.alibaba.test_dts_avro import DEMO
    from tests.dts_render import encode

    return Case([("cn_hangzhou_dts_topic", None, encode(r)) for r in DEMO])


def qlik_avro(tmp: Path) -> Case:
    """Qlik Replicate's Kafka target in Avro: metadata messages, then data messages with key changes."""
    from tests.canal_render import key_changes
    from tests.qlik_render import Table, avro_data, avro_metadata, render_history

    sc = key_changes()
    tables = {s.name: Table.of(s) for s in sc.specs}
    messages = [m for m in render_history(sc.events, tables) if m is not None]
    values = [*map(avro_metadata, tables.values()), *map(avro_data, messages)]
    return Case([("replicate", None, v) for v in values], keys=sc.keys())


CASES: dict[str, Callable[[Path], Case]] = {
    "ogg-avro-op": ogg_avro_op, "debezium-avro": debezium_avro, "dts-avro": dts_avro, "qlik-avro": qlik_avro}


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def kcat_dump(records: list[Record]) -> str:
    """``records`` as ``kcat -J`` with a base64 deserialiser dumps them (one partition a topic)."""
    offsets: dict[str, int] = {}
    lines = []
    for topic, key, value in records:
        offset = offsets[topic] = offsets.get(topic, -1) + 1
        lines.append(json.dumps({"topic": topic, "partition": 0, "offset": offset, "tstype": "create",
                                 "ts": 1_700_000_000_000 + offset, "broker": 0, "key": b64(key), "payload": b64(value)}))
    return "".join(line + "\n" for line in lines)


def produce(spark: Any, bootstrap: str, records: list[Record]) -> None:
    """``records`` published in this order (one writer task), each to its topic."""
    df = spark.createDataFrame([(t, k, v) for t, k, v in records], "topic STRING, key BINARY, value BINARY").coalesce(1)
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()


def tables(spark: Any, summary: Any) -> dict[str, list[str]]:
    """Every source table of a run: its rows as sorted JSON texts (lakecdc's own columns left out)."""
    out = {}
    for t in summary.tables:
        df = lakecdc.read_table(str(t.target), spark=spark)
        cols = [c for c in df.columns if not c.startswith("_cdc")]
        out[t.source_table] = sorted(json.dumps(r, default=str, sort_keys=True)
                                     for r in df.select(*cols).toArrow().to_pylist())
    return out


def quarantined(spark: Any, workdir: Path) -> list[str]:
    """The reasons of the records the two runs quarantined (for a failure's message)."""
    out = []
    for target in ("from-dump", "from-kafka"):
        path = workdir / target / "_quarantine"
        if path.is_dir():
            out += [f"{target}: {r['reason']} ({r['file']})" for r in
                    lakecdc.read_table(str(path), spark=spark).select("reason", "file").toArrow().to_pylist()]
    return out


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_binary_messages_from_topics_apply_as_from_a_dump_of_them(spark: Any, kafka_bootstrap: str, tmp_path: Path,
                                                                   fmt: str) -> None:
    """A format's records published to a broker apply from the topics (``Kafka`` input, records
    landed in the framing its decoder reads) exactly as from a kcat dump of the same records: the
    same tables and counts, nothing quarantined; a second run finds nothing new."""
    assert DECODERS[fmt].KAFKA_RECORDS == "kcat-base64"
    case = CASES[fmt](tmp_path)
    prefix = f"lakecdc-{uuid.uuid4().hex[:10]}."
    records = [(prefix + topic, key, value) for topic, key, value in case.records]

    dump = tmp_path / "dump" / "topics.json"
    dump.parent.mkdir()
    dump.write_text(kcat_dump(records))
    kwargs: dict[str, Any] = dict(format=fmt, options=case.options, spark=spark)
    if case.keys is not None:
        kwargs["keys"] = case.keys
    from_dump = lakecdc.apply(dump.parent, tmp_path / "from-dump", **kwargs)

    produce(spark, kafka_bootstrap, records)
    source = Kafka(kafka_bootstrap, subscribe_pattern=re.escape(prefix) + ".*")
    from_kafka = lakecdc.apply(source, tmp_path / "from-kafka", **kwargs)

    assert from_dump.ok and from_kafka.ok
    assert from_kafka.tables, from_kafka
    assert from_dump.quarantined_unrouted == from_kafka.quarantined_unrouted == 0, quarantined(spark, tmp_path)
    counts = {t.source_table: (t.events, t.inserted, t.updated, t.deleted, t.quarantined) for t in from_dump.tables}
    assert {t.source_table: (t.events, t.inserted, t.updated, t.deleted, t.quarantined)
            for t in from_kafka.tables} == counts
    assert all(q == 0 for *_, q in counts.values()), counts
    assert tables(spark, from_kafka) == tables(spark, from_dump)
    again = lakecdc.apply(source, tmp_path / "from-kafka", **kwargs)
    assert again.ok and not again.tables
