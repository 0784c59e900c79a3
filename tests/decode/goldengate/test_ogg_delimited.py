"""The GoldenGate delimited text decoder: seed 000's examples (13.2.2), options, bad records, round trip."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings

import lakecdc
from lakecdc.decode import DECODERS, get_decoder
from lakecdc.decode.files.reread import locate
from lakecdc.decode.goldengate.common import java_unescape
from lakecdc.decode.goldengate.delimited import parse_columns_option, regex_literal, split_pattern
from lakecdc.errors import ConfigError

try:
    from tests.helpers import rows as table_rows
    from tests.ogg_row_render import (
        key_change_scenario,
        render_delimited,
        run_row_scenario,
        write_json_schema,
    )
    from tests.test_property import scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows as table_rows  # type: ignore[no-redef]
    from ogg_row_render import (  # type: ignore[no-redef]
        key_change_scenario,
        render_delimited,
        run_row_scenario,
        write_json_schema,
    )
    from test_property import scenarios  # type: ignore[no-redef]

pytestmark = pytest.mark.spark

try:
    from tests.decode.helpers import decode
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from decode.helpers import decode  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "ogg-delimited"
SEED = FIX / "seed-13.2.2-pipe.txt"
TCUSTORD = ("CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID", "PRODUCT_PRICE", "PRODUCT_AMOUNT", "TRANSACTION_ID")
TCUSTORD_COLUMNS = "GG.TCUSTORD=" + ",".join(TCUSTORD)
TCUSTORD_KEYS = {"GG.TCUSTORD": ["CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID"]}


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
        out.append(" ".join([r["op"], r["table"], r["pos"] or "-", *imgs]))
    return out


SEED_I = ("I GG.TCUSTORD 00000000000000001444 after={CUST_CODE='WILL', ORDER_DATE='1994-09-30:15:33:00', "
          "ORDER_ID='144', PRODUCT_AMOUNT='3', PRODUCT_CODE='CAR', PRODUCT_PRICE='17520.00', TRANSACTION_ID='100'}")
SEED_U = ("U GG.TCUSTORD 00000000000000002891 after={CUST_CODE='BILL', ORDER_DATE='1995-12-31:15:00:00', "
          "ORDER_ID='765', PRODUCT_AMOUNT='3', PRODUCT_CODE='CAR', PRODUCT_PRICE='14000.00', TRANSACTION_ID='100'}")
# the delete leaves PRODUCT_PRICE, PRODUCT_AMOUNT and TRANSACTION_ID empty: missing, not NULL
SEED_D = ("D GG.TCUSTORD 00000000000000004338 before={CUST_CODE='DAVE', ORDER_DATE='1993-11-03:07:51:35', "
          "ORDER_ID='600', PRODUCT_CODE='PLANE'}")
SEED_T = "T GG.TCUSTORD 00000000000000004515"


def test_seed_examples_decode_as_the_seed_says(spark):
    """13.2.2.1-4 with the manual's '|' delimiter (its line wraps undone), names from a schema file."""
    rows = decode(spark, "ogg-delimited", SEED, fieldDelimiter="CDATA[|]", includeTokens="true", schemaDirectory=str(FIX / "dirdef"))
    assert render(rows) == [SEED_I, SEED_U, SEED_D, SEED_T]
    assert all(r["_error"] is None for r in rows)
    assert [str(r["op_ts"]) for r in rows] == ["2013-06-02 22:14:36", *["2013-06-02 22:14:41"] * 3]
    assert [r["source"]["current_ts"] for r in rows] == [
        "2015-09-18T13:23:01.612001", "2015-09-18T13:23:01.987000", "2015-09-18T13:23:02.000000",
        "2015-09-18T13:23:02.001000"]
    assert rows[0]["source"]["token.R"] == "AADPkvAAEAAEqL2AAA"
    assert {k: v for k, v in rows[2]["source"].items() if k.startswith("token.")} == {
        "token.L": "206080450", "token.6": "9.0.80330", "token.R": "AADPkvAAEAAEqLzAAC"}
    assert all(r["idx"] == 0 and r["txid"] is None and r["keys"] is None for r in rows)
    # row-modeled: the update carries no before image
    assert rows[1]["before"] is None
    # equal op_ts (one transaction): the trail position orders them
    assert [r["pos"] for r in sorted(rows, key=lambda r: r["seq"])] == [r["pos"] for r in rows]
    assert [r["_row"] for r in rows] == sorted(r["_row"] for r in rows)


