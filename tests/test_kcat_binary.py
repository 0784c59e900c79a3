"""kcat ``-K`` dumps of binary Avro messages (``debezium-avro``, ``dts-avro``): files written byte
for byte as kcat's consumer writes them (``%k<sep>%s<delim>``, nothing escaped), with values that
hold the separator and the delimiter themselves; a record that cannot be read is quarantined with
its file, byte offset and reason, and the records after it apply."""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from lakecdc.decode import get_decoder
from lakecdc.decode.files.kcat import kcat_delimiter
from lakecdc.decode.files.splits import Split
from lakecdc.decode.kafka.records import kcat_kv_messages
from lakecdc.errors import ConfigError
from lakecdc.lake.state import quarantine_path

try:
    import tests.decode.alibaba.test_dts_avro as dts
    import tests.decode.debezium.test_debezium_avro as dbz
    from tests.dts_render import character, encode, integer, length_prefixed, pk_tag, record
    from tests.helpers import rows
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    import decode.alibaba.test_dts_avro as dts  # type: ignore[no-redef]
    import decode.debezium.test_debezium_avro as dbz  # type: ignore[no-redef]
    from dts_render import character, encode, integer, length_prefixed, pk_tag, record  # type: ignore[no-redef]
    from helpers import rows  # type: ignore[no-redef]


def kcat_dump(records: list[tuple[bytes | None, bytes | None]], sep: bytes, delim: bytes = b"\n", *,
              null: bool = False) -> bytes:
    """What ``kcat -C -K<sep> [-D<delim>] [-Z]`` writes (kcat's format ``%k<sep>%s<delim>``): per
    record the key's bytes, the separator, the value's bytes and the delimiter, nothing escaped; an
    empty or null key or value is written as nothing, or as ``NULL`` with ``-Z``."""
    blank = b"NULL" if null else b""
    return b"".join((k or blank) + sep + (v or blank) + delim for k, v in records)


def event_fields(found: list[Any]) -> list[tuple]:
    """The canonical fields of the row changes (no Kafka metadata, no place in the file)."""
    out = []
    for r in found:
        if r["op"] is None:
            continue
        source = {k: v for k, v in (r["source"] or {}).items() if not k.startswith("kafka.")}
        out.append((r["table"], r["op"], r["op_ts"], r["pos"], r["seq"], r["keys"], r["before"], r["after"], source))
    return out


def quarantine(target: Path) -> list[dict[str, Any]]:
    q = pa.table(DeltaTable(quarantine_path(str(target))).to_pyarrow_table()).to_pylist()
    return sorted(q, key=lambda r: (r["file"], r["offset"]))


# -- debezium-avro: Confluent wire-format keys and values ---------------------------------------------------

#: an insert whose note holds the separators and the newline, and its update
TRICKY = [
    (dbz.key(5), dbz.message("value", dbz.envelope("c", 500, after=dbz.row(5, note="a^b\nc:d\te")))),
    (dbz.key(5), dbz.message("value", dbz.envelope("u", 510, before=dbz.row(5, note="a^b\nc:d\te"),
                                                   after=dbz.row(5, note="^\n^")))),
]
DBZ_RECORDS = [*dbz.MESSAGES, *TRICKY]


def test_the_dumps_values_hold_the_separator_and_the_delimiter():
    """The test data is what makes a naive split fail: values that hold ``^`` and newlines."""
    values = [v for _, v in DBZ_RECORDS if v]
    assert sum(v.count(b"^") for v in values) >= 3 and sum(v.count(b"\n") for v in values) >= 3


