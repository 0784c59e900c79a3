"""The GoldenGate JSON row-modeled decoder: seed 000's examples (13.3.4.3), schemas, bad records, round trip."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from pyspark.sql import types as T

import lakecdc
from lakecdc.decode import DECODERS, get_decoder
from lakecdc.decode.files import staging as file_staging
from lakecdc.decode.files.reread import locate
from lakecdc.decode.goldengate.schemas import json_schema_type, read_table_schema
from lakecdc.errors import ConfigError

try:
    from tests.helpers import rows as table_rows
    from tests.ogg_row_render import key_change_scenario, render_json_row, run_row_scenario
    from tests.test_property import scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows as table_rows  # type: ignore[no-redef]
    from ogg_row_render import key_change_scenario, render_json_row, run_row_scenario  # type: ignore[no-redef]
    from test_property import scenarios  # type: ignore[no-redef]

pytestmark = pytest.mark.spark

try:
    from tests.decode.helpers import decode
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from decode.helpers import decode  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "ogg-json-row"


def render(rows) -> list[str]:
    """Events as compact text: ``OP table pos before={...} after={...}`` (missing = absent)."""
    out = []
    for r in rows:
        imgs = []
        for name in ("before", "after"):
            img = r[name]
            if img is not None:
                body = ", ".join(f"{k}={img[k]!r}" for k in sorted(img))
                imgs.append(f"{name}={{{body}}}")
        out.append(" ".join([r["op"], r["table"], r["pos"], *imgs]))
    return out


ROW_I = ("I QASOURCE.TCUSTORD 00000000000000002928 after={CUST_CODE='WILL', ORDER_DATE='1994-09-30:15:33:00', "
         "ORDER_ID='144', PRODUCT_AMOUNT='3', PRODUCT_CODE='CAR', PRODUCT_PRICE='17520.00', TRANSACTION_ID='100'}")
# the row-modeled update carries only its after image, which leaves PRODUCT_AMOUNT and TRANSACTION_ID out
ROW_U = ("U QASOURCE.TCUSTORD 00000000000000004300 after={CUST_CODE='BILL', ORDER_DATE='1995-12-31:15:00:00', "
         "ORDER_ID='765', PRODUCT_CODE='CAR', PRODUCT_PRICE='14000.00'}")
ROW_D = ("D QASOURCE.TCUSTORD 00000000000000005272 before={CUST_CODE='DAVE', ORDER_DATE='1993-11-03:07:51:35', "
         "ORDER_ID='600', PRODUCT_AMOUNT='2', PRODUCT_CODE='PLANE', PRODUCT_PRICE='135000.00', TRANSACTION_ID='200'}")
ROW_T = "T QASOURCE.TCUSTORD 00000000000000005480"


def test_seed_row_modeled_examples_decode_as_the_seed_says(spark, tmp_path):
    """13.3.4.3 as printed: pretty-printed, concatenated, the truncate with a trailing comma."""
    rows = decode(spark, "ogg-json-row", FIX / "seed-13.3.4.3-row.json")
    # numbers keep the digits written, trailing zeros too (17520.00)
    assert render(rows) == [ROW_I, ROW_U, ROW_D, ROW_T]
    assert all(r["_error"] is None for r in rows)
    assert "PRODUCT_AMOUNT" not in rows[1]["after"] and rows[1]["before"] is None
    assert [str(r["op_ts"]) for r in rows] == ["2015-11-05 18:45:36", *["2015-11-05 18:45:39"] * 3]
    assert [r["source"] for r in rows] == [
        {"current_ts": ts} for ts in ("2016-10-05T11:10:42.294000", "2016-10-05T11:10:42.350005",
                                      "2016-10-05T11:10:42.351002", "2016-10-05T11:10:42.351003")]
    assert all(r["idx"] == 0 and r["txid"] is None and r["keys"] is None for r in rows)
    assert [r["pos"] for r in sorted(rows, key=lambda r: r["seq"])] == [r["pos"] for r in rows]
    staged = rows[0]["_file"]
    assert {rank: line for rank, (line, _raw) in locate(staged, 0, {0, 1, 2, 3}).items()} == {0: 1, 1: 15, 2: 27, 3: 41}


def test_seed_primary_keys_example_as_a_row_message_applies_without_configured_keys(spark, tmp_path):
    """13.3.4.4's message (printed op-modeled in the seed) written row-modeled: primary_keys are
    the table's keys, so no --key is needed."""
    path = FIX / "seed-13.3.4.4-primary-keys-row.json"
    (row,) = decode(spark, "ogg-json-row", path)
    assert row["keys"] == ["CUST_CODE"]
    assert render([row]) == ["I DDL_OGGSRC.TCUSTMER 00000000000000006605 after={CITY='SEATTLE', CUST_CODE='WILL', "
                             "NAME='BG SOFTWARE CO.', STATE='WA'}"]
    s = lakecdc.apply(path, tmp_path / "lake", format="ogg-json-row", spark=spark)
    assert table_rows(s.table("DDL_OGGSRC.TCUSTMER").target) == [
        {"CUST_CODE": "WILL", "NAME": "BG SOFTWARE CO.", "CITY": "SEATTLE", "STATE": "WA"}]


