"""End to end through the Python API: seed examples, re-runs, increments, quarantine, crashes."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from lakecdc.lake.ledger import Ledger
from tests.helpers import ogg, rows, version, write_jsonl

pytestmark = [pytest.mark.spark, pytest.mark.engines]

FIX = Path(__file__).parent / "fixtures" / "ogg-json"
TCUSTORD_KEYS = {"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID"]}


class Crash(RuntimeError):
    """Raised from the progress callback to stop a run at a chosen step, like a killed process."""


def crash_at(fragment: str):
    def say(msg: str) -> None:
        if fragment in msg:
            raise Crash(msg)

    return say


def test_seed_examples_end_to_end(spark, tmp_path):
    """The manual's insert/update/delete, then its truncate in a later file, then a late replay."""
    landing = tmp_path / "landing"
    docs = (FIX / "seed-13.3.4.1-op.json").read_text().split("\n\n\n")
    (landing).mkdir()
    (landing / "1.json").write_text("\n\n".join(docs[:3]))
    target = tmp_path / "lake"
    s = lakecdc.apply(landing, target, format="ogg-json", keys=TCUSTORD_KEYS, spark=spark)
    t = s.table("QASOURCE.TCUSTORD")
    assert (t.events, t.inserted, t.updated, t.deleted, t.quarantined) == (3, 2, 0, 0, 0)
    assert t.target == str((target / "QASOURCE.TCUSTORD").resolve())
    got = rows(t.target, "CUST_CODE")
    assert got == [
        # BILL's update met no row: inserted from the after image, then the before image
        {"CUST_CODE": "BILL", "ORDER_DATE": "1995-12-31:15:00:00", "PRODUCT_CODE": "CAR", "ORDER_ID": 765,
         "PRODUCT_PRICE": Decimal("14000.00"), "PRODUCT_AMOUNT": 3, "TRANSACTION_ID": 100},
        {"CUST_CODE": "WILL", "ORDER_DATE": "1994-09-30:15:33:00", "PRODUCT_CODE": "CAR", "ORDER_ID": 144,
         "PRODUCT_PRICE": Decimal("17520.00"), "PRODUCT_AMOUNT": 3, "TRANSACTION_ID": 100},
    ]
    schema = pa.schema(DeltaTable(t.target).schema().to_arrow())
    assert schema.field("PRODUCT_PRICE").type == pa.decimal128(38, 2)
    assert schema.field("ORDER_ID").type == pa.int64()
    assert {"_cdc_seq", "_cdc_op", "_cdc_op_ts"} <= set(schema.names)

    (landing / "2.json").write_text(docs[3])
    s2 = lakecdc.apply(landing, target, format="ogg-json", keys=TCUSTORD_KEYS, spark=spark)
    assert s2.table("QASOURCE.TCUSTORD").deleted == 2
    assert rows(t.target) == []

    # the insert of WILL delivered again, after the truncate: older than the truncate, so skipped
    (landing / "3.json").write_text(docs[0])
    s3 = lakecdc.apply(landing, target, format="ogg-json", keys=TCUSTORD_KEYS, spark=spark)
    assert s3.table("QASOURCE.TCUSTORD").duplicate_or_late == 1
    assert rows(t.target) == []


