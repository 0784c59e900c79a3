"""The GoldenGate JSON op-modeled decoder: seed 000's own examples, options, bad records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lakecdc.decode import DECODERS, get_decoder
from lakecdc.decode.files.reread import locate
from lakecdc.decode.files.staging import split_documents
from lakecdc.errors import ConfigError, UnknownFormatError

pytestmark = pytest.mark.spark

try:
    from tests.decode.helpers import decode
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from decode.helpers import decode  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "ogg-json"


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


TCUSTORD_I = (
    "I QASOURCE.TCUSTORD 00000000000000002928 after={CUST_CODE='WILL', ORDER_DATE='1994-09-30:15:33:00', "
    "ORDER_ID='144', PRODUCT_AMOUNT='3', PRODUCT_CODE='CAR', PRODUCT_PRICE='17520.00', TRANSACTION_ID='100'}"
)
TCUSTORD_U = (
    "U QASOURCE.TCUSTORD 00000000000000004300 before={CUST_CODE='BILL', ORDER_DATE='1995-12-31:15:00:00', "
    "ORDER_ID='765', PRODUCT_AMOUNT='3', PRODUCT_CODE='CAR', PRODUCT_PRICE='15000.00', TRANSACTION_ID='100'} "
    "after={CUST_CODE='BILL', ORDER_DATE='1995-12-31:15:00:00', ORDER_ID='765', PRODUCT_CODE='CAR', "
    "PRODUCT_PRICE='14000.00'}"
)
TCUSTORD_D = (
    "D QASOURCE.TCUSTORD 00000000000000005272 before={CUST_CODE='DAVE', ORDER_DATE='1993-11-03:07:51:35', "
    "ORDER_ID='600', PRODUCT_AMOUNT='2', PRODUCT_CODE='PLANE', PRODUCT_PRICE='135000.00', TRANSACTION_ID='200'}"
)


def test_seed_op_modeled_examples_decode_as_the_seed_says(spark):
    rows = decode(spark, "ogg-json", FIX / "seed-13.3.4.1-op.json")
    assert render(rows) == [TCUSTORD_I, TCUSTORD_U, TCUSTORD_D, "T QASOURCE.TCUSTORD 00000000000000005480"]
    assert all(r["_error"] is None for r in rows)
    # the update's after image leaves PRODUCT_AMOUNT and TRANSACTION_ID out: missing, not NULL
    assert "PRODUCT_AMOUNT" not in rows[1]["after"] and "TRANSACTION_ID" not in rows[1]["after"]
    assert str(rows[0]["op_ts"]) == "2015-11-05 18:45:36"
    assert rows[0]["source"]["current_ts"] == "2016-10-05T10:15:51.267000"
    staged = rows[0]["_file"]
    assert {rank: line for rank, (line, _raw) in locate(staged, 0, {0, 1, 2, 3}).items()} == {0: 1, 1: 19, 2: 44, 3: 62}


def test_seed_flattened_examples_decode_like_the_nested_ones(spark):
    rows = decode(spark, "ogg-json", FIX / "seed-13.3.4.2-flattened.json", flatten="true")
    jane = (
        "D QASOURCE.TCUSTORD 00000000000000005480 before={CUST_CODE='JANE', ORDER_DATE='1995-11-11:13:52:00', "
        "ORDER_ID='256', PRODUCT_AMOUNT='1', PRODUCT_CODE='PLANE', PRODUCT_PRICE='133300.00', TRANSACTION_ID='100'}"
    )
    # the manual's "truncate" example of the flattened format is in fact a delete of JANE.
    # Flattened messages are parsed through variants: numbers keep their value, not their
    # trailing zeros (17520.00 reads 17520), which typing to decimal(38,2) restores.
    def numeric(text: str) -> str:
        return re.sub(r"'(\d+)\.00'", r"'\1'", text)

    assert render(rows) == [numeric(x) for x in (TCUSTORD_I, TCUSTORD_U, TCUSTORD_D, jane)]


def test_seed_primary_keys_example(spark):
    rows = decode(spark, "ogg-json", FIX / "seed-13.3.4.4-primary-keys.json")
    assert rows[0]["keys"] == ["CUST_CODE"]
    assert render(rows) == [
        "I DDL_OGGSRC.TCUSTMER 00000000000000006605 after={CITY='SEATTLE', CUST_CODE='WILL', "
        "NAME='BG SOFTWARE CO.', STATE='WA'}"
    ]


def test_json_null_is_null_and_absent_is_missing(spark, tmp_path):
    f = tmp_path / "a.json"
    f.write_text(json.dumps({"table": "S.T", "op_type": "U", "op_ts": "2020-01-01 00:00:00.000000", "pos": "1",
                             "before": {"ID": 1}, "after": {"ID": 1, "STATE": None}}) + "\n")
    (row,) = decode(spark, "ogg-json", f)
    assert "STATE" in row["after"] and row["after"]["STATE"] is None
    assert "CITY" not in row["after"]


def test_renamed_images_custom_op_keys_and_tokens(spark, tmp_path):
    f = tmp_path / "a.json"
    msgs = [
        {"table": "S.T", "op_type": "INS", "op_ts": "2020-01-01 00:00:00.000000", "pos": "1",
         "tokens": {"R": "AADPkvAAEAAEqL2AAA"}, "new": {"ID": 1, "V": "a"}},
        {"table": "S.T", "op_type": "UPD", "op_ts": "2020-01-01 00:00:01.000000", "pos": "2",
         "old": {"ID": 1, "V": "a"}, "new": {"ID": 1, "V": "b"}},
        {"table": "S.T", "op_type": "DEL", "op_ts": "2020-01-01 00:00:02.000000", "pos": "3", "old": {"ID": 1}},
        {"table": "S.T", "op_type": "TRUNC", "op_ts": "2020-01-01 00:00:03.000000", "pos": "4"},
    ]
    f.write_text("\n".join(json.dumps(m) for m in msgs) + "\n")
    rows = decode(spark, "ogg-json", f, beforeObjectName="old", afterObjectName="new", insertOpKey="INS",
                  updateOpKey="UPD", deleteOpKey="DEL", truncateOpKey="TRUNC")
    assert [r["op"] for r in rows] == ["I", "U", "D", "T"]
    assert render(rows)[1] == "U S.T 2 before={ID='1', V='a'} after={ID='1', V='b'}"
    assert rows[0]["source"]["token.R"] == "AADPkvAAEAAEqL2AAA"


def test_flatten_with_custom_delimiter(spark, tmp_path):
    f = tmp_path / "a.json"
    f.write_text(json.dumps({"table": "S.T", "op_type": "U", "op_ts": "2020-01-01 00:00:00.000000", "pos": "9",
                             "before__ID": 7, "after__ID": 7, "after__NAME": None}) + "\n")
    (row,) = decode(spark, "ogg-json", f, flatten="true", flattenDelimiter="CDATA[__]")
    assert render([row]) == ["U S.T 9 before={ID='7'} after={ID='7', NAME=None}"]


def test_seq_orders_by_op_ts_then_pos(spark, tmp_path):
    f = tmp_path / "a.json"
    msgs = [
        {"table": "S.T", "op_type": "I", "op_ts": "2020-01-01 00:00:01.000000", "pos": "5", "after": {"ID": 1}},
        {"table": "S.T", "op_type": "I", "op_ts": "2020-01-01 00:00:01.000000", "pos": "10", "after": {"ID": 2}},
        {"table": "S.T", "op_type": "I", "op_ts": "2020-01-01 00:00:00.500000", "pos": "99", "after": {"ID": 3}},
    ]
    f.write_text("\n".join(json.dumps(m) for m in msgs) + "\n")
    rows = decode(spark, "ogg-json", f)
    ordered = [r["after"]["ID"] for r in sorted(rows, key=lambda r: r["seq"])]
    assert ordered == ["3", "1", "2"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"table":"S.T","op_type":"I"', "not valid JSON"),
        # single quotes are no JSON (Spark's reader would take them unless told not to)
        ("{'table':'S.T','op_type':'I','op_ts':'2020-01-01 00:00:00','pos':'1','after':{'ID':1}}", "not valid JSON"),
        ('{"op_type":"I","op_ts":"2020-01-01 00:00:00","pos":"1","after":{"ID":1}}', "'table' missing or empty"),
        ('{"table":"S.T","op_type":"X","op_ts":"2020-01-01 00:00:00","pos":"1","after":{"ID":1}}',
         "unknown op_type 'X' (expected one of I, U, D, T)"),
        ('{"table":"S.T","op_type":"I","op_ts":"yesterday","pos":"1","after":{"ID":1}}',
         "'op_ts' missing or not a timestamp: 'yesterday'"),
        ('{"table":"S.T","op_type":"U","op_ts":"2020-01-01 00:00:00","pos":"1","before":{"ID":1}}',
         "'after' missing for op_type 'U' (expected an object)"),
        ('{"table":"S.T","op_type":"D","op_ts":"2020-01-01 00:00:00","pos":"1"}',
         "'before' missing for op_type 'D' (expected an object)"),
    ],
)
def test_bad_records_carry_a_reason_and_their_raw_text(spark, tmp_path, line, reason):
    f = tmp_path / "a.json"
    good = '{"table":"S.T","op_type":"I","op_ts":"2020-01-01 00:00:00","pos":"0","after":{"ID":0}}'
    f.write_text(good + "\n" + line + "\n")
    rows = decode(spark, "ogg-json", f)
    assert rows[0]["_error"] is None
    assert rows[1]["_error"] == reason
    assert locate(str(f), 0, {1}) == {1: (2, line)}


def test_unknown_option_and_format_are_refused_with_the_known_names():
    with pytest.raises(ConfigError, match="unknown option.*flaten.*known: .*flatten"):
        get_decoder("ogg-json", {"flaten": "true"})
    with pytest.raises(UnknownFormatError, match="known formats: .*ogg-json"):
        get_decoder("ogg-jsn")
    with pytest.raises(ConfigError, match="not true/false"):
        get_decoder("ogg-json", {"flatten": "maybe"}).flag("flatten")
    assert "ogg-json" in DECODERS


def test_split_documents_handles_pretty_printed_concatenated_json():
    text = '{\n "a": "x}y",\n "b": [1, 2,],\n}\n\n{"a": "\\"q"}\nGARBAGE\n'
    assert list(split_documents(text)) == [(1, '{\n "a": "x}y",\n "b": [1, 2]\n}'), (6, '{"a": "\\"q"}'), (7, "GARBAGE")]