def test_an_op_modeled_message_is_refused_with_a_hint(spark, tmp_path):
    (row,) = decode(spark, "ogg-json-row", FIX / "seed-13.3.4.4-op-modeled.json")
    assert row["_error"] == "member 'after' is an object: this is op-modeled JSON (format=json); read it with format ogg-json"


def test_column_types_from_the_seeds_json_schema(spark):
    dec = get_decoder("ogg-json-row", {"schemaDirectory": str(FIX / "dirdef")})
    assert dec.column_types(spark, [], staging="") == {"QASOURCE.TCUSTORD": {
        "CUST_CODE": T.StringType(), "ORDER_DATE": T.StringType(), "PRODUCT_CODE": T.StringType(),
        "ORDER_ID": T.DecimalType(38, 10), "PRODUCT_PRICE": T.DecimalType(38, 10), "PRODUCT_AMOUNT": T.LongType(),
        "TRANSACTION_ID": T.DecimalType(38, 10)}}
    schema = read_table_schema(str(FIX / "dirdef" / "QASOURCE.TCUSTORD.schema.json"))
    assert schema.columns == ("CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID", "PRODUCT_PRICE",
                              "PRODUCT_AMOUNT", "TRANSACTION_ID")
    assert json_schema_type({"oneOf": [{"type": "null"}, {"type": "integer"}]}) == T.LongType()
    assert json_schema_type({"anyOf": [{"type": "integer"}, {"type": "number"}]}) == T.DecimalType(38, 10)
    assert json_schema_type({"type": "boolean"}) == T.BooleanType()
    assert json_schema_type({"type": ["object", "null"]}) == T.StringType()
    assert json_schema_type({"type": "null"}) is None


def test_seed_examples_apply_typed_by_the_schema(spark, tmp_path):
    """End to end with the seed's schema: PRODUCT_PRICE is decimal(38,10), so 17520.00 is exact;
    the update leaves the columns its after image lacks as they were."""
    from decimal import Decimal

    from lakecdc.decode.files.staging import split_documents

    docs = [doc for _line, doc in split_documents((FIX / "seed-13.3.4.3-row.json").read_text())]
    bill = {"table": "QASOURCE.TCUSTORD", "op_type": "I", "op_ts": "2015-11-05 18:45:30.000000", "pos": "1",
            "CUST_CODE": "BILL", "ORDER_DATE": "1995-12-31:15:00:00", "PRODUCT_CODE": "CAR", "ORDER_ID": 765,
            "PRODUCT_PRICE": 15000.00, "PRODUCT_AMOUNT": 3, "TRANSACTION_ID": 100}
    f = tmp_path / "landing" / "a.json"
    f.parent.mkdir()
    f.write_text("".join(line.replace("\n", " ") + "\n" for line in [json.dumps(bill), *docs[:2]]))
    s = lakecdc.apply(f, tmp_path / "lake", format="ogg-json-row",
                      keys={"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID"]},
                      options={"schemaDirectory": str(FIX / "dirdef")}, spark=spark)
    t = s.table("QASOURCE.TCUSTORD")
    assert (t.events, t.inserted, t.quarantined) == (3, 2, 0)
    fields = {f.name: f.type.type for f in DeltaTable(t.target).schema().fields}
    assert (fields["PRODUCT_PRICE"], fields["PRODUCT_AMOUNT"], fields["ORDER_DATE"]) == ("decimal(38,10)", "long", "string")
    got = {r["CUST_CODE"]: r for r in table_rows(t.target)}
    assert got["WILL"]["PRODUCT_PRICE"] == Decimal("17520.0000000000") and got["WILL"]["PRODUCT_AMOUNT"] == 3
    assert (got["BILL"]["PRODUCT_PRICE"], got["BILL"]["PRODUCT_AMOUNT"]) == (Decimal("14000"), 3)