def test_default_ascii_001_delimiter_and_the_columns_option(spark, tmp_path):
    """The same records with Hive's default delimiter; names from ``columns``; the seed's sample
    configuration spelling ``CDATA[\\u0001]`` (a Java escape) means the same delimiter."""
    f = tmp_path / "a.txt"
    f.write_text(SEED.read_text().replace("|", "\u0001"))
    default = decode(spark, "ogg-delimited", f, includeTokens="true", columns=TCUSTORD_COLUMNS)
    spelled = decode(spark, "ogg-delimited", f, includeTokens="true", columns=TCUSTORD_COLUMNS, fieldDelimiter="CDATA[\\u0001]",
                     lineDelimiter="CDATA[\\n]", missingValueRepresentation="CDATA[]", kevValuePairDelimiter="CDATA[,]")
    assert render(default) == render(spelled) == [SEED_I, SEED_U, SEED_D, SEED_T]


def test_column_names_in_records_null_and_missing(spark, tmp_path):
    f = tmp_path / "a.txt"
    f.write_text(
        "I;S.T;2020-01-01 00:00:00.000000;2020-01-01T00:00:00.000000;00000000000000000010;ID;1;NAME;NULL;CITY;\n"
        "U;S.T;2020-01-01 00:00:01.000000;2020-01-01T00:00:01.000000;00000000000000000020;ID;1;CITY;Oslo\n"
    )
    rows = decode(spark, "ogg-delimited", f, fieldDelimiter=";", includeColumnNames="true")
    assert render(rows) == [
        "I S.T 00000000000000000010 after={ID='1', NAME=None}",
        "U S.T 00000000000000000020 after={CITY='Oslo', ID='1'}",
    ]
    assert "NAME" in rows[0]["after"] and "CITY" not in rows[0]["after"]


def test_custom_line_delimiter_multichar_field_delimiter_and_representations(spark, tmp_path):
    """Records end with ``<EOR>``; one value holds a raw newline; fields are ``||``; NULL is
    ``\\N`` and missing ``?``. The staged records still point at their original lines."""
    f = tmp_path / "a.txt"
    recs = [
        "I||S.T||2020-01-01 00:00:00.000000||x||1||ID||1||NOTE||two\nlines||AMT||\\N",
        "U||S.T||2020-01-01 00:00:01.000000||x||2||ID||1||NOTE||?||AMT||5.50",
        "D||S.T||2020-01-01 00:00:02.000000||x||3||ID||1||NOTE||?",
    ]
    f.write_text("<EOR>\n".join(recs) + "<EOR>\n")
    rows = decode(spark, "ogg-delimited", f, fieldDelimiter="CDATA[||]", lineDelimiter="CDATA[<EOR>\\n]", includeColumnNames="true",
                  nullValueRepresentation="CDATA[\\\\N]", missingValueRepresentation="?")
    assert render(rows) == [
        "I S.T 1 after={AMT=None, ID='1', NOTE='two\\nlines'}",
        "U S.T 2 after={AMT='5.50', ID='1'}",
        "D S.T 3 before={ID='1'}",
    ]
    staged = rows[0]["_file"]
    assert {rank: line for rank, (line, _raw) in locate(staged, 0, {0, 1, 2}).items()} == {0: 1, 1: 3, 2: 4}
    assert locate(staged, 0, {0})[0][1] == json.dumps(recs[0])


