"""``sequence_by``: a table's changes ordered by fields of the data (lakecdc.changes.sequence).

The GoldenGate messages here are written with ``op_ts``/``pos`` in one order and a column
(``VER``, ``UPDATED_AT``) in another: with ``sequence_by`` the table must follow the column.
Also: the order-preserving encodings (numbers of any digit count and sign, decimals, dates,
timestamps, text), events without a value quarantined, the CLI / job YAML / contract forms and
their precedence, a table refusing a basis other than the one it was built with, and a property
test against the oracle (which orders by the same key).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.changes.sequence import SEQUENCE_BY_PROPERTY, encode
from lakecdc.config.values import parse_sequence_by
from lakecdc.errors import ConfigError

try:
    from tests.helpers import ogg, rows, write_jsonl
    from tests.oracle import Event, Oracle
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import ogg, rows, write_jsonl  # type: ignore[no-redef]
    from oracle import Event, Oracle  # type: ignore[no-redef]

pytestmark = pytest.mark.spark
T = "S.T"


def _events(versions: dict[int, list[Any]], *, reverse: bool = True) -> list[dict]:
    """Per key, one insert then updates carrying ``VER`` = the given values, in the listed
    order; op_ts/pos run the other way (``reverse``), so op_ts order disagrees with VER order."""
    flat = [(k, i, v) for k, vs in versions.items() for i, v in enumerate(vs)]
    out = []
    n = len(flat)
    for j, (k, i, v) in enumerate(flat):
        at = n - j if reverse else j + 1
        ts = f"00:{at // 60:02d}:{at % 60:02d}"
        if i == 0:
            out.append(ogg(T, "I", ts, at, after={"ID": k, "VER": v, "NOTE": f"v{v}"}, keys=["ID"]))
        else:
            out.append(ogg(T, "U", ts, at, before={"ID": k}, after={"ID": k, "VER": v, "NOTE": f"v{v}"}, keys=["ID"]))
    return out


def test_the_table_follows_the_column_not_op_ts(tmp_path: Path, spark) -> None:
    # key 1: VER 9 then 10 (text order would keep 9); key 2: -12 then -3; key 3: -1 then 0;
    # key 4: 7, then -5 delivered later with an older VER; key 5: 100 then 99 then 1000
    versions = {1: [9, 10], 2: [-12, -3], 3: [-1, 0], 4: [7, -5], 5: [100, 99, 1000]}
    write_jsonl(tmp_path / "in" / "a.json", _events(versions))
    s = lakecdc.apply(tmp_path / "in", tmp_path / "lake", format="ogg-json", sequence_by=["VER"], spark=spark)
    assert s.ok, s.render()
    got = {r["ID"]: r["VER"] for r in rows(tmp_path / "lake" / T, "ID")}
    # inserts at the largest op_ts lose against updates with a larger VER, and win against smaller
    assert got == {1: 10, 2: -3, 3: 0, 4: 7, 5: 1000}
    assert DeltaTable(str(tmp_path / "lake" / T)).metadata().configuration[SEQUENCE_BY_PROPERTY] == "VER"
    # a later run: events with a smaller VER than the stored row are late, a larger one applies
    later = [ogg(T, "U", "01:00:00", 500, before={"ID": 1}, after={"ID": 1, "VER": 2}),
             ogg(T, "U", "01:00:01", 501, before={"ID": 2}, after={"ID": 2, "VER": 11}),
             ogg(T, "D", "01:00:02", 502, before={"ID": 5, "VER": 999})]
    write_jsonl(tmp_path / "in" / "b.json", later)
    s = lakecdc.apply(tmp_path / "in", tmp_path / "lake", format="ogg-json", sequence_by="VER", spark=spark)
    assert s.ok, s.render()
    assert s.table(T).duplicate_or_late == 2  # the update of key 1 and the delete of key 5
    got = {r["ID"]: r["VER"] for r in rows(tmp_path / "lake" / T, "ID")}
    assert got == {1: 10, 2: 11, 3: 0, 4: 7, 5: 1000}
    # read_changes: the same seq (a column typed as :int, since it knows no table)
    ev = lakecdc.read_changes(tmp_path / "in" / "a.json", format="ogg-json", sequence_by=["VER:int"], spark=spark)
    ordered = [int(r[0]) for r in ev.orderBy("seq").select(ev["after"]["VER"]).collect()]
    assert ordered == sorted(v for vs in versions.values() for v in vs)


def test_encodings_keep_the_order_of_values(spark) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql import types as Ty

    longs = [-(2**63), -(10**12), -100, -99, -10, -9, -1, 0, 1, 9, 10, 99, 100, 10**12, 2**63 - 1]
    decs = [decimal.Decimal(x) for x in ("-1000.5", "-999.99", "-10.01", "-10", "-0.01", "0", "0.01", "9.99", "10", "123456.78")]
    days = [dt.date(1900, 1, 1), dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(2024, 2, 29)]
    stamps = [dt.datetime(1950, 1, 1), dt.datetime(2020, 1, 1), dt.datetime(2020, 1, 1, 0, 0, 0, 1)]  # (UTC session)
    texts = ["", "a", "ab", "abc", "b", "ba", "é"]
    cases: list[tuple[list[Any], Ty.DataType]] = [
        (longs, Ty.LongType()), (decs, Ty.DecimalType(12, 2)), (days, Ty.DateType()),
        (stamps, Ty.TimestampType()), (texts, Ty.StringType()), ([-5, 3, 40], Ty.IntegerType()),
    ]
    for values, dtype in cases:
        shuffled = values[:]
        random.Random(1).shuffle(shuffled)
        df = spark.createDataFrame([(v,) for v in shuffled], Ty.StructType([Ty.StructField("v", dtype)]))
        # the encoding of a text value (as decoders deliver it) and of the typed value agree
        text = df.select(F.col("v"), encode(F.col("v").cast("string"), dtype).alias("e")).collect()
        assert all(r["e"] is not None for r in text)
        assert [r["v"] for r in sorted(text, key=lambda r: r["e"])] == values, dtype
    bad = spark.createDataFrame([("x",), (None,), ("1.5",)], "v string")
    assert [r[0] for r in bad.select(encode(F.col("v"), Ty.LongType())).collect()][:2] == [None, None]


def test_parse_and_refuse_float_columns(spark) -> None:  # (F.col needs a running Spark)
    assert [str(f) for f in parse_sequence_by("VER, source.scn:int ,op_ts")] == ["VER", "source.scn:int", "op_ts"]
    for bad in ("", "VER:float", "source."):
        with pytest.raises(ConfigError):
            parse_sequence_by(bad)
    from pyspark.sql import functions as F
    from pyspark.sql import types as Ty

    with pytest.raises(ConfigError, match="floating-point"):
        encode(F.col("x"), Ty.DoubleType(), "PRICE")


def test_an_event_without_a_value_is_quarantined(tmp_path: Path, spark) -> None:
    msgs = [
        ogg(T, "I", "00:00:01", 1, after={"ID": 1, "VER": 1, "NOTE": "a"}, keys=["ID"]),
        ogg(T, "I", "00:00:02", 2, after={"ID": 2, "VER": 1, "NOTE": "b"}, keys=["ID"]),
        ogg(T, "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "VER": None, "NOTE": "null ver"}),
        ogg(T, "U", "00:00:04", 4, before={"ID": 2, "VER": 1}, after={"ID": 2, "NOTE": "partial"}),
        ogg(T, "U", "00:00:05", 5, before={"ID": 1}, after={"ID": 1, "VER": 2, "NOTE": "fine"}),
        ogg(T, "T", "00:00:06", 6),
    ]
    write_jsonl(tmp_path / "in" / "a.json", msgs)
    s = lakecdc.apply(tmp_path / "in", tmp_path / "lake", format="ogg-json", sequence_by={T: ["VER"]}, spark=spark)
    assert s.table(T).quarantined == 3, s.render()
    assert {r["ID"]: r["NOTE"] for r in rows(tmp_path / "lake" / T, "ID")} == {1: "fine", 2: "b"}
    q = DeltaTable(s.quarantine).to_pyarrow_table().to_pylist()
    assert sorted(r["line"] for r in q) == [3, 4, 6]
    assert all("S.T" in r["reason"] and "'VER'" in r["reason"] for r in q), q


def _cli(*args: str) -> int:
    from lakecdc.cli import main

    return main(["apply", "--format", "ogg-json", "--quiet", *args])


def test_cli_job_and_contract_forms(tmp_path: Path, spark) -> None:
    from lakecdc.jobs import load_job, run_job

    versions = {1: [5, 40, 300], 2: [2, 1]}
    expect = {1: 300, 2: 2}
    for name in ("cli", "cli_table", "job", "contract"):
        write_jsonl(tmp_path / name / "in" / "a.json", _events(versions))
    assert _cli("--input", str(tmp_path / "cli" / "in"), "--target", str(tmp_path / "cli" / "lake"),
                "--sequence-by", "VER") == 0
    assert _cli("--input", str(tmp_path / "cli_table" / "in"), "--target", str(tmp_path / "cli_table" / "lake"),
                "--sequence-by", f"{T}=VER,op_ts", "--parallel-tables", "2") == 0
    job = tmp_path / "job" / "job.yaml"
    job.write_text(json.dumps({
        "target": str(tmp_path / "job" / "lake"), "parallel_tables": 2, "sequence_by": ["pos"],
        "sources": [{"input": str(tmp_path / "job" / "in"), "format": "ogg-json"}],
        "tables": {"sequence_by": {T: ["VER"]}},
    }))
    assert run_job(load_job(job), spark=spark).ok
    contract = tmp_path / "contract" / "t.yaml"
    contract.write_text(json.dumps({
        "apiVersion": "v3.0.2", "kind": "DataContract", "id": "t", "version": "1", "status": "active",
        "schema": [{"name": "T", "physicalName": T, "properties": [
            {"name": "ID", "physicalType": "bigint", "primaryKey": True},
            {"name": "VER", "physicalType": "decimal(10,0)"}, {"name": "NOTE", "physicalType": "string"}]}],
        "customProperties": [{"property": "lakecdc.sequence_by", "value": "VER"}],
    }))
    s = lakecdc.apply(tmp_path / "contract" / "in", tmp_path / "contract" / "lake", format="ogg-json",
                      contracts=contract, spark=spark)
    assert s.ok, s.render()
    for name, basis in (("cli", "VER"), ("cli_table", "VER,op_ts"), ("job", "VER"), ("contract", "VER")):
        path = tmp_path / name / "lake" / T
        assert {r["ID"]: int(r["VER"]) for r in rows(path, "ID")} == expect, name
        assert DeltaTable(str(path)).metadata().configuration[SEQUENCE_BY_PROPERTY] == basis, name
    # precedence as pk_update's: the API's per-table setting over the contract's, over the run's
    # ("pos" orders as delivered: the first-written event has the largest pos here)
    write_jsonl(tmp_path / "prec" / "in" / "a.json", _events(versions))
    s = lakecdc.apply(tmp_path / "prec" / "in", tmp_path / "prec" / "lake", format="ogg-json", contracts=contract,
                      sequence_by={T: ["pos"], "*": ["VER"]}, spark=spark)
    assert {r["ID"]: int(r["VER"]) for r in rows(tmp_path / "prec" / "lake" / T, "ID")} == {1: 5, 2: 2}
    with pytest.raises(SystemExit):
        _cli("--input", "x", "--target", "y", "--parallel-tables", "two")


def test_a_table_keeps_its_basis(tmp_path: Path, spark) -> None:
    write_jsonl(tmp_path / "in" / "a.json", _events({1: [1, 2]}))
    lake = tmp_path / "lake"
    assert lakecdc.apply(tmp_path / "in", lake, format="ogg-json", sequence_by=["VER"], spark=spark).ok
    write_jsonl(tmp_path / "in" / "b.json", [ogg(T, "U", "02:00:00", 900, before={"ID": 1}, after={"ID": 1, "VER": 3})])
    with pytest.raises(ConfigError, match=r"sequence_by VER .*lakecdc\.sequenceBy.*no sequence_by"):
        lakecdc.apply(tmp_path / "in", lake, format="ogg-json", spark=spark)
    with pytest.raises(ConfigError, match="rebuild"):
        lakecdc.apply(tmp_path / "in", lake, format="ogg-json", sequence_by="VER,op_ts", spark=spark)
    assert lakecdc.apply(tmp_path / "in", lake, format="ogg-json", sequence_by="VER", spark=spark).ok
    assert [r["VER"] for r in rows(lake / T)] == [3]
    # a table built on the format's order refuses a sequence_by
    plain = tmp_path / "plain"
    assert lakecdc.apply(tmp_path / "in", plain, format="ogg-json", spark=spark).ok
    write_jsonl(tmp_path / "in" / "c.json", [ogg(T, "U", "03:00:00", 901, before={"ID": 1}, after={"ID": 1, "VER": 4})])
    with pytest.raises(ConfigError, match="format's default order"):
        lakecdc.apply(tmp_path / "in", plain, format="ogg-json", sequence_by=["VER"], spark=spark)


# -- property: any delivery order, the table equals the oracle ordered by VER --------------------

@st.composite
def _histories(draw: Any) -> list[tuple[str, int, dict | None, dict | None]]:
    """(op, VER, before, after) in true VER order, over keys 1..4 (VER increasing, with gaps)."""
    live: dict[int, dict] = {}
    out = []
    ver = draw(st.integers(-50, 50))
    for _ in range(draw(st.integers(1, 14))):
        ver += draw(st.integers(1, 40))
        k = draw(st.integers(1, 4))
        note = draw(st.sampled_from(["a", "b", None]))
        if k in live and draw(st.booleans()):
            if draw(st.booleans()):
                out.append(("D", ver, {"ID": k, "VER": ver}, None))
                del live[k]
                continue
            after = {"ID": k, "VER": ver, **({"NOTE": note} if draw(st.booleans()) else {})}
            out.append(("U", ver, {"ID": k}, after))
        else:
            after = {"ID": k, "VER": ver, "NOTE": note}
            out.append(("I", ver, None, after))
        live[k] = after
    return out


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(history=_histories(), seed=st.integers(0, 10**6), runs=st.integers(1, 2))
def test_property_any_delivery_order_equals_the_oracle(tmp_path_factory, spark, history, seed, runs) -> None:
    oracle = Oracle()
    # the oracle sees the true order (op_ts from VER); the files carry a shuffled op_ts/pos
    truth = [Event(T, op, f"2020-01-01 00:00:00.{ver + 100000:06d}", f"{i:020d}", before=b, after=a, keys=("ID",))
             for i, (op, ver, b, a) in enumerate(history)]
    oracle.apply_run(truth)
    order = list(range(len(history)))
    random.Random(seed).shuffle(order)
    msgs = []
    for n, i in enumerate(order):
        op, _, b, a = history[i]
        msgs.append(ogg(T, op, f"00:00:{n % 60:02d}", n + 1, before=b, after=a, keys=["ID"]))
    base = tmp_path_factory.mktemp("prop")
    cut = len(msgs) // runs
    for r in range(runs):
        part = msgs[r * cut:] if r == runs - 1 else msgs[r * cut:(r + 1) * cut]
        write_jsonl(base / "in" / f"{r}.json", part)
        s = lakecdc.apply(base / "in", base / "lake", format="ogg-json", sequence_by=["VER"], spark=spark)
        assert s.ok, s.render()
    want = sorted(({"ID": k[0], "VER": row["VER"], "NOTE": row.get("NOTE")} for k, row in oracle.table(T).items()),
                  key=lambda r: r["ID"])
    path = base / "lake" / T
    got = [{"ID": r["ID"], "VER": r["VER"], "NOTE": r.get("NOTE")} for r in rows(path, "ID")] if path.exists() else []
    assert got == want
    shutil.rmtree(base, ignore_errors=True)


def test_a_debezium_source_member_orders_the_table(tmp_path: Path, spark) -> None:
    # the README's example: Debezium's source map names its members "source.<name>"
    def line(op: str, scn: int, v: str) -> dict[str, Any]:
        source = {"version": "2.7.0.Final", "connector": "oracle", "name": "srv", "ts_ms": 1_700_000_000_000,
                  "snapshot": "false", "db": "D", "schema": "APP", "table": "T", "scn": str(scn),
                  "commit_scn": str(scn), "ssn": 0, "redo_thread": 1, "txId": "x"}
        return {"before": {"ID": 1} if op == "u" else None, "after": {"ID": 1, "V": v}, "source": source, "op": op,
                "ts_ms": 1_700_000_000_000 + scn}
    # delivered by op_ts: c (scn 10), u (scn 30), u (scn 20): by scn the 30 wins
    write_jsonl(tmp_path / "in" / "t.json", [line("c", 10, "a"), line("u", 30, "b"), line("u", 20, "c")])
    s = lakecdc.apply(tmp_path / "in", tmp_path / "lake", format="debezium-json", keys={"APP.T": ["ID"]},
                      sequence_by=["source.scn:int"], spark=spark)
    assert s.ok and s.table("APP.T").quarantined == 0, s.render()
    assert [r["V"] for r in rows(tmp_path / "lake" / "APP.T", "ID")] == ["b"]