def test_rerun_changes_nothing_and_new_files_apply_alone(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
        ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b"}, keys=["ID"]),
    ])
    s1 = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    path = s1.table("S.T").target
    v1 = version(path)
    s2 = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s2.runs == () and s2.tables == ()
    assert version(path) == v1
    write_jsonl(landing / "b.json", [ogg("S.T", "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "V": "z"}, keys=["ID"])])
    s3 = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    t = s3.table("S.T")
    assert (t.events, t.updated, t.inserted) == (1, 1, 0)
    assert rows(path, "ID") == [{"ID": 1, "V": "z"}, {"ID": 2, "V": "b"}]
    assert [m.status for m in Ledger(target).manifests()] == ["committed", "committed"]


def test_partial_updates_never_overwrite_with_missing_columns(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "A": "a0", "B": "b0", "C": "c0"}, keys=["ID"]),
    ])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    write_jsonl(landing / "b.json", [
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "A": "a1"}, keys=["ID"]),
        ogg("S.T", "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "B": None}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert rows(s.table("S.T").target) == [{"ID": 1, "A": "a1", "B": None, "C": "c0"}]


def test_bad_records_are_quarantined_and_the_rest_applies(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    good = [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "N": 10}, keys=["ID"]),
            ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "N": 20}, keys=["ID"])]
    write_jsonl(landing / "a.json", good)
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    lines = [
        json.dumps(ogg("S.T", "I", "00:00:03", 3, after={"ID": 3, "N": 30}, keys=["ID"])),
        '{"table": "S.T", "op_type": "I", ',                                                     # line 2
        json.dumps(ogg("S.T", "Q", "00:00:04", 4, after={"ID": 4}, keys=["ID"])),                 # line 3
        json.dumps(ogg("S.T", "I", "00:00:05", 5, after={"ID": 5, "N": "five"}, keys=["ID"])),    # line 4
        json.dumps(ogg("S.T", "I", "00:00:06", 6, after={"N": 6}, keys=["ID"])),                  # line 5
        json.dumps(ogg("S.T", "I", "00:00:07", 7, after={"ID": 7, "N": 70}, keys=["ID"])),
    ]
    bad_file = landing / "b.json"
    bad_file.write_text("\n".join(lines) + "\n")
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    t = s.table("S.T")
    assert t.quarantined == 3 and s.quarantined_unrouted == 1
    assert rows(t.target, "ID") == [{"ID": i, "N": i * 10} for i in (1, 2, 3, 7)]
    q = sorted(pa.table(DeltaTable(s.quarantine).to_pyarrow_table()).to_pylist(), key=lambda r: r["line"])
    assert [(r["line"], r["source_table"], r["reason"]) for r in q] == [
        (2, None, "not valid JSON"),
        (3, "S.T", "unknown op_type 'Q' (expected one of I, U, D, T)"),
        (4, "S.T", "column 'N': after value 'five' does not fit type bigint"),
        (5, "S.T", "key column 'ID' missing from the after image"),
    ]
    assert all(r["file"] == str(bad_file.resolve()) and r["raw"] == lines[r["line"] - 1] for r in q)
    assert {r["run_id"] for r in q} == {2}


def test_table_without_a_key_fails_alone(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg("S.NOKEY", "I", "00:00:01", 1, after={"X": 1}),
        ogg("S.T", "I", "00:00:02", 2, after={"ID": 1}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert not s.ok
    assert s.table("S.NOKEY").status == "failed"
    assert "--key S.NOKEY=COL" in (s.table("S.NOKEY").error or "")
    assert rows(s.table("S.T").target) == [{"ID": 1}]
    # the run stays open: given the key, the next run applies the failed table only
    s2 = lakecdc.apply(landing, target, format="ogg-json", keys={"S.NOKEY": ["X"]}, spark=spark)
    assert s2.ok and s2.table("S.T").status == "skipped"
    assert rows(s2.table("S.NOKEY").target) == [{"X": 1}]


def test_abend_on_a_key_change_commits_nothing(spark, tmp_path, monkeypatch, delta_engine):
    """The abend stops the run before any commit and leaves nothing behind: no table version, no
    staged files, nothing in the session's cache (another table's prepared actions released)."""
    monkeypatch.setenv("LAKECDC_STAGED_FOLD_BYTES", "0")  # (delta-rs stages, delta-spark caches)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
                                     ogg("S.U", "I", "00:00:01", 1, after={"ID": 1}, keys=["ID"])])
    first = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    versions = {t.source_table: version(t.target) for t in first.tables}
    write_jsonl(landing / "b.json", [
        ogg("S.U", "I", "00:00:02", 2, after={"ID": 2}, keys=["ID"]),
        ogg("S.T", "U", "00:00:03", 3, before={"ID": 1, "V": "a"}, after={"ID": 9, "V": "a"}, keys=["ID"]),
    ])
    with pytest.raises(lakecdc.PrimaryKeyUpdateError, match=r"'S.T'.*\(1,\).*\(9,\).*00000000000000000003"):
        lakecdc.apply(landing, target, format="ogg-json", pk_update="abend", spark=spark)
    assert {t.source_table: version(t.target) for t in first.tables} == versions
    assert not list((target / "_lakecdc").glob("staging/*"))
    if hasattr(spark, "_jsparkSession"):
        assert spark._jsparkSession.sharedState().cacheManager().isEmpty()
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)   # default delete-insert resumes the same run
    assert rows(s.table("S.T").target) == [{"ID": 9, "V": "a"}]
    assert rows(s.table("S.U").target, "ID") == [{"ID": 1}, {"ID": 2}]