@pytest.mark.spark
@pytest.mark.parametrize(("sep", "delim", "null", "options"), [
    (b"^", b"\n", False, {"framing": "kcat-K", "keySeparator": "^"}),
    (b":", b"\x1e", True, {"framing": "KCAT-k", "keySeparator": ":", "messageDelimiter": "\\x1e"}),
    (b"\t", b"\n", False, {"keySeparator": "\\t"}),  # framing=auto: a keySeparator makes binary files kcat -K dumps
])
def test_debezium_avro_kcat_dump_reads_like_the_length_prefixed_dump(spark, tmp_path, sep, delim, null, options):
    """Every record of the kcat -K dump decodes as the same messages framed with length prefixes
    do: keys ride with their values, null keys and tombstones (empty, or ``NULL`` with -Z) read."""
    registry = dbz.write_registry(tmp_path / "schemas")
    dump = tmp_path / "landing" / "dump.kcat"
    dump.parent.mkdir()
    dump.write_bytes(kcat_dump(DBZ_RECORDS, sep, delim, null=null))
    plain = tmp_path / "plain" / "dump.bin"
    plain.parent.mkdir()
    plain.write_bytes(dbz.length_prefixed([m for k, v in DBZ_RECORDS for m in ((k, v) if k else (v,))]))
    found = dbz.decode(spark, dump, schemaDirectory=str(registry), **options)
    assert len(found) == len(DBZ_RECORDS) and all(r["_error"] is None for r in found)
    assert event_fields(found) == event_fields(dbz.decode(spark, plain, schemaDirectory=str(registry)))
    dbz._check_events(found[: len(dbz.MESSAGES)])
    tricky = [r for r in found if r["op"] is not None][-2:]
    assert [r["after"]["note"] for r in tricky] == ["a^b\nc:d\te", "^\n^"] and tricky[0]["keys"] == ["id"]
    tomb = found[len(dbz.MESSAGES) - 1]
    assert tomb["op"] is None and tomb["source"]["skipped"] == "tombstone"


@pytest.mark.spark
def test_debezium_avro_kcat_dump_with_text_keys_keeps_them_as_kafka_key(spark, tmp_path):
    """A key that is no wire-format message (a placeholder, a string key) is the text before the
    first separator, kept as ``kafka.key``; the value still reads."""
    registry = dbz.write_registry(tmp_path / "schemas")
    dump = tmp_path / "landing" / "dump.kcat"
    dump.parent.mkdir()
    dump.write_bytes(kcat_dump([(b"****", TRICKY[0][1]), (b"id=5", TRICKY[1][1])], b"^"))
    found = dbz.decode(spark, dump, schemaDirectory=str(registry), framing="kcat-K", keySeparator="^")
    assert [(r["op"], r["_error"], r["source"]["kafka.key"]) for r in found] == [("I", None, "****"), ("U", None, "id=5")]
    assert found[1]["after"]["note"] == "^\n^"


@pytest.mark.spark
def test_a_kcat_record_that_does_not_read_is_quarantined_and_the_next_records_apply(spark, tmp_path):
    """A value with an unknown schema id cannot tell where it ends: it is quarantined from its byte
    offset to the next record that reads, with the file, the offset and why; the rest applies."""
    registry = dbz.write_registry(tmp_path / "schemas")
    good1 = (dbz.key(1), dbz.message("value", dbz.envelope("c", 100, after=dbz.row(1, note="a\nb"))))
    unknown = (dbz.key(2), b"\0" + struct.pack(">I", 99) + good1[1][5:])
    good2 = TRICKY[0]
    records = [good1, unknown, good2]
    data = kcat_dump(records, b"^")
    path = tmp_path / "landing" / "dump.kcat"
    path.parent.mkdir()
    path.write_bytes(data)
    target = tmp_path / "lake"
    s = lakecdc.apply(path, target, format="debezium-avro", spark=spark,
                      options={"schemaDirectory": str(registry), "framing": "kcat-K", "keySeparator": "^"})
    assert [(r["id"], r["note"]) for r in rows(s.table(dbz.TABLE).target, "id")] == [(1, "a\nb"), (5, "a^b\nc:d\te")]
    start = len(kcat_dump(records[:1], b"^"))
    end = len(kcat_dump(records[:2], b"^"))
    (q,) = quarantine(target)
    assert (q["file"], q["offset"]) == (str(path.resolve()), start)
    assert q["reason"].startswith(f"kcat -K record at byte offset {start}: schema id 99 is not in schemaDirectory")
    assert f"bytes {start}..{end} cannot be told apart into records" in q["reason"]
    assert base64.b64decode(q["raw"]) == data[start:end]