def test_null_missing_tokens_and_custom_op_keys(spark, tmp_path):
    f = tmp_path / "a.json"
    msgs = [
        {"table": "S.T", "op_type": "INS", "op_ts": "2020-01-01 00:00:00.000000", "pos": "1",
         "tokens": {"R": "AADPkvAAEAAEqL2AAA"}, "ID": 1, "NAME": None, "AMT": "<AMT>"},
        {"table": "S.T", "op_type": "UPD", "op_ts": "2020-01-01 00:00:01.000000", "pos": "2", "ID": 1, "V": "b"},
        {"table": "S.T", "op_type": "DEL", "op_ts": "2020-01-01 00:00:02.000000", "pos": "3", "ID": 1},
        {"table": "S.T", "op_type": "TRUNC", "op_ts": "2020-01-01 00:00:03.000000", "pos": "4"},
    ]
    f.write_text("\n".join(json.dumps(m) for m in msgs).replace('"<AMT>"', "12345678901234567890.50") + "\n")
    rows = decode(spark, "ogg-json-row", f, insertOpKey="INS", updateOpKey="UPD", deleteOpKey="DEL", truncateOpKey="TRUNC",
                  includeTokens="true", flatten="false")
    assert render(rows) == [
        "I S.T 1 after={AMT='12345678901234567890.50', ID='1', NAME=None}",  # exact, trailing zero too
        "U S.T 2 after={ID='1', V='b'}",
        "D S.T 3 before={ID='1'}",
        "T S.T 4",
    ]
    assert rows[0]["source"]["token.R"] == "AADPkvAAEAAEqL2AAA"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"table":"S.T","op_type":"I"', "not valid JSON (expected one object per message)"),
        ('{"table":"S.T","op_type":"I","op_ts":"2020-01-01 00:00:00","pos":"1","ID":1,"ID":2}',
         "member 'ID' appears more than once"),
        ('{"op_type":"I","op_ts":"2020-01-01 00:00:00","pos":"1","ID":1}', "'table' missing or empty"),
        ('{"table":"S.T","op_ts":"2020-01-01 00:00:00","pos":"1","ID":1}', "'op_type' missing"),
        ('{"table":"S.T","op_type":"X","op_ts":"2020-01-01 00:00:00","pos":"1","ID":1}',
         "unknown op_type 'X' (expected one of I, U, D, T)"),
        ('{"table":"S.T","op_type":"I","op_ts":"yesterday","pos":"1","ID":1}',
         "'op_ts' missing or not a timestamp: 'yesterday'"),
        ('{"table":"S.T","op_type":"D","op_ts":"2020-01-01 00:00:00","pos":"1"}',
         "no column members for op_type 'D' (a row-modeled message carries the columns at the top level)"),
    ],
)
def test_bad_records_carry_a_reason_and_their_raw_text(spark, tmp_path, line, reason):
    f = tmp_path / "a.json"
    good = '{"table":"S.T","op_type":"I","op_ts":"2020-01-01 00:00:00","pos":"0","ID":0}'
    f.write_text(good + "\n" + line + "\n")
    rows = decode(spark, "ogg-json-row", f)
    assert rows[0]["_error"] is None
    assert rows[1]["_error"] == reason
    assert locate(str(f), 0, {1}) == {1: (2, line)}