def test_crash_between_tables_then_rerun_applies_exactly_once(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg("S.A", "I", "00:00:01", 1, after={"ID": 1, "N": 1}, keys=["ID"]),
        ogg("S.B", "I", "00:00:02", 2, after={"ID": 1, "N": 1}, keys=["ID"]),
        ogg("S.A", "D", "00:00:03", 3, before={"ID": 1}, keys=["ID"]),
        ogg("S.A", "I", "00:00:04", 4, after={"ID": 2, "N": 2}, keys=["ID"]),
    ])
    with pytest.raises(Crash):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, progress=crash_at("S.B: merging"))
    a = str(target.resolve() / "S.A")
    assert rows(a, "ID") == [{"ID": 2, "N": 2}]
    assert [m.status for m in Ledger(target).manifests()] == ["planned"]
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.resumed and s.table("S.A").status == "skipped"
    assert rows(a, "ID") == [{"ID": 2, "N": 2}]
    assert rows(s.table("S.B").target) == [{"ID": 1, "N": 1}]
    assert [m.status for m in Ledger(target).manifests()] == ["committed"]
    # a crash after every commit (before the manifest closed) resumes to a no-op
    write_jsonl(landing / "b.json", [ogg("S.A", "U", "00:00:05", 5, before={"ID": 2}, after={"ID": 2, "N": 3}, keys=["ID"])])
    with pytest.raises(Crash):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, progress=crash_at("recording the run"))
    v = version(a)
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert version(a) == v and rows(a) == [{"ID": 2, "N": 3}]
    assert [m.status for m in Ledger(target).manifests()] == ["committed", "committed"]


