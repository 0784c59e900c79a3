"""GoldenGate Avro (row and op formatters, OCF, generic wrapper): seed 000 section 13.4.

The seed shows its Avro messages as JSON next to their schemas; the tests encode those values
with fastavro using the seed's schemas (tests/fixtures/ogg-avro/) and decode them with lakecdc.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, assume, given, seed, settings
from pyspark.sql import types as T

import lakecdc
from lakecdc.decode.avro.containers import plan_ocf_splits
from lakecdc.decode.avro.schemas import parsing_fingerprint
from lakecdc.decode.files import splits as splits_module
from lakecdc.decode.goldengate import avro as ogg_avro
from lakecdc.decode.goldengate.common import java_unescape
from lakecdc.errors import ConfigError
from lakecdc.lake.state import quarantine_path
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.merge.quarantine import QUARANTINE_SCHEMA, write_quarantine

try:
    from tests.helpers import rows
    from tests.ogg_avro_render import (
        CONTAINERS,
        WRAPPER_SCHEMA,
        encode,
        kcat_lines,
        length_prefixed,
        op_record,
        op_schema,
        row_record,
        row_scenario_writer,
        row_schema,
        wrap,
        write_ocf,
        write_runs,
        write_schema_dir,
    )
    from tests.ogg_row_render import missing_as_null, run_row_scenario
    from tests.oracle import Event, Oracle, PrimaryKeyUpdateError, declaring
    from tests.test_property import (
        SUMMARY_FIELDS,
        Scenario,
        assert_counts,
        assert_names_a_pk_update,
        assert_targets_match,
        delta_tables_under,
        describe,
        scenarios,
    )
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows  # type: ignore[no-redef]
    from ogg_avro_render import (  # type: ignore[no-redef]
        CONTAINERS,
        WRAPPER_SCHEMA,
        encode,
        kcat_lines,
        length_prefixed,
        op_record,
        op_schema,
        row_record,
        row_scenario_writer,
        row_schema,
        wrap,
        write_ocf,
        write_runs,
        write_schema_dir,
    )
    from ogg_row_render import missing_as_null, run_row_scenario  # type: ignore[no-redef]
    from oracle import Event, Oracle, PrimaryKeyUpdateError, declaring  # type: ignore[no-redef]
    from test_property import (  # type: ignore[no-redef]
        SUMMARY_FIELDS,
        Scenario,
        assert_counts,
        assert_names_a_pk_update,
        assert_targets_match,
        delta_tables_under,
        describe,
        scenarios,
    )

try:
    from tests.decode.helpers import decode
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from decode.helpers import decode  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "ogg-avro"
SEED_SCHEMA = {kind: json.loads((FIX / kind / "GG.TCUSTORD.avsc").read_text()) for kind in ("row", "op")}
SEED_MESSAGES = {kind: [json.loads(x) for x in (FIX / f"{kind}-examples.jsonl").read_text().splitlines()]
                 for kind in ("row", "op")}
TCUSTORD_KEYS = ["CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID"]


def render(events) -> list[str]:
    """Events as compact text: ``OP table pos before={...} after={...}`` (missing = absent)."""
    out = []
    for r in events:
        imgs = []
        for name in ("before", "after"):
            img = r[name]
            if img is not None:
                imgs.append(f"{name}={{{', '.join(f'{k}={img[k]!r}' for k in sorted(img))}}}")
        out.append(" ".join([r["op"], r["table"], r["pos"], *imgs]))
    return out


def seed_file(tmp_path: Path, kind: str) -> Path:
    """The seed's four example messages of ``kind``, length-prefixed, from the seed's schema."""
    path = tmp_path / f"seed-{kind}.bin"
    path.write_bytes(length_prefixed([encode(SEED_SCHEMA[kind], m) for m in SEED_MESSAGES[kind]]))
    return path


SEED_ROW = [
    "I GG.TCUSTORD 00000000000000001444 after={CUST_CODE='WILL', ORDER_DATE='1994-09-30:15:33:00', ORDER_ID='144', "
    "PRODUCT_AMOUNT='3.0', PRODUCT_CODE='CAR', PRODUCT_PRICE='17520.0', TRANSACTION_ID='100'}",
    "U GG.TCUSTORD 00000000000000002891 after={CUST_CODE='BILL', ORDER_DATE='1995-12-31:15:00:00', ORDER_ID='765', "
    "PRODUCT_AMOUNT='3.0', PRODUCT_CODE='CAR', PRODUCT_PRICE='14000.0', TRANSACTION_ID='100'}",
    "D GG.TCUSTORD 00000000000000004338 before={CUST_CODE='DAVE', ORDER_DATE='1993-11-03:07:51:35', ORDER_ID='600', "
    "PRODUCT_AMOUNT=None, PRODUCT_CODE='PLANE', PRODUCT_PRICE=None, TRANSACTION_ID=None}",
    "T GG.TCUSTORD 00000000000000004515",
]
SEED_OP = [
    SEED_ROW[0],
    "U GG.TCUSTORD 00000000000000002891 before={CUST_CODE='BILL', ORDER_DATE='1995-12-31:15:00:00', ORDER_ID='765', "
    "PRODUCT_AMOUNT='3.0', PRODUCT_CODE='CAR', PRODUCT_PRICE='15000.0', TRANSACTION_ID='100'} "
    "after={CUST_CODE='BILL', ORDER_DATE='1995-12-31:15:00:00', ORDER_ID='765', PRODUCT_AMOUNT='3.0', "
    "PRODUCT_CODE='CAR', PRODUCT_PRICE='14000.0', TRANSACTION_ID='100'}",
    # PRODUCT_PRICE, PRODUCT_AMOUNT and TRANSACTION_ID have _isMissing true: missing, not NULL
    "D GG.TCUSTORD 00000000000000004338 before={CUST_CODE='DAVE', ORDER_DATE='1993-11-03:07:51:35', ORDER_ID='600', "
    "PRODUCT_CODE='PLANE'}",
    "T GG.TCUSTORD 00000000000000004515",
]


# -- fingerprints (no Spark) -----------------------------------------------------------------------


def test_fingerprint_is_avro_crc64_of_the_parsing_canonical_form():
    """The parsing fingerprint is Avro's CRC-64-AVRO as Java's signed long: the specification's
    published vectors, and the numbers the former hand-written Rabin code gave for the seed's
    row, op and wrapper schemas (so wrapper messages written before still resolve)."""
    # the Avro specification's published vectors (share/test/data/schema-tests.txt), Java longs
    assert parsing_fingerprint('"null"') == parsing_fingerprint("null") == 7195948357588979594
    for primitive, java_long in {"boolean": -6970731678124411036, "int": 8247732601305521295,
                                 "long": -3434872931120570953, "float": 5583340709985441680,
                                 "double": -8181574048448539266, "bytes": 5746618253357095269,
                                 "string": -8142146995180207161}.items():
        assert parsing_fingerprint(f'"{primitive}"') == java_long, primitive
    assert parsing_fingerprint({"type": "fixed", "name": "foo", "size": 15}) == 1756455273707447556
    assert parsing_fingerprint({"type": "record", "name": "foo", "fields": [{"name": "f1", "type": "boolean"}]}) \
        == 7843277075252814651
    # the hand-written CRC-64-AVRO gave these for the seed's schemas (negative: the sign bit is kept)
    assert parsing_fingerprint(SEED_SCHEMA["row"]) == -4858847009767206142
    assert parsing_fingerprint(SEED_SCHEMA["op"]) == -6527226719838183920
    assert parsing_fingerprint(WRAPPER_SCHEMA) == 6577756254776142981
    assert parsing_fingerprint(json.dumps(SEED_SCHEMA["op"])) == -6527226719838183920
    # the wrapper schema lakecdc (and the test renderer) use is the seed's generic_wrapper.avsc
    seed_wrapper = json.loads((FIX / "generic_wrapper.avsc").read_text())
    assert ogg_avro.WRAPPER_SCHEMA == seed_wrapper == WRAPPER_SCHEMA
    # "default" and formatting are not part of the canonical form: the file's text does not matter
    assert parsing_fingerprint((FIX / "row" / "GG.TCUSTORD.avsc").read_text()) == parsing_fingerprint(SEED_SCHEMA["row"])


def test_options_are_checked():
    with pytest.raises(ConfigError, match="unknown option.*lineDelimeter.*known: .*lineDelimiter"):
        lakecdc.decode.get_decoder("ogg-avro-op", {"lineDelimeter": "x"})
    with pytest.raises(ConfigError, match="framing 'lines' is not one of"):
        lakecdc.decode.get_decoder("ogg-avro-row", {"framing": "lines"})
    with pytest.raises(ConfigError, match="framing 'delimited' needs lineDelimiter"):
        lakecdc.decode.get_decoder("ogg-avro-row", {"framing": "delimited"})
    d = lakecdc.decode.get_decoder("ogg-avro-op", {"lineDelimiter": "CDATA[\\n~\\u0001]", "pkUpdateHandling": "abend",
                                                     "versionSchemas": "true", "iso8601Format": "false"})
    assert d.framing == "delimited" and d.delimiter == b"\n~\x01"
    assert java_unescape("a\\tb\\\\n") == "a\tb\\n"


# -- the seed's examples ---------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("kind", ["row", "op"])
def test_seed_examples_decode_as_the_seed_says(spark, tmp_path, kind):
    found = decode(spark, f"ogg-avro-{kind}", seed_file(tmp_path, kind), schemaDirectory=str(FIX / kind))
    assert render(found) == (SEED_ROW if kind == "row" else SEED_OP)
    assert all(r["_error"] is None and r["_raw"] is None for r in found)
    assert [r["keys"] for r in found] == [TCUSTORD_KEYS] * 4
    assert [str(r["op_ts"]) for r in found] == ["2013-06-02 22:14:36"] + ["2013-06-02 22:14:41"] * 3
    assert found[0]["source"]["current_ts"] == SEED_MESSAGES[kind][0]["current_ts"]
    assert found[2]["source"] == {"current_ts": SEED_MESSAGES[kind][2]["current_ts"], "avro_schema": "GG.TCUSTORD.avsc",
                                  "token.L": "206080450", "token.6": "9.0.80330", "token.R": "AADPkvAAEAAEqLzAAC"}
    # offsets are those of the length prefixes; every row id increases along the file
    sizes = [len(encode(SEED_SCHEMA[kind], m)) + 4 for m in SEED_MESSAGES[kind]]
    assert [r["_offset"] for r in found] == [0, sizes[0], sizes[0] + sizes[1], sum(sizes[:3])]
    assert [r["_row"] for r in found] == [0, 1, 2, 3]
    assert found[0]["seq"] < found[1]["seq"] < found[2]["seq"] < found[3]["seq"]


@pytest.mark.spark
def test_seed_op_examples_apply_with_the_schemas_types(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    (landing / "a.bin").write_bytes(length_prefixed([encode(SEED_SCHEMA["op"], m) for m in SEED_MESSAGES["op"][:3]]))
    s = lakecdc.apply(landing, target, format="ogg-avro-op", options={"schemaDirectory": str(FIX / "op")}, spark=spark)
    t = s.table("GG.TCUSTORD")
    assert (t.inserted, t.deleted, t.quarantined) == (2, 0, 0)  # the update of an absent key inserts
    schema = DeltaTable(t.target).schema().to_arrow()
    assert schema.field("PRODUCT_PRICE").type == pa.float64() and schema.field("ORDER_ID").type == pa.string()
    assert rows(t.target, "ORDER_ID") == [
        {"CUST_CODE": "WILL", "ORDER_DATE": "1994-09-30:15:33:00", "PRODUCT_CODE": "CAR", "ORDER_ID": "144",
         "PRODUCT_PRICE": 17520.0, "PRODUCT_AMOUNT": 3.0, "TRANSACTION_ID": "100"},
        {"CUST_CODE": "BILL", "ORDER_DATE": "1995-12-31:15:00:00", "PRODUCT_CODE": "CAR", "ORDER_ID": "765",
         "PRODUCT_PRICE": 14000.0, "PRODUCT_AMOUNT": 3.0, "TRANSACTION_ID": "100"},
    ]


# -- object container files ------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("codec", ["null", "deflate", "snappy"])
def test_ocf_files_decode_like_messages(spark, tmp_path, codec):
    path = write_ocf(tmp_path / f"a.{codec}.avro", SEED_SCHEMA["op"], SEED_MESSAGES["op"], codec=codec, sync_interval=1)
    found = decode(spark, "ogg-avro-op", path, schemaDirectory=str(tmp_path / "no-such-dir"))
    assert render(found) == SEED_OP
    assert [r["_row"] for r in found] == [0, 1, 2, 3]
    assert len({r["_offset"] for r in found}) == 4  # sync_interval=1: one block per record
    assert found[0]["source"]["avro_schema"] == f"a.{codec}.avro (OCF header)"


@pytest.mark.spark
def test_large_ocf_files_are_split_at_blocks_and_a_corrupt_block_is_quarantined(spark, tmp_path, monkeypatch):
    schema = row_schema("S.T", {"ID": "long", "V": "string"})
    records = [row_record(Event("S.T", "I", "2020-01-01 00:00:00.000000", f"{i:020d}", after={"ID": i, "V": "v" * 50},
                                keys=("ID",)), schema) for i in range(30)]
    path = write_ocf(tmp_path / "big.avro", schema, records, codec="null", sync_interval=400)
    # blocks of ~450 bytes, splits of 300: every split is one block
    _header, splits = plan_ocf_splits(str(path), 300)
    assert len(splits) > 3 and [s[2] for s in splits] == sorted({s[2] for s in splits}) and splits[0][2] == 0
    monkeypatch.setattr(splits_module, "SPLIT_BYTES", 300)
    found = decode(spark, "ogg-avro-row", path)
    assert [r["after"]["ID"] for r in found] == [str(i) for i in range(30)]
    assert [r["_row"] for r in found] == list(range(30))
    assert sorted({r["_block"] for r in found}) == [s[0] for s in splits]
    # corrupt the sync marker that ends the second block: its records are quarantined as one
    data = bytearray(path.read_bytes())
    data[splits[2][0] - 1] ^= 0xFF
    path.write_bytes(bytes(data))
    found = decode(spark, "ogg-avro-row", path)
    bad = [r for r in found if r["_error"] is not None]
    assert [(r["_offset"], r["_row"]) for r in bad] == [(splits[1][0], splits[1][2])]
    assert bad[0]["_error"] == f"OCF block at byte offset {splits[1][0]}: the block does not end with the file's sync marker"
    assert base64.b64decode(bad[0]["_raw"]) == bytes(data[splits[1][0] : splits[2][0]])
    good = [int(r["after"]["ID"]) for r in found if r["_error"] is None]
    assert good == [i for i in range(30) if not splits[1][2] <= i < splits[2][2]]


# -- schema versions, wrapper, quarantine ------------------------------------------------------------

V1 = {"ID": "long", "NAME": "string"}
V2 = {"ID": "long", "NAME": "string", "CITY": "string"}


def _ev(op: str, second: int, pos: int, **image: Any) -> Event:
    ts = f"2020-01-01 00:00:{second:02d}.000000"
    if op == "D":
        return Event("GG.CUST", op, ts, f"{pos:020d}", before=image, keys=("ID",))
    return Event("GG.CUST", op, ts, f"{pos:020d}", after=image, keys=("ID",))


@pytest.mark.spark
def test_versioned_schemas_across_a_metadata_change(spark, tmp_path):
    """v1 messages, then a column is added (v2); older messages must still be read with v1."""
    dirdef, landing, target = tmp_path / "dirdef", tmp_path / "landing", tmp_path / "lake"
    s1, s2 = row_schema("GG.CUST", V1), row_schema("GG.CUST", V2)
    dirdef.mkdir()
    (dirdef / "GG.CUST_2020-01-01_00-00-00.000.avsc").write_text(json.dumps(s1))
    (dirdef / "GG.CUST_2020-01-01_00-00-30.000.avsc").write_text(json.dumps(s2))
    (dirdef / "GG.CUST.avsc").write_text(json.dumps(s2, indent=2))  # current = newest
    landing.mkdir()
    old = [_ev("I", 1, 1, ID=1, NAME="a"), _ev("I", 2, 2, ID=2, NAME="b")]
    (landing / "1.bin").write_bytes(length_prefixed([encode(s1, row_record(e, s1)) for e in old]))
    opts = {"schemaDirectory": str(dirdef), "versionSchemas": "true"}
    s = lakecdc.apply(landing, target, format="ogg-avro-row", options=opts, spark=spark)
    assert DeltaTable(s.table("GG.CUST").target).schema().to_arrow().names[:2] == ["ID", "NAME"]
    new = [_ev("U", 31, 3, ID=1, NAME="a2", CITY="Paris"), _ev("I", 32, 4, ID=3, NAME="c", CITY=None)]
    late = [_ev("U", 3, 5, ID=2, NAME="b2")]  # written before the change, delivered after it
    msgs = [encode(s2, row_record(e, s2)) for e in new] + [encode(s1, row_record(e, s1)) for e in late]
    (landing / "2.bin").write_bytes(length_prefixed(msgs))
    found = decode(spark, "ogg-avro-row", landing / "2.bin", **opts)
    assert [r["source"]["avro_schema"] for r in found] == ["GG.CUST.avsc", "GG.CUST.avsc",
                                                           "GG.CUST_2020-01-01_00-00-00.000.avsc"]
    assert "CITY" not in found[2]["after"]
    s = lakecdc.apply(landing, target, format="ogg-avro-row", options=opts, spark=spark)
    t = s.table("GG.CUST")
    assert (t.events, t.quarantined) == (3, 0)
    assert DeltaTable(t.target).schema().to_arrow().field("CITY").type == pa.string()
    assert rows(t.target, "ID") == [{"ID": 1, "NAME": "a2", "CITY": "Paris"}, {"ID": 2, "NAME": "b2", "CITY": None},
                                    {"ID": 3, "NAME": "c", "CITY": None}]


def _quarantine(target: Path) -> list[dict[str, Any]]:
    table = pa.table(DeltaTable(quarantine_path(str(target))).to_pyarrow_table())
    return sorted(table.to_pylist(), key=lambda r: (r["file"], r["offset"]))


@pytest.mark.spark
def test_a_kcat_dump_of_a_topic_decodes_as_its_messages_and_quarantines_what_is_no_message(spark, tmp_path):
    """GoldenGate's Kafka handler publishes one Avro message per record: a ``kcat -J`` dump of the
    topic (base64 payloads, what lakecdc lands from Kafka) is told by its first character and
    decodes as the same messages length-prefixed do; a record without a value and a line that is
    no kcat record are quarantined, each with its line, and the rest applies."""
    messages = [encode(SEED_SCHEMA["op"], m) for m in SEED_MESSAGES["op"]]
    prefixed = tmp_path / "a.bin"
    prefixed.write_bytes(length_prefixed(messages))
    dump = tmp_path / "topic.json"
    dump.write_text(kcat_lines(messages, topic="ogg"))
    options = {"schemaDirectory": str(FIX / "op")}
    want, got = (decode(spark, "ogg-avro-op", p, **options) for p in (prefixed, dump))
    assert render(got) == render(want) == SEED_OP
    lines = dump.read_text().splitlines(keepends=True)
    assert [r["_offset"] for r in got] == [sum(len(x) for x in lines[:n]) for n in range(4)]  # each line's byte offset

    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    bad = kcat_lines([messages[0], None, messages[1]], topic="ogg").splitlines(keepends=True)
    (landing / "topic.json").write_text(bad[0] + bad[1] + "{not json\n" + bad[2])
    s = lakecdc.apply(landing, target, format="ogg-avro-op", options=options, spark=spark)
    assert s.ok and s.table("GG.TCUSTORD").events == 2
    q = _quarantine(target)
    assert [r["reason"] for r in q] == [
        "line 2: a record without a value (a tombstone) carries no operation",
        "line 3: not a kcat JSON record: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"]
    assert s.quarantined_unrouted == 2


@pytest.mark.spark
def test_generic_wrapper_resolves_fingerprints_and_quarantines_an_unknown_one(spark, tmp_path):
    dirdef, landing, target = tmp_path / "dirdef", tmp_path / "landing", tmp_path / "lake"
    schema = op_schema("GG.CUST", V1)
    write_schema_dir(dirdef, {"GG.CUST": schema})
    events = [_ev("I", 1, 1, ID=1, NAME="a"), _ev("I", 2, 2, ID=2, NAME="b"), _ev("I", 3, 3, ID=3, NAME="c")]
    payloads = [encode(schema, op_record(e, schema)) for e in events]
    messages = [wrap("GG.CUST", schema, payloads[0]), wrap("GG.CUST", schema, payloads[1], fingerprint=42),
                wrap("GG.CUST", schema, payloads[2])]
    landing.mkdir()
    path = landing / "w.bin"
    path.write_bytes(length_prefixed(messages))
    opts = {"schemaDirectory": str(dirdef), "wrapMessageInGenericAvroMessage": "true"}
    s = lakecdc.apply(landing, target, format="ogg-avro-op", options=opts, spark=spark)
    t = s.table("GG.CUST")
    assert (t.inserted, t.quarantined) == (2, 1)
    assert rows(t.target, "ID") == [{"ID": 1, "NAME": "a"}, {"ID": 3, "NAME": "c"}]
    (q,) = _quarantine(target)
    fp = parsing_fingerprint(schema)
    assert (q["file"], q["line"], q["offset"], q["source_table"], q["format"]) == \
        (str(path.resolve()), None, 4 + len(messages[0]), "GG.CUST", "ogg-avro-op")
    assert q["reason"] == (f"unknown schema_fingerprint 42 for table 'GG.CUST': no .avsc in schemaDirectory "
                           f"'{dirdef}' has it (fingerprints of the table: GG.CUST.avsc={fp})")
    assert base64.b64decode(q["raw"]) == messages[1]


@pytest.mark.spark
def test_truncated_and_mismatched_messages_are_quarantined_and_the_rest_applies(spark, tmp_path):
    dirdef, landing, target = tmp_path / "dirdef", tmp_path / "landing", tmp_path / "lake"
    schema = row_schema("GG.CUST", V1)
    write_schema_dir(dirdef, {"GG.CUST": schema})
    other = row_schema("GG.CUST", {"ID": "string"})  # a schema the directory does not hold
    good = [encode(schema, row_record(_ev("I", i, i, ID=i, NAME=f"n{i}"), schema)) for i in (1, 2)]
    mismatched = encode(other, row_record(_ev("I", 3, 3, ID="x"), other))
    unknown = encode(row_schema("GG.NOPE", V1), row_record(
        Event("GG.NOPE", "I", "2020-01-01 00:00:04.000000", "4", after={"ID": 4}, keys=("ID",)), row_schema("GG.NOPE", V1)))
    cut = encode(schema, row_record(_ev("I", 5, 5, ID=5, NAME="n5"), schema))
    landing.mkdir()
    path = landing / "a.bin"
    body = length_prefixed([good[0], mismatched, unknown, good[1]])
    path.write_bytes(body + struct.pack(">I", len(cut)) + cut[:10])
    s = lakecdc.apply(landing, target, format="ogg-avro-row", options={"schemaDirectory": str(dirdef)}, spark=spark)
    assert rows(s.table("GG.CUST").target, "ID") == [{"ID": 1, "NAME": "n1"}, {"ID": 2, "NAME": "n2"}]
    q = _quarantine(target)
    offsets = [0, 4 + len(good[0]), 8 + len(good[0]) + len(mismatched), len(body)]
    assert [(r["offset"], r["line"], r["source_table"]) for r in q] == [
        (offsets[1], None, "GG.CUST"), (offsets[2], None, "GG.NOPE"), (offsets[3], None, None)]
    assert q[0]["reason"].startswith("does not decode with any schema version of table 'GG.CUST' (tried newest first)"
                                     " — GG.CUST.avsc: ")
    assert q[1]["reason"] == f"no schema for table 'GG.NOPE' in schemaDirectory '{dirdef}' (expected GG.NOPE.avsc)"
    assert q[2]["reason"] == f"truncated: the length prefix gives {len(cut)} bytes, only 10 remain"
    assert [base64.b64decode(r["raw"]) for r in q] == [mismatched, unknown, cut[:10]]
    assert s.table("GG.CUST").quarantined == 1 and s.quarantined_unrouted == 1


@pytest.mark.spark
def test_a_truncated_ocf_file_quarantines_its_cut_block_and_the_rest_applies(spark, tmp_path):
    """An OCF file cut mid-block (copied while GoldenGate was still writing it): the whole blocks
    apply, the cut one is quarantined with its byte offset, the reason and its bytes."""
    schema = op_schema("GG.CUST", V1)
    events = [_ev("I", i, i, ID=i, NAME=f"n{i}") for i in range(1, 7)]
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    path = write_ocf(landing / "cut.avro", schema, [op_record(e, schema) for e in events], codec="deflate",
                     sync_interval=1)  # one block per record
    data = path.read_bytes()
    _header, splits = plan_ocf_splits(str(path), 1)
    last = splits[-1][0]
    path.write_bytes(data[: len(data) - 20])  # the last block loses its sync marker and some bytes
    s = lakecdc.apply(landing, target, format="ogg-avro-op", keys={"GG.CUST": ["ID"]}, spark=spark)
    assert rows(s.table("GG.CUST").target, "ID") == [{"ID": i, "NAME": f"n{i}"} for i in range(1, 6)]
    (q,) = _quarantine(target)
    assert (q["file"], q["line"], q["offset"], q["source_table"]) == (str(path.resolve()), None, last, None)
    assert q["reason"].startswith(f"OCF block at byte offset {last}: truncated: the block of 1 record(s) gives "), \
        q["reason"]
    assert q["reason"].endswith("bytes, the file ends first")
    assert base64.b64decode(q["raw"]) == data[last : len(data) - 20]


@pytest.mark.spark
def test_delimited_messages_split_where_they_decode_not_at_every_delimiter(spark, tmp_path):
    dirdef = write_schema_dir(tmp_path / "dirdef", {"GG.CUST": row_schema("GG.CUST", V1)})
    schema = row_schema("GG.CUST", V1)
    msgs = [encode(schema, row_record(_ev("I", 1, 1, ID=1, NAME="a\nb"), schema)),  # the delimiter inside a value
            b"GARBAGE",
            encode(schema, row_record(_ev("D", 2, 2, ID=1, NAME=None), schema))]
    path = tmp_path / "d.bin"
    path.write_bytes(b"\n".join(msgs) + b"\n\n")
    found = decode(spark, "ogg-avro-row", path, schemaDirectory=str(dirdef), lineDelimiter="\\n")
    assert [(r["op"], r["_offset"], r["_error"] is None) for r in found] == [
        ("I", 0, True), (None, len(msgs[0]) + 1, False), ("D", len(msgs[0]) + 9, True)]
    assert found[0]["after"] == {"ID": "1", "NAME": "a\nb"} and found[2]["before"] == {"ID": "1", "NAME": None}
    assert base64.b64decode(found[1]["_raw"]) == b"GARBAGE"


@pytest.mark.spark
def test_logical_types_become_exact_text_and_declared_column_types(spark, tmp_path):
    columns = {
        "ID": "int",
        "AMOUNT": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
        "BIG": {"type": "fixed", "name": "big", "size": 20, "logicalType": "decimal", "precision": 44, "scale": 3},
        "RATIO": "float",
        "OK": "boolean",
        "BLOB": "bytes",
        "DAY": {"type": "int", "logicalType": "date"},
        "AT": {"type": "long", "logicalType": "timestamp-micros"},
        "TAGS": {"type": "array", "items": "string"},
    }
    schema = row_schema("GG.TYPES", columns)
    dirdef = write_schema_dir(tmp_path / "dirdef", {"GG.TYPES": schema})
    import datetime as dt

    values = {"ID": 7, "AMOUNT": Decimal("1234567890.10"), "BIG": Decimal("-12345678901234567890123456789012.500"),
              "RATIO": 0.1, "OK": True, "BLOB": b"\x00\xff", "DAY": dt.date(2020, 2, 29),
              "AT": dt.datetime(2020, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc), "TAGS": ["a", "b"]}
    record = {**row_record(Event("GG.TYPES", "I", "2020-01-01 00:00:00.000000", "1", after={}, keys=("ID",)), schema),
              **values}
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    (landing / "a.bin").write_bytes(length_prefixed([encode(schema, record)]))
    opts = {"schemaDirectory": str(dirdef)}
    (found,) = decode(spark, "ogg-avro-row", landing / "a.bin", **opts)
    assert found["after"] == {"ID": "7", "AMOUNT": "1234567890.10", "BIG": "-12345678901234567890123456789012.500",
                              "RATIO": "0.1", "OK": "true", "BLOB": "AP8=", "DAY": "2020-02-29",
                              "AT": "2020-01-02 03:04:05.000006", "TAGS": '["a","b"]'}
    decoder = lakecdc.decode.get_decoder("ogg-avro-row", opts)
    assert decoder.column_types(spark, [str(landing / "a.bin")], staging=str(tmp_path)) == {"GG.TYPES": {
        "ID": T.IntegerType(), "AMOUNT": T.DecimalType(12, 2), "BIG": T.StringType(), "RATIO": T.DoubleType(),
        "OK": T.BooleanType(), "BLOB": T.StringType(), "DAY": T.StringType(), "AT": T.StringType(),
        "TAGS": T.StringType()}}
    s = lakecdc.apply(landing, target, format="ogg-avro-row", options=opts, keys={"GG.TYPES": ["ID"]}, spark=spark)
    (row,) = rows(s.table("GG.TYPES").target)
    assert row["AMOUNT"] == Decimal("1234567890.10") and row["RATIO"] == 0.1 and row["OK"] is True
    assert DeltaTable(s.table("GG.TYPES").target).schema().to_arrow().field("AMOUNT").type == pa.decimal128(12, 2)


@pytest.mark.spark
def test_quarantine_without_an_offset_column_takes_binary_rows(spark, tmp_path):
    """A quarantine table written before ``offset`` existed is appended to, gaining the column."""
    target = tmp_path / "lake"
    old_schema = pa.schema([f for f in QUARANTINE_SCHEMA if f.name != "offset"])
    old = pa.table({"run_id": [1], "format": ["ogg-json"], "file": ["a.json"], "line": [3], "source_table": ["S.T"],
                    "reason": ["not valid JSON"], "raw": ["{"],
                    "quarantined_at": pa.array([0], pa.timestamp("us", tz="UTC"))}, schema=old_schema)
    write_deltalake(quarantine_path(str(target)), old)
    import datetime as dt

    new = pa.table({"file": ["b.bin"], "line": pa.array([None], pa.int64()), "offset": [12], "source_table": ["S.T"],
                    "reason": ["truncated"], "raw": ["AAE="]})
    (q,) = write_quarantine(DeltaRsEngine(), str(target), new, fmt="ogg-avro-op", run_id=2,
                            now=dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))
    assert q.message("ogg-avro-op") == "ogg-avro-op: byte offset 12 of b.bin (table S.T): truncated; the record was quarantined"
    got = sorted(pa.table(DeltaTable(quarantine_path(str(target))).to_pyarrow_table()).to_pylist(), key=lambda r: r["run_id"])
    assert [(r["line"], r["offset"], r["raw"]) for r in got] == [(3, None, "{"), (None, 12, "AAE=")]


# -- round trip: hypothesis histories through the op format -------------------------------------------

_KEY_TYPES = {"ID": "long", "CODE": "string"}


def _schemas(sc: Scenario) -> dict[str, dict[str, Any]]:
    out = {}
    for spec in sc.specs:
        cols = {k: _KEY_TYPES[k] for k in spec.keys}
        cols.update({c: "long" if kind == "int" else "string" for c, kind in spec.columns.items()})
        out[spec.name] = op_schema(spec.name, cols)
    return out


def _run_avro_scenario(spark: Any, sc: Scenario, workdir: Path, container: str) -> None:
    schemas = _schemas(sc)
    dirdef = write_schema_dir(workdir / "dirdef", schemas)
    files = write_runs(sc.events, sc.runs, workdir / "runs", schemas, container=container, primary_keys=sc.primary_keys)
    target = workdir / "target"
    options = {"schemaDirectory": str(dirdef), "wrapMessageInGenericAvroMessage": str(container == "wrapped").lower()}
    kwargs = dict(format="ogg-avro-op", keys=sc.keys(), pk_update=sc.pk_update, spark=spark, options=options)
    oracle, targets, applied = Oracle(), {}, []
    declared = {spec.name: [*spec.keys, *spec.columns] for spec in sc.specs}  # the schemas declare them all
    for number, (run, paths) in enumerate(zip(sc.runs, files, strict=True), start=1):
        run_events = [sc.events[i] for i in run]
        applied += [str(p) for p in paths]
        try:
            expected = oracle.apply_run(declaring(run_events, declared), pk_update=sc.pk_update)
        except PrimaryKeyUpdateError:
            committed = delta_tables_under(target)
            with pytest.raises(lakecdc.PrimaryKeyUpdateError) as info:
                lakecdc.apply(list(applied), str(target), **kwargs)
            assert_names_a_pk_update(str(info.value), run_events)
            assert delta_tables_under(target) == committed
            assert_targets_match(oracle, targets, f"the failed run {number}")
            return
        summary = lakecdc.apply(list(applied), str(target), **kwargs)
        actual = {t.source_table: {f: getattr(t, f, None) for f in SUMMARY_FIELDS} for t in summary.tables}
        for table, entry in actual.items():
            targets[table] = str(entry["target"])
        assert_counts(number, sc, run_events, expected, actual)
        assert_targets_match(oracle, targets, f"run {number}")


@pytest.mark.spark
@pytest.mark.parametrize("container", CONTAINERS)
def test_op_format_round_trip_matches_the_oracle(spark, tmp_path_factory, container):
    """Hypothesis histories (partial images: ``COL_isMissing``), applied run by run, against the
    oracle, as length-prefixed messages, wrapped ones, and OCF files (deflate blocks in odd runs,
    snappy in even ones). Few examples, none trivial: each costs several Spark runs."""

    @seed(CONTAINERS.index(container))  # fixed examples, different for each container
    @settings(max_examples=2, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                     HealthCheck.function_scoped_fixture])
    @given(sc=scenarios(max_events=15))
    def check(sc: Scenario) -> None:
        assume(len(sc.events) >= 6 and len(sc.runs) >= 2)
        try:
            _run_avro_scenario(spark, sc, tmp_path_factory.mktemp(f"avro-{container}"), container)
        except AssertionError as exc:
            raise AssertionError(f"container {container}: {exc}\n{describe(sc)}") from None

    check()


@pytest.mark.spark
@settings(max_examples=int(os.environ.get("LAKECDC_ROW_EXAMPLES", "2")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=12))
def test_row_format_round_trip_matches_the_oracle(spark, tmp_path_factory, sc):
    """Hypothesis histories as ``avro_row`` messages with real schemas: one image per operation,
    missing written as null (so the oracle sees NULL), key changes split by the formatter
    (``pkUpdateHandling=delete-insert``) and joined again by lakecdc, applied run by run by
    ``sc.pk_update``: the oracle's tables and counts."""
    assume(len(sc.events) >= 6 and len(sc.runs) >= 2)
    sc = missing_as_null(sc)
    workdir = tmp_path_factory.mktemp("avro-row")
    render, options = row_scenario_writer(sc, workdir)
    run_row_scenario(spark, sc, workdir, fmt="ogg-avro-row", render=render,
                     options={**options, "pkUpdateHandling": "delete-insert"}, suffix=".bin", rejoin=True,
                     max_runs=2)


def test_a_file_of_messages_split_over_cores_decodes_the_same(spark, tmp_path, monkeypatch):
    """Length-prefixed files are cut at message boundaries into several splits (one per core);
    the events, their rows and a truncated last message come out as from one split."""
    path = tmp_path / "many.bin"
    messages = [encode(SEED_SCHEMA["op"], m) for m in SEED_MESSAGES["op"]] * 40
    data = length_prefixed(messages)
    path.write_bytes(data + data[:7])  # a cut final message: quarantined either way
    opts = {"schemaDirectory": str(FIX / "op")}
    whole = decode(spark, "ogg-avro-op", path, **opts)
    monkeypatch.setattr(splits_module, "MIN_SPLIT", 1)
    monkeypatch.setattr(splits_module, "SPLIT_BYTES", len(data) // 5)
    splits = ogg_avro.OggAvroOpDecoder(opts).plan([str(path)], parallelism=5)
    assert len(splits) >= 4
    split = decode(spark, "ogg-avro-op", path, **opts)
    drop = ("_block",)
    assert [{k: v for k, v in r.asDict().items() if k not in drop} for r in split] == \
           [{k: v for k, v in r.asDict().items() if k not in drop} for r in whole]
    assert sum(r["_error"] is not None for r in whole) == 1