def test_apply_quarantines_bad_records_and_applies_the_rest(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    lines = [
        '{"table":"S.T","op_type":"I","op_ts":"2020-01-01 00:00:01","pos":"1","primary_keys":["ID"],"ID":1,"N":10}',
        '{"table":"S.T","op_type":"Q","op_ts":"2020-01-01 00:00:02","pos":"2","primary_keys":["ID"],"ID":2,"N":20}',
        '{"table":"S.T","op_type":"I","op_ts":"2020-01-01 00:00:03","pos":"3","primary_keys":["ID"],"ID":3,"N":"x"}',
        '{"table":"S.T","op_type":"I","op_ts":"2020-01-01 00:00:04","pos":"4","primary_keys":["ID"],"ID":4,"N":40}',
        "not json",
    ]
    f = landing / "a.json"
    f.write_text("\n".join(lines) + "\n")
    # the schema among the inputs: used as a schema (N is an integer), not read as data
    (landing / "S.T.schema.json").write_text(json.dumps(
        {"title": "S.T", "properties": {"table": {"type": "string"}, "ID": {"type": "integer"},
                                        "N": {"type": ["integer", "null"]}}}))
    s = lakecdc.apply(landing, target, format="ogg-json-row", spark=spark)
    t = s.table("S.T")
    assert (t.inserted, t.quarantined, s.quarantined_unrouted) == (2, 2, 1)
    assert table_rows(t.target, "ID") == [{"ID": 1, "N": 10}, {"ID": 4, "N": 40}]
    q = sorted(pa.table(DeltaTable(s.quarantine).to_pyarrow_table()).to_pylist(), key=lambda r: r["line"])
    assert [(r["file"], r["line"], r["source_table"], r["reason"], r["raw"]) for r in q] == [
        (str(f.resolve()), 2, "S.T", "unknown op_type 'Q' (expected one of I, U, D, T)", lines[1]),
        (str(f.resolve()), 3, "S.T", "column 'N': after value 'x' does not fit type bigint", lines[2]),
        (str(f.resolve()), 5, None, "not valid JSON (expected one object per message)", lines[4]),
    ]


def test_a_staging_cut_short_leaves_the_earlier_copy_whole(tmp_path, monkeypatch):
    """A staged copy is written aside and moved over the old one once whole: a staging that fails
    half-way (or a second one running at the same time) never leaves a part of a copy behind."""

    src, staging = tmp_path / "in.json", tmp_path / "staging"
    src.write_text("".join(f'{{"table":"S.T","n":{i}}}\n' for i in range(50)))
    out = Path(file_staging.stage_wrapped_lines(str(src), str(staging), wrap="m"))
    before = out.read_bytes()
    assert before.count(b"\n") == 50 and before.startswith(b'{"m":{"table":"S.T","n":0}}\n')

    class Failing:  # the second chunk's test fails, as a full disk would
        calls = 0

        def match(self, _body: bytes) -> None:
            Failing.calls += 1
            if Failing.calls > 1:
                raise OSError("no space left on device")

    src.write_text(src.read_text() + '{"table":"S.T","n":50}\n')
    monkeypatch.setattr(file_staging, "_CHUNK_BYTES", 64)
    monkeypatch.setattr(file_staging, "_BLANK_START", Failing())
    with pytest.raises(OSError, match="no space"):
        file_staging.stage_wrapped_lines(str(src), str(staging), wrap="m")
    assert out.read_bytes() == before
    assert sorted(p.name for p in staging.iterdir()) == [out.name, f"{out.name}.lines.json"]


@pytest.mark.parametrize("chunk", [1 << 24, 7])
def test_wrapped_staging_keeps_every_line_where_it_was(tmp_path, monkeypatch, chunk):
    """Each record staged as {"m":<record>} on its own line number: blank and whitespace-only lines
    stay blank (Spark skips them), a BOM is dropped, a carriage return ending a line stays after
    the wrapper (Spark's line reader ends a line at a CR followed by anything), the last line may
    lack its newline; chunks are cut at line ends whatever their size."""
    monkeypatch.setattr(file_staging, "_CHUNK_BYTES", chunk)
    src = tmp_path / "a.json"
    lines = [b'{"a":1}\r', b"", b"  \t", b'{"b":"x,y"}', b"\r", b'{"c":[1, 2]}', b'{"d":{}}']
    src.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines))  # no final newline
    staged = Path(file_staging._stage(str(src), str(tmp_path / "s"), wrap="m"))
    got = staged.read_bytes().split(b"\n")
    assert got == [b'{"m":{"a":1}}\r', b"", b"  \t", b'{"m":{"b":"x,y"}}', b"\r", b'{"m":{"c":[1, 2]}}', b'{"m":{"d":{}}}']
    # a record located in the staged copy is reported with its own text and line
    assert locate(str(staged), 0, {0, 1, 3}) == {0: (1, '{"a":1}'), 1: (4, '{"b":"x,y"}'), 3: (7, '{"d":{}}')}