def test_metadata_change_appends_columns_the_newest_schema_decides(spark, tmp_path):
    """13.2.7: after a column is added, records carry one more value. Both layouts are known from
    two schema versions; a record matching neither is quarantined with both counts."""
    old = write_json_schema(tmp_path / "dirdef" / "v1", "S.T", {"ID": "integer", "A": "string"})
    new = write_json_schema(tmp_path / "dirdef" / "v2", "S.T", {"ID": "integer", "A": "string", "B": "number"})
    os.utime(old, (1_600_000_000, 1_600_000_000))
    f = tmp_path / "a.txt"
    f.write_text(
        "I|S.T|2020-01-01 00:00:00.000000|x|1|1|a\n"
        "I|S.T|2020-01-01 00:00:01.000000|x|2|2|b|2.5\n"
        "I|S.T|2020-01-01 00:00:02.000000|x|3|3|c|3.5|extra\n"
    )
    dec = get_decoder("ogg-delimited", {"fieldDelimiter": "|", "schemaDirectory": str(tmp_path / "dirdef")})
    assert dec.layouts([]).by_count["S.T"] == {2: ("ID", "A"), 3: ("ID", "A", "B")}
    rows = decode(spark, "ogg-delimited", f, fieldDelimiter="|", schemaDirectory=str(tmp_path / "dirdef"))
    assert render(rows[:2]) == ["I S.T 1 after={A='a', ID='1'}", "I S.T 2 after={A='b', B='2.5', ID='2'}"]
    assert rows[2]["_error"] == (
        f"the record has 4 column value(s) but table 'S.T' has 2 or 3 column(s) (from schema files {old}, {new}); "
        "check fieldDelimiter and the include* options, or give the table's newer schema"
    )
    from pyspark.sql import types as T

    assert dec.column_types(spark, [], staging="") == {"S.T": {"ID": T.LongType(), "A": T.StringType(),
                                                               "B": T.DecimalType(38, 10)}}
    # the columns option can list older layouts too (older first)
    assert parse_columns_option("S.T=ID,A;S.T=ID,A,B; X.Y = K") == {"S.T": [("ID", "A"), ("ID", "A", "B")], "X.Y": [("K",)]}


def test_suppressed_metadata_fields(spark, tmp_path):
    """Without table, op_ts, current_ts and pos; then without the op type (every record an upsert)."""
    f = tmp_path / "a.txt"
    f.write_text("I|1|a\nD|1|\n")
    rows = decode(spark, "ogg-delimited", f, fieldDelimiter="|", includeTableName="false", table="S.T", includeOpTimestamp="false",
                  includeCurrentTimestamp="false", includePosition="false", columns="S.T=ID,A")
    assert render(rows) == ["I S.T - after={A='a', ID='1'}", "D S.T - before={ID='1'}"]
    assert rows[0]["op_ts"] is None and rows[0]["source"] == {"current_ts": None}
    g = tmp_path / "b.txt"
    g.write_text("S.T|2020-01-01 00:00:00.000000|x|7|1|a\n")
    (row,) = decode(spark, "ogg-delimited", g, fieldDelimiter="|", includeOpType="false", columns="S.T=ID,A")
    assert render([row]) == ["R S.T 7 after={A='a', ID='1'}"]


def _bad_cases():
    head = "I|S.T|2020-01-01 00:00:00.000000|x|5"
    return [
        ("Q|S.T|2020-01-01 00:00:00.000000|x|5|1|a", "unknown op_type 'Q' (expected one of I, U, D, T)"),
        ("I|S.T|yesterday|x|5|1|a", "op_ts is not a timestamp: 'yesterday'"),
        (f"{head}|1", "the record has 1 column value(s) but table 'S.T' has 2 column(s) (from option columns); "
                      "check fieldDelimiter and the include* options, or give the table's newer schema"),
        (f"{head}|1|a|b", "the record has 3 column value(s) but table 'S.T' has 2 column(s) (from option columns); "
                          "check fieldDelimiter and the include* options, or give the table's newer schema"),
        ("I|X.Y|2020-01-01 00:00:00.000000|x|5|1|a",
         "no column names known for table 'X.Y' (includeColumnNames=false): give the formatter's <table>.schema.json "
         "with schemaDirectory=DIR, or columns=X.Y=COL1,COL2,..."),
        ("I|S.T", "the record has 2 field(s), fewer than the 5 metadata fields the options include "
                  "(op_type, table, op_ts, current_ts, pos); check fieldDelimiter"),
        ("I||2020-01-01 00:00:00.000000|x|5|1|a", "table name missing or empty"),
    ]


@pytest.mark.parametrize(("line", "reason"), _bad_cases())
def test_bad_records_carry_a_reason(spark, tmp_path, line, reason):
    f = tmp_path / "a.txt"
    good = "I|S.T|2020-01-01 00:00:00.000000|x|4|0|z"
    f.write_text(good + "\n" + line + "\n")
    rows = decode(spark, "ogg-delimited", f, fieldDelimiter="|", columns="S.T=ID,A")
    assert rows[0]["_error"] is None
    assert rows[1]["_error"] == reason
    assert locate(str(f), 0, {1}) == {1: (2, line)}


