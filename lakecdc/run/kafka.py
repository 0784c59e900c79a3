"""Kafka topics as input: each batch of records is landed as files, then applied like any files.

A capture tool publishes its change messages to Kafka topics (GoldenGate's Kafka handler,
Debezium through Kafka Connect, Canal, Qlik Replicate, DTS). lakecdc reads them with Spark's Kafka
source (``spark-sql-kafka-0-10``, which the embedded session loads) and **lands** each batch of
records: one directory under the landing directory (default ``<target>/_lakecdc/kafka``) holding
the records, in offset order, in the file framing the format's decoder reads
(:attr:`~lakecdc.decode.base.Decoder.KAFKA_RECORDS`), and ``_offsets.json``, the batch's offset
range per topic partition. The landed files are then applied by :func:`lakecdc.apply`, so a Kafka
record takes exactly the path a file takes: the same decoding, quarantine (which reads a bad
record's raw text again from its landed file), ledger and summary.

Exactly once:

* the records are read by a Structured Streaming query (an available-now trigger for
  :func:`lakecdc.apply`, the stream's own for :func:`lakecdc.stream`) whose checkpoint, in the
  landing directory, holds the offsets each batch read: a run goes on after the last batch it
  landed, and a batch interrupted before its checkpoint commit is read again with the same offsets;
* a batch's directory is written under a temporary name and renamed into place with its
  ``_offsets.json`` inside: it is there whole or not at all; its name carries the query's batch id
  and a hash of its offset ranges, so a batch read again lands into the directory it landed into
  the first time, which is then left as it is (a killed landing leaves a temporary directory,
  removed by the next run);
* the landed files are inputs like any other: the ledger applies each once, also those landed by
  a process killed before it applied them.

The record's place (topic, partition, offset) is its arrival, the last tie-breaker of the order
(semantics.md): batch directories sort in the order the batches were read (by batch id), a
landed file's path names the topic and partition, and the records of a partition sit in it in
offset order.

Batches are landed through the local file system (rename is the commit): the landing directory
must be on a file system with an atomic rename (a local or mounted volume).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakecdc.decode import DECODERS
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.decode.base import Decoder

#: The landing directory of a target, when the :class:`Kafka` input names none.
DEFAULT_LANDING = Path("_lakecdc") / "kafka"
#: The file in each landed batch's directory that lists its offset ranges.
OFFSETS_FILE = "_offsets.json"
_TEMPORARY = ".landing-"

#: How each framing writes a record as one line (SQL over the Kafka source's columns).
#: ``values``: the record's value, as text (formats whose messages name their table and position
#: themselves: GoldenGate JSON, Canal JSON); ``kcat-text`` / ``kcat-base64``: one ``kcat -J`` JSON
#: line with the record's topic, partition, offset and timestamp, its key and value as text (JSON
#: messages) or base64 (binary messages: Avro). A record without a value (a tombstone) is a line
#: of its own in the kcat framings; in ``values`` it has no line (it carries nothing).
_KCAT = (
    "to_json(named_struct('topic', topic, 'partition', partition, 'offset', offset, "
    "'tstype', CASE timestampType WHEN 0 THEN 'create' WHEN 1 THEN 'logappend' ELSE 'unknown' END, "
    "'ts', unix_millis(timestamp), 'broker', -1, 'key', {key}, 'payload', {value}), "
    "map('ignoreNullFields', 'false'))"
)
#: Bytes as one base64 text: Spark's ``base64`` cuts it into MIME lines of 76 characters where
#: ``spark.sql.chunkBase64String.enabled`` is on (Spark 4.0's default), a kcat line never is (CR and LF
#: named by their codes: a session's string-literal escaping does not change them).
_BASE64 = "translate(base64({}), concat(chr(13), chr(10)), '')"
FRAMINGS: dict[str, str] = {
    "values": "CAST(value AS STRING)",
    "kcat-text": _KCAT.format(key="CAST(key AS STRING)", value="CAST(value AS STRING)"),
    "kcat-base64": _KCAT.format(key=_BASE64.format("key"), value=_BASE64.format("value")),
}


@dataclass(frozen=True)
class Kafka:
    """Kafka topics to read: the input of :func:`lakecdc.apply` and :func:`lakecdc.stream` in
    place of files.

    Args:
        bootstrap_servers: ``HOST:PORT[,HOST:PORT...]`` of the brokers.
        subscribe: topics, comma-separated (or a list); or
        subscribe_pattern: a Java regular expression of topic names.
        starting_offsets: where partitions never landed before start: ``earliest`` (default) or
            ``latest`` (Spark's ``startingOffsets``; a JSON of offsets per partition too).
        options: more options of Spark's Kafka source (``kafka.security.protocol``, ...).
        landing: where batches land (default ``<target>/_lakecdc/kafka``).
    """

    bootstrap_servers: str
    subscribe: str | tuple[str, ...] | list[str] | None = None
    subscribe_pattern: str | None = None
    starting_offsets: str = "earliest"
    options: Mapping[str, str] = field(default_factory=dict)
    landing: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if not self.bootstrap_servers or not str(self.bootstrap_servers).strip():
            raise ConfigError("kafka: bootstrap_servers is empty (expected HOST:PORT[,HOST:PORT...])")
        if (self.subscribe is None) == (self.subscribe_pattern is None):
            raise ConfigError("kafka: give the topics as exactly one of subscribe (names) or subscribe_pattern (a regex)")
        if self.subscribe is not None and not self.topics:
            raise ConfigError("kafka: subscribe names no topic")

    def describe(self) -> str:
        """The topics and brokers, for messages."""
        topics = ",".join(self.topics) if self.subscribe is not None else f"pattern {self.subscribe_pattern}"
        return f"{topics} at {self.bootstrap_servers}"

    @property
    def topics(self) -> tuple[str, ...]:
        """The subscribed topic names (empty for a pattern)."""
        if self.subscribe is None:
            return ()
        names = self.subscribe.split(",") if isinstance(self.subscribe, str) else self.subscribe
        return tuple(n.strip() for n in names if n.strip())

    def landing_dir(self, target: str | os.PathLike[str]) -> Path:
        """Where this input's batches land for ``target``."""
        return Path(self.landing).resolve() if self.landing is not None else Path(target).resolve() / DEFAULT_LANDING

    def source_options(self) -> dict[str, str]:
        """The options of Spark's Kafka source, without the offsets."""
        out = {"kafka.bootstrap.servers": str(self.bootstrap_servers), "includeHeaders": "false"}
        if self.subscribe is not None:
            out["subscribe"] = ",".join(self.topics)
        else:
            out["subscribePattern"] = str(self.subscribe_pattern)
        out.update({str(k): str(v) for k, v in self.options.items()})
        return out


def framing_of(decoder: Decoder) -> str:
    """How records of ``decoder``'s format are landed (:data:`FRAMINGS`); a format that cannot be
    read from Kafka is a :class:`ConfigError` naming those that can."""
    framing = decoder.KAFKA_RECORDS
    if framing is None:
        able = sorted(name for name, cls in DECODERS.items() if cls.KAFKA_RECORDS)
        raise ConfigError(f"format {decoder.name!r} is not read from Kafka; formats that are: {', '.join(able)}")
    return framing


def remove_unfinished(landing: Path) -> None:
    """Remove what a killed landing left (temporary directories)."""
    if landing.is_dir():
        for p in landing.iterdir():
            if p.name.startswith(_TEMPORARY):
                shutil.rmtree(p, ignore_errors=True)


# --- landing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Landed:
    """One landed batch: its directory (None when the batch held no record) and its ranges."""

    directory: Path | None
    ranges: tuple[dict[str, Any], ...]

    @property
    def records(self) -> int:
        return sum(int(r["records"]) for r in self.ranges)


def land(records: DataFrame, landing: Path, framing: str, batch_id: int) -> Landed:
    """Land the Kafka records ``records`` (Spark's Kafka source columns), the micro-batch
    ``batch_id`` of the landing query, under ``landing`` as one batch directory, in ``framing``
    (:data:`FRAMINGS`); see the module docstring. A batch whose directory exists (the same batch
    and ranges landed before) is not landed again."""
    ranges = _ranges(records)
    if not ranges:
        return Landed(None, ())
    name = _batch_name(batch_id, ranges)
    final = landing / name
    if (final / OFFSETS_FILE).is_file():
        return Landed(final, ranges)
    landing.mkdir(parents=True, exist_ok=True)
    temporary = landing / f"{_TEMPORARY}{uuid.uuid4().hex}"
    line = FRAMINGS[framing]
    lines = records.where("value IS NOT NULL") if framing == "values" else records
    (
        # (Spark's Kafka source reads a partition's offset range in one task, in offset order; the
        # sort keeps that order whatever the source does and is the order the writer needs)
        lines.sortWithinPartitions("topic", "partition", "offset")
        .selectExpr("topic", "CAST(partition AS STRING) AS partition", f"{line} AS value")
        .write.partitionBy("topic", "partition")
        .text(f"file:{temporary}")
    )
    (temporary / OFFSETS_FILE).write_text(json.dumps({"framing": framing, "ranges": list(ranges)}, indent=1) + "\n")
    os.replace(temporary, final)
    return Landed(final, ranges)


def _ranges(records: DataFrame) -> tuple[dict[str, Any], ...]:
    """Per topic partition of ``records``: its first and last offset and its records."""
    rows = (
        records.groupBy("topic", "partition")
        .agg(F.min("offset").alias("first"), F.max("offset").alias("last"), F.count(F.lit(1)).alias("records"))
        .orderBy("topic", "partition")
        .collect()
    )
    return tuple(
        {"topic": r["topic"], "partition": int(r["partition"]), "first": int(r["first"]), "last": int(r["last"]),
         "records": int(r["records"])}
        for r in rows
    )


def _batch_name(batch_id: int, ranges: tuple[dict[str, Any], ...]) -> str:
    """A batch directory's name: the query's batch id, which orders the batches as they were read
    (the arrival order, also when a partition appears later starting at offset 0; a batch read
    again keeps its id and offsets), and a hash of its ranges."""
    text = json.dumps([[r["topic"], r["partition"], r["first"], r["last"]] for r in ranges])
    return f"batch-{batch_id:020d}-{hashlib.sha1(text.encode()).hexdigest()[:16]}"


# --- reading the topics --------------------------------------------------------------------------

#: The landing query's checkpoint, inside the landing directory (``_`` names are no inputs).
CHECKPOINT = "_checkpoint"


def kafka_stream(spark: SparkSession, kafka: Kafka) -> DataFrame:
    """The streaming DataFrame of ``kafka``'s records (Spark's Kafka source)."""
    return (
        spark.readStream.format("kafka").options(**kafka.source_options())
        .option("startingOffsets", kafka.starting_offsets)
        .option("failOnDataLoss", "true")
        .load()
    )


@dataclass(frozen=True)
class Lander:
    """``foreachBatch``'s function that lands each batch of Kafka records (:func:`land`) under
    ``landing``; it holds paths and names only, so Spark Connect can run it in its server."""

    landing: str
    framing: str

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.land(batch, batch_id)

    def land(self, batch: DataFrame, batch_id: int) -> Landed:
        """Land ``batch``, the micro-batch ``batch_id`` (:func:`land`), read once from Kafka."""
        batch.persist()  # (read twice: its ranges, then its records)
        try:
            return land(batch, Path(self.landing), self.framing, batch_id)
        finally:
            batch.unpersist()


def land_available(spark: SparkSession, kafka: Kafka, landing: Path, framing: str) -> None:
    """Land every record of ``kafka``'s topics that no earlier call landed, then return (a
    streaming query with an available-now trigger, its checkpoint in ``landing``)."""
    remove_unfinished(landing)
    landing.mkdir(parents=True, exist_ok=True)
    query = (
        kafka_stream(spark, kafka)
        .writeStream.queryName(f"lakecdc kafka landing {landing}")
        .option("checkpointLocation", f"file:{landing / CHECKPOINT}")
        .trigger(availableNow=True)
        .foreachBatch(Lander(str(landing), framing))
        .start()
    )
    query.awaitTermination()  # (raises the error that stopped the query)