def test_a_staged_copy_is_taken_again_until_its_file_changes(spark, tmp_path):
    src, staging = tmp_path / "a.json", str(tmp_path / "s")
    src.write_bytes(b'{"a":1}\n')
    (staged,) = file_staging.staged_documents(spark, [str(src)], staging, wrap="m")
    before = Path(staged).stat().st_mtime_ns
    assert file_staging.staged_documents(spark, [str(src)], staging, wrap="m") == [staged]
    assert Path(staged).stat().st_mtime_ns == before
    src.write_bytes(b'{"e":5}\n')
    assert Path(file_staging.staged_documents(spark, [str(src)], staging, wrap="m")[0]).read_bytes() == b'{"m":{"e":5}}\n'


def test_files_are_staged_in_a_task_each(spark):
    """One partition per file, whatever adaptive execution does with small shuffles (it once
    coalesced them all into one task, which staged every file in turn)."""
    def where(path: str) -> str:
        from pyspark import TaskContext

        return f"{path}@{TaskContext.get().partitionId()}"

    got = file_staging.on_executors(spark, where, ["a", "b", "c", "d"])
    assert [g.split("@")[0] for g in got] == ["a", "b", "c", "d"]
    assert len({g.split("@")[1] for g in got}) == 4


def test_primary_keys_are_read_as_json_whatever_their_spelling(spark):
    from pyspark.sql import functions as F

    from lakecdc.decode.goldengate.json_row import _names

    texts = ['["ID"]', '["ID","CODE"]', "[]", '[ "ID" ]', '["A,B"]', '["A\\"B"]', '["A","B,C"]', '[""]',
             '["",""]', '["A B"]', '["ID",1]', '"ID"', "x", None]
    got = spark.createDataFrame([(t,) for t in texts], "t string").select(_names(F.col("t")).alias("n")).collect()
    want = [json.loads(t) if t and t.startswith("[") else None for t in texts]
    assert [r["n"] for r in got] == [[str(x) for x in w] if w is not None else None for w in want]


def test_options_are_checked():
    with pytest.raises(ConfigError, match="unknown option.*schemaDir\\b.*known: .*schemaDirectory"):
        get_decoder("ogg-json-row", {"schemaDir": "x"})
    with pytest.raises(ConfigError, match="pkUpdateHandling='delete' is not one of abend, update, delete-insert"):
        get_decoder("ogg-json-row", {"pkUpdateHandling": "delete"})
    with pytest.raises(ConfigError, match="encoding 'UTF-16' is not supported"):
        get_decoder("ogg-json-row", {"encoding": "UTF-16"})
    with pytest.raises(ConfigError, match="must differ"):
        get_decoder("ogg-json-row", {"insertOpKey": "U"})
    with pytest.raises(ConfigError, match="schemaFile '/nonexistent.schema.json' does not exist"):
        get_decoder("ogg-json-row", {"schemaFile": "/nonexistent.schema.json"}).column_types(None, [], staging="")
    assert get_decoder("ogg-json-row", {"treatAllColumnsAsStrings": "true", "prettyPrint": "true"}).all_strings
    assert "ogg-json-row" in DECODERS


# -- round trip: oracle histories rendered as json_row ---------------------------------------------


@settings(max_examples=int(os.environ.get("LAKECDC_ROW_EXAMPLES", "2")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=12))
def test_round_trip_matches_the_oracle(spark, tmp_path_factory, sc):
    """Histories rendered as json_row (a key change as the formatter's delete + insert), types
    inferred from the JSON values, applied run by run: the oracle's tables and counts."""
    workdir = tmp_path_factory.mktemp("jsonrow")

    def render(events):
        return render_json_row(events, primary_keys=sc.primary_keys)

    run_row_scenario(spark, sc, workdir, fmt="ogg-json-row", render=render, suffix=".json")


def test_key_changes_round_trip(spark, tmp_path):
    """A fixed history with primary-key updates (rendered as the formatter's delete + insert),
    a chain of them, partial images, a truncate and replays."""
    sc = key_change_scenario()

    def render(events):
        return render_json_row(events, primary_keys=True)

    run_row_scenario(spark, sc, tmp_path, fmt="ogg-json-row", render=render, suffix=".json")