def test_a_dump_that_is_no_kcat_k_dump_is_one_record_naming_the_offset(tmp_path):
    """Bytes that never read as a record give one record with an error naming the byte offset and
    the separator and delimiter it was read with (nothing is taken for records by guessing)."""
    path = tmp_path / "x.bin"
    path.write_bytes(b"key^not avro at all\nmore^junk\n")

    def measure(fh, pos):
        from lakecdc.decode.rows import RecordError

        raise RecordError("not a Confluent wire-format message")

    (m,) = list(kcat_kv_messages(Split(str(path), "kcat-k", separator=b"^", delimiter=b"\n"), measure))
    assert (m.row, m.offset, m.data) == (0, 0, None)
    assert m.error == ("kcat -K record at byte offset 0: not a Confluent wire-format message; bytes 0..30 (the end "
                       "of the file) cannot be told apart into records")


def test_kcat_k_options():
    """framing=kcat-K needs the separator; kcat's escapes are read; both decoders take them."""
    assert [kcat_delimiter(t, "o") for t in ("^", "\\t", "\\x1f", "|\\n", "→")] == [
        b"^", b"\t", b"\x1f", b"|\n", "→".encode()]
    for fmt in ("debezium-avro", "dts-avro"):
        with pytest.raises(ConfigError, match=f"{fmt}: framing=kcat-K needs keySeparator"):
            get_decoder(fmt, {"framing": "kcat-K"})
        assert get_decoder(fmt, {"framing": "kcat-K", "keySeparator": "\\t"}).kcat_kv == (b"\t", b"\n")
        assert get_decoder(fmt, {}).kcat_kv is None


# -- dts-avro: plain Avro Records, the key is text ----------------------------------------------------------

FIELDS = [("id", 3), ("v", 253)]


def dts_record(op: str, n: int, value: str, *, legacy: bool = False) -> bytes:
    image = [integer(n, 4), character(value)]
    images = {"after": image} if op == "INSERT" else {"before": image, "after": image}
    # id 10: the zig-zag varint of 5 is the byte 0x0a, a newline
    return encode(record(op, "db.t", FIELDS, id=5 if n == 1 else 1000 + n, ts=1700000000 + n, position=f"{100 * n}@3",
                         tags=pk_tag("id"), **images), legacy=legacy)


@pytest.mark.spark
def test_dts_avro_kcat_dump_reads_like_the_length_prefixed_dump(spark, tmp_path):
    """DTS Records (current and older schema) dumped with kcat -K, text and null keys, a
    tombstone, values holding the separator and newlines: the same events as the length-prefixed
    dump, the key kept as ``kafka.key``."""
    values = [dts_record("INSERT", 1, "x^y\n"), dts_record("UPDATE", 2, "^\n"), dts_record("INSERT", 3, "z", legacy=True)]
    assert b"\n" in values[0][:12] and all(b"^" in v for v in values[:2])
    landing = tmp_path / "landing"
    dump = dts.write(landing / "dump.kcat", kcat_dump([(b"db.t", values[0]), (None, values[1]), (b"k", None),
                                                       (b"db.t", values[2])], b"^"))
    plain = dts.write(tmp_path / "plain" / "dump.bin", length_prefixed(values))
    found = dts.decode(spark, dump, framing="kcat-K", keySeparator="^")
    assert [(r["op"], r["_error"]) for r in found] == [("I", None), ("U", None), (None, None), ("I", None)]
    assert event_fields(found) == event_fields(dts.decode(spark, plain))
    assert found[0]["source"]["kafka.key"] == "db.t" and "kafka.key" not in found[1]["source"]
    assert found[2]["source"]["skipped"] == "tombstone"
    assert found[0]["after"]["v"] == "x^y\n"