def test_bad_tokens_and_column_name_pairs(spark, tmp_path):
    f = tmp_path / "a.txt"
    f.write_text(
        "I|S.T|2020-01-01 00:00:00.000000|x|1|R=a,R=b|ID|1\n"
        "I|S.T|2020-01-01 00:00:00.000000|x|2||ID|1|A\n"
        "I|S.T|2020-01-01 00:00:00.000000|x|3||ID|1|ID|2\n"
        "I|S.T|2020-01-01 00:00:00.000000|x|4||ID|1\n"
    )
    rows = decode(spark, "ogg-delimited", f, fieldDelimiter="|", includeTokens="true", includeColumnNames="true")
    assert [r["_error"] for r in rows] == [
        "token 'R' appears more than once in the tokens field",
        "3 fields follow the metadata, but with includeColumnNames=true names and values come in pairs; "
        "check fieldDelimiter and the include* options",
        "column 'ID' appears more than once",
        None,
    ]
    assert rows[3]["source"] == {"current_ts": "x"}


def test_apply_quarantines_bad_records_and_applies_the_rest(spark, tmp_path):
    """End to end: file, line, reason and raw text in the quarantine; good rows in the table,
    also for a staged file (custom line delimiter) whose bad record spans two lines."""
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    a = landing / "a.txt"
    a_lines = [
        "I|S.T|2020-01-01 00:00:01.000000|x|1|1|one",
        "I|S.T|2020-01-01 00:00:02.000000|x|2|2",
        "I|S.T|2020-01-01 00:00:03.000000|x|3|3|three",
        "X|S.T|2020-01-01 00:00:04.000000|x|4|4|four",
        "U|S.T|2020-01-01 00:00:05.000000|x|5|1|uno",
    ]
    a.write_text("\n".join(a_lines) + "\n")
    b = landing / "b.txt"
    b_recs = ["I|S.T|2020-01-01 00:00:06.000000|x|6|6|six", "I|S.T|2020-01-01 00:00:07.000000|x|7|7|se\nven|!"]
    b.write_text("#".join(b_recs) + "#")
    (tmp_path / "dirdef").mkdir()
    write_json_schema(tmp_path / "dirdef", "S.T", {"ID": "integer", "A": "string"})
    common = {"fieldDelimiter": "|", "schemaDirectory": str(tmp_path / "dirdef")}
    s1 = lakecdc.apply(a, target, format="ogg-delimited", keys={"S.T": ["ID"]}, options=common, spark=spark)
    s2 = lakecdc.apply(b, target, format="ogg-delimited", keys={"S.T": ["ID"]},
                       options={**common, "lineDelimiter": "#"}, spark=spark)
    assert (s1.table("S.T").quarantined, s2.table("S.T").quarantined) == (2, 1)
    assert table_rows(s2.table("S.T").target, "ID") == [{"ID": 1, "A": "uno"}, {"ID": 3, "A": "three"},
                                                         {"ID": 6, "A": "six"}]
    q = sorted(pa.table(DeltaTable(s2.quarantine).to_pyarrow_table()).to_pylist(), key=lambda r: (r["file"], r["line"]))
    expect_counts = "but table 'S.T' has 2 column(s) (from schema file {}); check fieldDelimiter and the include* options, or give the table's newer schema"
    schema_path = str(tmp_path / "dirdef" / "S.T.schema.json")
    assert [(r["file"], r["line"], r["source_table"], r["reason"], r["raw"]) for r in q] == [
        (str(a.resolve()), 2, "S.T", "the record has 1 column value(s) " + expect_counts.format(schema_path), a_lines[1]),
        (str(a.resolve()), 4, "S.T", "unknown op_type 'X' (expected one of I, U, D, T)", a_lines[3]),
        (str(b.resolve()), 1, "S.T", "the record has 3 column value(s) " + expect_counts.format(schema_path),
         json.dumps(b_recs[1])),
    ]