def test_late_update_after_delete_does_not_resurrect(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
                                     ogg("S.T", "D", "00:00:05", 5, before={"ID": 1}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    write_jsonl(landing / "2.json", [ogg("S.T", "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "V": "late"}, keys=["ID"]),
                                     ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.table("S.T").duplicate_or_late == 2
    assert rows(s.table("S.T").target) == []


def test_goldengate_samples_from_public_projects(spark, tmp_path, sample):
    """Paimon's GoldenGate fixtures: several tables, mixed-case names, updates, deletes."""
    for name in ("paimon-ogg-database-include-multitable.txt", "paimon-ogg-database-case-insensitive.txt",
                 "paimon-ogg-table-schemaevolution-3.txt", "paimon-ogg-event-update.txt",
                 "paimon-ogg-event-delete.txt"):
        sample(f"ogg-json/{name}")
    s = lakecdc.apply(tmp_path / "landing", tmp_path / "lake", format="ogg-json", spark=spark)
    assert s.ok and s.quarantined_unrouted == 0
    # case-insensitive: ID/id, NAME/name, weight/WEIGHT are one column each
    t1 = rows(s.table("PAIMON_SYNC_DATABASE.T1").target, "ID")
    assert t1 == [
        {"ID": 101, "NAME": "scooter", "description": "Small 2-wheel scooter", "weight": Decimal("3.14")},
        {"ID": 102, "NAME": "car battery", "description": "12V car battery", "weight": Decimal("8.10")},
    ]
    # schema evolution sample: insert 105 (with address), update 105 -> Beijing, insert 107, delete 101
    tbl = rows(s.table("OGG.TBL_TEST").target, "id")
    assert [(r["id"], r["address"]) for r in tbl] == [(105, "Beijing"), (107, None)]
    assert {t.source_table for t in s.tables} >= {"PAIMON_SYNC_DATABASE_AFFIX.paimon_1", "PAIMON_SYNC_DATABASE_AFFIX.flink"}


FALLBACK = "the batch holds more than the fast path assumed"


def _apply_logged(spark, landing: Path, target: Path) -> tuple[lakecdc.RunSummary, list[str]]:
    said: list[str] = []
    return lakecdc.apply(landing, target, format="ogg-json", spark=spark, progress=said.append), said


def test_a_one_table_target_is_applied_in_one_pass(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": i, "A": f"a{i}", "N": i}, keys=["ID"])
                                     for i in (1, 2, 3)])
    _, said = _apply_logged(spark, landing, target)
    assert json.loads((target / "_lakecdc" / "tables" / "S.T.json").read_text()) == {"keys": ["ID"], "table": "S.T"}
    write_jsonl(landing / "2.json", [
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "N": 10}, keys=["ID"]),
        ogg("S.T", "D", "00:00:03", 3, before={"ID": 2, "A": "a2", "N": 2}, keys=["ID"]),
        ogg("S.T", "I", "00:00:04", 4, after={"ID": 4, "A": None, "N": 4}, keys=["ID"]),
    ])
    s, said = _apply_logged(spark, landing, target)
    assert not any(FALLBACK in m for m in said) and not any("inferring" in m for m in said)
    t = s.table("S.T")
    assert (t.events, t.inserted, t.updated, t.deleted) == (3, 1, 1, 1)
    assert rows(t.target, "ID") == [{"ID": 1, "A": "a1", "N": 10}, {"ID": 3, "A": "a3", "N": 3}, {"ID": 4, "A": None, "N": 4}]


@pytest.mark.parametrize("surprise", ["new column", "other table", "truncate", "late event", "bad value", "other keys"])
def test_the_one_pass_falls_back_when_the_batch_surprises_it(spark, tmp_path, surprise):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:05", 5, after={"ID": i, "N": i}, keys=["ID"]) for i in (1, 2)])
    _apply_logged(spark, landing, target)
    batch = [ogg("S.T", "U", "00:00:06", 6, before={"ID": 1}, after={"ID": 1, "N": 10}, keys=["ID"])]
    expected = [{"ID": 1, "N": 10}, {"ID": 2, "N": 2}]
    if surprise == "new column":
        batch.append(ogg("S.T", "U", "00:00:07", 7, before={"ID": 2}, after={"ID": 2, "X": "x"}, keys=["ID"]))
        expected = [{"ID": 1, "N": 10, "X": None}, {"ID": 2, "N": 2, "X": "x"}]
    elif surprise == "other table":
        batch.append(ogg("S.U", "I", "00:00:07", 7, after={"ID": 1}, keys=["ID"]))
    elif surprise == "truncate":
        batch = [ogg("S.T", "T", "00:00:05", 55), *batch]
        expected = [{"ID": 1, "N": 10}]
    elif surprise == "late event":
        batch.append(ogg("S.T", "U", "00:00:04", 4, before={"ID": 2}, after={"ID": 2, "N": 99}, keys=["ID"]))
    elif surprise == "bad value":
        batch.append(ogg("S.T", "U", "00:00:07", 7, before={"ID": 2}, after={"ID": 2, "N": "two"}, keys=["ID"]))
    elif surprise == "other keys":
        batch.append(ogg("S.T", "U", "00:00:07", 7, before={"ID": 2}, after={"ID": 2, "N": 20}, keys=["N"]))
    write_jsonl(landing / "2.json", batch)
    if surprise == "other keys":
        with pytest.raises(lakecdc.LakecdcError, match="primary_keys are now"):
            _apply_logged(spark, landing, target)
        return
    s, said = _apply_logged(spark, landing, target)
    assert any(FALLBACK in m for m in said)
    assert rows(s.table("S.T").target, "ID") == expected


def test_dlt_column_lists_and_truncates(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [
        ogg("S.A", "I", "00:00:01", 1, after={"ID": 1, "X": "x", "Y": "y", "Z": "z"}, keys=["ID"]),
        ogg("S.B", "I", "00:00:01", 2, after={"ID": 1, "X": "x", "Y": "y"}, keys=["ID"]),
    ])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark, column_list={"S.A": ["X"]}, except_column_list={"S.B": "Y"})
    write_jsonl(landing / "2.json", [
        ogg("S.A", "U", "00:00:02", 3, before={"ID": 1}, after={"ID": 1, "X": "x2", "Z": "z2"}, keys=["ID"]),
        ogg("S.A", "T", "00:00:03", 4),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark, column_list={"S.A": ["X"]}, apply_as_truncates=False)
    assert rows(s.table("S.A").target) == [{"ID": 1, "X": "x2"}]
    assert rows(str(target / "S.B")) == [{"ID": 1, "X": "x"}]
    with pytest.raises(lakecdc.LakecdcError, match="not both"):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, column_list={"S.A": ["X"]}, except_column_list={"S.A": ["Z"]})


class _MarkerJson(lakecdc.decode.goldengate.json.OggJsonDecoder):
    """ogg-json where op_type ``X`` is a marker record (like a Debezium tombstone): no row change."""

    name = "test-markers"
    TRANSACTION_MARKERS = True

    def read(self, spark, files, *, staging):
        from pyspark.sql import functions as F

        events = super().read(spark, files, staging=staging)
        from lakecdc.decode.files.lines import read_json

        raw = read_json(spark, files, self.schema(), staging=staging).select("_row", "op_type")
        marker = F.col("op_type") == "X"
        blank = {"op": marker, "_error": marker, "table": marker & (F.col("table") == "-")}
        # tokens txid / status / count play Debezium's transaction block and BEGIN/END markers
        tok = F.col("source")
        tx = F.create_map(F.lit("tx.status"), tok["token.status"], F.lit("tx.event_count"), tok["token.count"])
        swap = {"txid": tok["token.txid"], "source": F.map_concat(tok, tx)}
        return events.join(raw, "_row", "left").select(
            *[F.when(blank[c], None).otherwise(F.col(c)).alias(c) if c in blank else
              swap[c].alias(c) if c in swap else F.col(c) for c in events.columns]
        )


@pytest.mark.parametrize("first_run", ["profile", "one pass"])
def test_marker_records_are_skipped_and_counted_not_quarantined(spark, tmp_path, monkeypatch, first_run):
    """Records a decoder marks as no row change (op NULL, no error) are counted as skipped per
    table (or unrouted without a table), never applied nor quarantined; the one-pass path gives way."""
    monkeypatch.setitem(lakecdc.decode.DECODERS, "test-markers", _MarkerJson)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    t = "S.T"
    if first_run == "one pass":  # a first run records the table, so the next run tries one pass
        write_jsonl(landing / "0.json", [ogg(t, "I", "00:00:00", 0, after={"ID": 0, "V": "zero"}, keys=["ID"])])
        lakecdc.apply(landing, target, format="test-markers", spark=spark)
    write_jsonl(landing / "1.json", [
        ogg(t, "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
        ogg(t, "X", "00:00:02", 2, keys=["ID"]),
        ogg("-", "X", "00:00:03", 3),
        ogg(t, "U", "00:00:04", 4, before={"ID": 1}, after={"ID": 1, "V": "b"}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="test-markers", spark=spark)
    table = s.table(t)
    assert (table.events, table.skipped, table.quarantined) == (2, 1, 0)
    assert s.skipped_unrouted == 1 and s.quarantined_unrouted == 0
    assert "2 record(s) skipped" in s.render()
    expect = [{"ID": 1, "V": "b"}] + ([{"ID": 0, "V": "zero"}] if first_run == "one pass" else [])
    assert rows(table.target, "ID") == sorted(expect, key=lambda r: str(r["ID"]))
    assert not Path(s.quarantine).exists()


@pytest.mark.parametrize("retention_days", [7, 0])
def test_tombstone_retention_decides_whether_a_late_update_resurrects_a_deleted_key(spark, tmp_path, retention_days):
    """A deleted key's tombstone blocks a late update while it is kept; once expired (retention
    0: at once) the late update finds no trace of the delete and inserts the row again."""
    import datetime as dt

    landing, target = tmp_path / "landing", tmp_path / "lake"
    retention = dt.timedelta(days=retention_days)
    write_jsonl(landing / "1.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
        ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b"}, keys=["ID"]),
        ogg("S.T", "D", "00:00:05", 5, before={"ID": 1}, keys=["ID"]),
    ])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark, tombstone_retention=retention)
    write_jsonl(landing / "2.json", [ogg("S.T", "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "V": "late"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark, tombstone_retention=retention)
    got = rows(s.table("S.T").target, "ID")
    if retention_days:
        assert got == [{"ID": 2, "V": "b"}] and s.table("S.T").duplicate_or_late == 1
    else:
        assert got == [{"ID": 1, "V": "late"}, {"ID": 2, "V": "b"}]


def test_complete_transactions_hold_open_ones_until_their_end_marker_and_every_event_arrived(spark, tmp_path, monkeypatch):
    """complete_transactions=True: a transaction applies once its END marker and event_count
    distinct events (a consumer restart's duplicate does not count twice) have been read; until
    then its events are held, counted, and never half-applied."""
    monkeypatch.setitem(lakecdc.decode.DECODERS, "test-markers", _MarkerJson)
    landing, target = tmp_path / "landing", tmp_path / "lake"

    def ev(op, pos, *, tx=None, status=None, count=None, **images):
        msg = ogg("S.T" if op != "X" else "-", op, f"00:00:{pos:02d}", pos, keys=["ID"], **images)
        msg["tokens"] = {k: str(v) for k, v in (("txid", tx), ("status", status), ("count", count)) if v is not None}
        return msg

    b1 = ev("I", 5, tx="B", after={"ID": 3, "V": "b1"})
    write_jsonl(landing / "1.json", [
        ev("X", 1, tx="A", status="BEGIN"),
        ev("I", 2, tx="A", after={"ID": 1, "V": "a1"}),
        ev("I", 3, tx="A", after={"ID": 2, "V": "a2"}),
        ev("X", 4, tx="A", status="END", count=2),
        ev("X", 4, tx="B", status="BEGIN"),
        b1,
        ev("I", 6, after={"ID": 4, "V": "no transaction"}),
    ])
    s1 = lakecdc.apply(landing, target, format="test-markers", complete_transactions=True, spark=spark)
    path = s1.table("S.T").target
    assert rows(path, "ID") == [{"ID": 1, "V": "a1"}, {"ID": 2, "V": "a2"}, {"ID": 4, "V": "no transaction"}]
    assert s1.table("S.T").held == 1 and s1.skipped_unrouted == 3
    assert "1 event(s) held for the next run" in s1.render()

    write_jsonl(landing / "2.json", [b1, ev("U", 7, tx="B", before={"ID": 3}, after={"ID": 3, "V": "b2"}),
                                     ev("X", 9, tx="B", status="END", count=3)])
    s2 = lakecdc.apply(landing, target, format="test-markers", complete_transactions=True, spark=spark)
    assert rows(path, "ID") == [{"ID": 1, "V": "a1"}, {"ID": 2, "V": "a2"}, {"ID": 4, "V": "no transaction"}]
    assert s2.table("S.T").held == 3 and s2.skipped_unrouted == 1  # B is 2 distinct events of 3

    write_jsonl(landing / "3.json", [ev("I", 8, tx="B", after={"ID": 5, "V": "b3"})])
    s3 = lakecdc.apply(landing, target, format="test-markers", complete_transactions=True, spark=spark)
    assert rows(path, "ID") == [{"ID": 1, "V": "a1"}, {"ID": 2, "V": "a2"}, {"ID": 3, "V": "b2"},
                                {"ID": 4, "V": "no transaction"}, {"ID": 5, "V": "b3"}]
    t3 = s3.table("S.T")
    assert t3.held == 0 and s3.skipped_unrouted == 0 and t3.inserted == 2 and t3.duplicate_or_late == 1
    # nothing new: nothing changes, nothing is held again
    again = lakecdc.apply(landing, target, format="test-markers", complete_transactions=True, spark=spark)
    assert again.runs == () and rows(path, "ID")[2] == {"ID": 3, "V": "b2"}


def test_a_table_keeps_its_recorded_keys_for_messages_without_keys(spark, tmp_path):
    """Once a table is built on its keys, later runs whose messages carry none (inserts and
    deletes of some formats) use the recorded ones instead of failing for want of --key."""
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    write_jsonl(landing / "2.json", [ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b"}),
                                     ogg("S.T", "D", "00:00:03", 3, before={"ID": 1})])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.ok and rows(s.table("S.T").target, "ID") == [{"ID": 2, "V": "b"}]


def test_a_key_value_of_the_wrong_type_is_named_in_the_reason(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    write_jsonl(landing / "2.json", [ogg("S.T", "I", "00:00:02", 2, after={"ID": "seven", "V": "b"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    reasons = DeltaTable(s.quarantine).to_pyarrow_table().column("reason").to_pylist()
    assert reasons == ["column 'ID': after value 'seven' does not fit type bigint"]


def test_a_failing_table_does_not_block_the_others_and_catches_up_in_order(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg("S.A", "I", "00:00:01", 1, after={"ID": 1, "N": 1}, keys=["ID"]),
        ogg("S.B", "I", "00:00:02", 2, after={"ID": 1, "N": 1}, keys=["ID"]),
    ])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    b = target.resolve() / "S.B"
    # S.B's log gets a commit nobody can read (a half-copied table, a broken writer)
    broken = b / "_delta_log" / f"{version(b) + 1:020d}.json"
    broken.write_text("{not json\n")
    write_jsonl(landing / "b.json", [
        ogg("S.A", "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "N": 2}, keys=["ID"]),
        ogg("S.B", "U", "00:00:04", 4, before={"ID": 1}, after={"ID": 1, "N": 2}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert not s.ok and s.table("S.B").status == "failed" and s.table("S.A").status == "applied"
    assert "Error" in (s.table("S.B").error or "")
    assert rows(target.resolve() / "S.A") == [{"ID": 1, "N": 2}]
    write_jsonl(landing / "c.json", [
        ogg("S.A", "U", "00:00:05", 5, before={"ID": 1}, after={"ID": 1, "N": 3}, keys=["ID"]),
        ogg("S.B", "U", "00:00:06", 6, before={"ID": 1}, after={"ID": 1, "N": 3}, keys=["ID"]),
        ogg("S.B", "I", "00:00:07", 7, after={"ID": 2, "N": 1}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)   # run 2 resumed (S.B fails again), run 3 new
    assert [t.status for t in s.tables] == ["applied", "failed"] and s.runs == (2, 3)
    assert rows(target.resolve() / "S.A") == [{"ID": 1, "N": 3}]
    assert [m.status for m in Ledger(target).manifests()] == ["committed", "planned", "planned"]
    broken.unlink()   # repaired: both unfinished runs are resumed, oldest first, for S.B only
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.ok and s.runs == (2, 3) and s.table("S.A").status == "skipped"
    assert rows(b, "ID") == [{"ID": 1, "N": 3}, {"ID": 2, "N": 1}]
    assert rows(target.resolve() / "S.A") == [{"ID": 1, "N": 3}]
    assert [m.status for m in Ledger(target).manifests()] == ["committed"] * 3


def test_tables_routed_to_their_own_paths_with_their_own_settings(spark, tmp_path):
    landing, target, elsewhere = tmp_path / "landing", tmp_path / "lake", tmp_path / "warehouse" / "orders"
    write_jsonl(landing / "a.json", [
        ogg("S.CUST", "I", "00:00:01", 1, after={"ID": 1, "N": "a"}, keys=["ID"]),
        ogg("S.ORD", "I", "00:00:02", 2, after={"ID": 1, "N": "a"}, keys=["ID"]),
        # a key change: an update for S.ORD, a delete + insert for S.CUST (the run's default)
        ogg("S.CUST", "U", "00:00:03", 3, before={"ID": 1, "N": "a"}, after={"ID": 2, "N": "a"}, keys=["ID"]),
        ogg("S.ORD", "U", "00:00:04", 4, before={"ID": 1, "N": "a"}, after={"ID": 2, "N": "a"}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark, pk_update={"S.ORD": "update"},
                      table_paths={"S.CUST": "customers", "S.ORD": str(elsewhere)})
    cust, ord_ = s.table("S.CUST"), s.table("S.ORD")
    assert cust.target == str(target.resolve() / "customers") and ord_.target == str(elsewhere)
    assert rows(cust.target) == [{"ID": 2, "N": "a"}] and rows(elsewhere) == [{"ID": 2, "N": "a"}]
    assert (cust.inserted, cust.deleted, cust.updated) == (1, 0, 0)       # new table: net insert of key 2
    assert (ord_.inserted, ord_.updated) == (1, 0)
    assert not (target / "S.CUST").exists() and not (target / "S.ORD").exists()
    # later runs, maintenance and status find them without being told again
    write_jsonl(landing / "b.json", [ogg("S.ORD", "U", "00:00:05", 5, before={"ID": 2}, after={"ID": 2, "N": "b"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.table("S.ORD").target == str(elsewhere) and rows(elsewhere) == [{"ID": 2, "N": "b"}]
    reports = lakecdc.maintain(str(target), vacuum_retention=None)
    assert {r.target for r in reports} == {cust.target, str(elsewhere)}
    # an existing table is not moved by a new path
    with pytest.raises(lakecdc.LakecdcError, match="already lives at .*customers.*does not move tables"):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, table_paths={"S.CUST": "clients"})
    with pytest.raises(lakecdc.LakecdcError, match="pk_update 'sideways'"):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, pk_update={"S.ORD": "sideways"})


def test_complete_transactions_is_refused_for_formats_without_transaction_markers(spark, tmp_path):
    write_jsonl(tmp_path / "landing" / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1}, keys=["ID"])])
    with pytest.raises(lakecdc.LakecdcError, match="ogg-json messages do not carry"):
        lakecdc.apply(tmp_path / "landing", tmp_path / "lake", format="ogg-json", complete_transactions=True, spark=spark)


def test_delta_spark_merges_the_net_actions_from_spark_and_counts_them_there(spark, tmp_path, monkeypatch, delta_engine):
    """With delta-spark the fold's net actions stay in Spark (cached, merged from the DataFrame):
    only their facts and the deleted keys reach the driver; with delta-rs they are collected as
    Arrow. Either way the counts, the per-file accounts (two files: summed per file in Spark) and
    the table are the same, on the first run (the ordinary path) and the next (the fast path)."""
    from lakecdc.merge import source as source_mod

    made: list[str] = []
    for name in ("from_arrow", "from_spark"):
        real = getattr(source_mod.BatchSource, name).__func__

        def record(cls, *args, _real=real, _name=name, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            made.append(_name)
            return _real(cls, *args, **kwargs)

        monkeypatch.setattr(source_mod.BatchSource, name, classmethod(record))
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "W": 1}, keys=["ID"]),
        ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b", "W": 2}, keys=["ID"]),
        ogg("S.T", "I", "00:00:03", 3, after={"ID": 3, "V": "c", "W": 3}, keys=["ID"]),
    ])
    write_jsonl(landing / "b.json", [
        ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b", "W": 2}, keys=["ID"]),  # a replayed copy
        ogg("S.T", "U", "00:00:04", 4, before={"ID": 1}, after={"ID": 1, "V": "a2"}, keys=["ID"]),
        ogg("S.T", "D", "00:00:05", 5, before={"ID": 3, "V": "c", "W": 3}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    t = s.table("S.T")
    assert (t.events, t.inserted, t.deleted, t.duplicate_or_late) == (6, 2, 0, 1)
    assert t.last_seq is not None and t.last_op_ts is not None and t.last_op_ts.startswith("2020-01-01T00:00:05")
    accounts = {Path(f).name: a for f, a in s.file_accounts.items()}
    assert accounts == {"a.json": {"applied": 3}, "b.json": {"applied": 2, "duplicate_or_late": 1}}
    assert rows(t.target, "ID") == [{"ID": 1, "V": "a2", "W": 1}, {"ID": 2, "V": "b", "W": 2}]
    write_jsonl(landing / "c.json", [
        ogg("S.T", "U", "00:00:06", 6, before={"ID": 2}, after={"ID": 2, "W": 20}, keys=["ID"]),
        ogg("S.T", "D", "00:00:07", 7, before={"ID": 1, "V": "a2", "W": 1}, keys=["ID"]),
    ])
    s2 = lakecdc.apply(landing, target, format="ogg-json", spark=spark).table("S.T")
    assert (s2.events, s2.updated, s2.deleted) == (2, 1, 1)
    assert rows(t.target, "ID") == [{"ID": 2, "V": "b", "W": 20}]
    expected = "from_spark" if delta_engine == "delta-spark" else "from_arrow"
    assert made == [expected, expected]
    if hasattr(spark, "_jsparkSession"):  # nothing a run cached stays in the session's cache
        assert spark._jsparkSession.sharedState().cacheManager().isEmpty()