def test_schema_files_in_the_landing_directory_name_the_columns_in_every_run(spark, tmp_path):
    """GoldenGate writes ``<table>.schema.json`` beside its data files: the first run's inputs hold
    it, a later run's do not (already applied), and both runs find the column names. A table whose
    every record was quarantined still has its line in the summary."""
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    write_json_schema(landing, "S.T", {"ID": "integer", "A": "string"})
    # (S.U has no schema: its one record is quarantined, and the summary still names S.U)
    (landing / "a.txt").write_text("I|S.T|2020-01-01 00:00:01.000000|x|1|1|one\nI|S.U|2020-01-01 00:00:01.000000|x|2|1|u\n")
    opts = {"fieldDelimiter": "|"}
    s1 = lakecdc.apply(landing, target, format="ogg-delimited", keys={"S.T": ["ID"]}, options=opts, spark=spark)
    (landing / "b.txt").write_text("U|S.T|2020-01-01 00:00:02.000000|x|2|1|uno\nI|S.T|2020-01-01 00:00:03.000000|x|3|2|two\n")
    s2 = lakecdc.apply(landing, target, format="ogg-delimited", keys={"S.T": ["ID"]}, options=opts, spark=spark)
    assert (s1.table("S.T").quarantined, s2.table("S.T").quarantined, s2.table("S.T").events) == (0, 0, 2)
    assert (s1.table("S.U").events, s1.table("S.U").quarantined, s1.quarantined_unrouted) == (0, 1, 0)
    assert table_rows(s2.table("S.T").target, "ID") == [{"ID": 1, "A": "uno"}, {"ID": 2, "A": "two"}]


def test_options_are_checked():
    with pytest.raises(ConfigError, match="unknown option.*includeColumnName\\b.*known: .*includeColumnNames"):
        get_decoder("ogg-delimited", {"includeColumnName": "true"})
    with pytest.raises(ConfigError, match="NULL and missing could not be told apart"):
        get_decoder("ogg-delimited", {"nullValueRepresentation": "CDATA[]"})
    with pytest.raises(ConfigError, match="includeTableName=false.*table=SCHEMA.TABLE"):
        get_decoder("ogg-delimited", {"includeTableName": "false"})
    with pytest.raises(ConfigError, match="pkUpdateHandling='skip' is not one of abend, update, delete-insert"):
        get_decoder("ogg-delimited", {"pkUpdateHandling": "skip"})
    with pytest.raises(ConfigError, match="columns entry 'S.T'"):
        get_decoder("ogg-delimited", {"columns": "S.T"})
    with pytest.raises(ConfigError, match="unknown encoding"):
        get_decoder("ogg-delimited", {"encoding": "EBCDIC-XYZ"})
    with pytest.raises(ConfigError, match="schemaDirectory '/nonexistent' is not a directory"):
        get_decoder("ogg-delimited", {"schemaDirectory": "/nonexistent"}).layouts([])
    for mode in ("abend", "update", "delete-insert"):
        get_decoder("ogg-delimited", {"pkUpdateHandling": mode, "iso8601Format": "false", "encoding": "ISO-8859-1"})
    assert "ogg-delimited" in DECODERS


def test_escapes_and_regex_quoting():
    assert java_unescape("\\u0001") == "\u0001" and java_unescape("a\\tb\\\\n") == "a\tb\\n"
    assert regex_literal("a|.") == "a\\x{7c}\\x{2e}"


@pytest.mark.spark
def test_split_patterns_split_as_python_does(spark):
    """One-character delimiters go to Spark's split in the form Java splits without a regular
    expression; every delimiter splits exactly as str.split."""
    from pyspark.sql import functions as F

    assert split_pattern("\x01") == "\x01" and split_pattern("|") == "\\|" and split_pattern("ab") == "ab"
    text = "a|b.c\\d$e\x01f^g*hé,i||j"
    delimiters = ["|", ".", "\\", "$", "\x01", "^", "*", "é", ",", "||", "b.c", "𝄞", "a"]
    df = spark.createDataFrame([(text,)], "v string")
    got = df.select(*[F.split("v", split_pattern(d), -1).alias(f"c{i}") for i, d in enumerate(delimiters)]).first()
    assert [list(got[i]) for i in range(len(delimiters))] == [text.split(d) for d in delimiters]


def test_non_utf8_encoding_is_staged(spark, tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes("I|S.T|2020-01-01 00:00:00.000000|x|1|1|Zürich\n".encode("latin-1"))
    (row,) = decode(spark, "ogg-delimited", f, fieldDelimiter="|", columns="S.T=ID,A", encoding="ISO-8859-1")
    assert row["after"] == {"ID": "1", "A": "Zürich"}


# -- round trip: oracle histories rendered as delimited text ---------------------------------------

ROUND_TRIP_CONFIGS = (
    # (decoder options, renderer arguments, formatter's pkUpdateHandling)
    ({}, {}, "delete-insert"),
    ({"fieldDelimiter": "CDATA[||]", "includeColumnNames": "true", "includeTokens": "true"},
     {"field_delimiter": "||", "include_column_names": True, "tokens": {"R": "AADPkvAAEAAEqL2AAA", "L": "1"}},
     "delete-insert"),
    ({"lineDelimiter": "CDATA[#\\n]", "nullValueRepresentation": "CDATA[<NULL>]"},
     {"line_delimiter": "#\n", "null_rep": "<NULL>"}, "update"),
    # values holding the delimiters' characters, where the format allows it (SPELLINGS)
    ({"fieldDelimiter": "CDATA[||]", "lineDelimiter": "CDATA[#\\n]"},
     {"field_delimiter": "||", "line_delimiter": "#\n"}, "delete-insert"),
)
#: Delimited text has no quoting: a value may hold a delimiter's characters but never the whole
#: delimiter, nor end with a prefix of it. Spelled this way, strings hold '|' (not '||', never
#: last), '#' (never before a newline) and raw newlines: "ab a" -> "|a#b\n|a".
SPELLINGS = {3: str.maketrans({"a": "|a", "b": "#b", " ": "\n"})}


def spelled(sc, table):
    """``sc`` with every string value translated by ``table``."""
    import dataclasses

    def image(img):
        return None if img is None else {k: v.translate(table) if isinstance(v, str) else v for k, v in img.items()}

    return dataclasses.replace(sc, events=[dataclasses.replace(e, before=image(e.before), after=image(e.after))
                                           for e in sc.events])


def _run_delimited(spark, workdir, sc, config):
    options, render_args, handling = ROUND_TRIP_CONFIGS[config]
    if config in SPELLINGS:
        sc = spelled(sc, SPELLINGS[config])
    columns = {}
    for spec in sc.specs:
        kinds = {k: ("integer" if k == "ID" else "string") for k in spec.keys}
        kinds.update({c: ("integer" if kind == "int" else "string") for c, kind in spec.columns.items()})
        write_json_schema(workdir / "dirdef", spec.name, kinds)
        columns[spec.name] = list(kinds)
    # '<M>' for missing: the histories' strings include '' (the default missing representation)
    opts = {"schemaDirectory": str(workdir / "dirdef"), "missingValueRepresentation": "CDATA[<M>]", **options}

    def render(events):
        return render_delimited(events, columns, missing_rep="<M>", **render_args)

    run_row_scenario(spark, sc, workdir, fmt="ogg-delimited", render=render, options=opts,
                     pk_update_handling=handling, declared=columns)


@pytest.mark.parametrize("config", range(len(ROUND_TRIP_CONFIGS)))
@settings(max_examples=int(os.environ.get("LAKECDC_ROW_EXAMPLES", "2")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=12))
def test_round_trip_matches_the_oracle(spark, tmp_path_factory, config, sc):
    """Histories rendered as delimited text (positional or named, four delimiter setups, one with
    values holding delimiter characters), with the tables' JSON schemas for names and types,
    applied run by run: the oracle's tables."""
    _run_delimited(spark, tmp_path_factory.mktemp("delimited"), sc, config)


@pytest.mark.parametrize("config", [0, 2, 3])
def test_key_changes_round_trip(spark, tmp_path, config):
    """Primary-key updates as the formatter's delete + insert (config 0) or as plain updates of
    the new key (config 2, ``pkUpdateHandling=update``: the old row stays, as GoldenGate warns);
    config 3: values holding '|', '#' and newlines between '||' fields and '#\\n' records."""
    _run_delimited(spark, tmp_path, key_change_scenario(), config)


def test_renderer_writes_the_seed_delete():
    try:
        from tests.oracle import Event
    except ModuleNotFoundError:
        from oracle import Event  # type: ignore[no-redef]
    ev = Event("GG.TCUSTORD", "D", "2013-06-02 22:14:41.000000", "00000000000000004338",
               before={"CUST_CODE": "DAVE", "ORDER_DATE": "1993-11-03:07:51:35", "PRODUCT_CODE": "PLANE", "ORDER_ID": 600})
    text = render_delimited([ev], {"GG.TCUSTORD": list(TCUSTORD)}, field_delimiter="|",
                            tokens={"L": "206080450", "6": "9.0.80330", "R": "AADPkvAAEAAEqLzAAC"})
    fields = text.rstrip("\n").split("|")
    seed = SEED.read_text().splitlines()[2].split("|")
    assert fields[:3] + fields[4:] == seed[:3] + seed[4:]
    assert datetime.fromisoformat(fields[3])
