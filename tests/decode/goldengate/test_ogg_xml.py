"""The GoldenGate XML decoder: seed 000's examples (13.5.2), the three column states, hostile and
malformed input, options, and a round trip of random histories against the oracle."""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.decode import DECODERS, get_decoder
from lakecdc.decode.files.reread import locate
from lakecdc.decode.goldengate.xml import escape_record, split_operations, unescape_record
from lakecdc.errors import ConfigError
from lakecdc.lake.state import quarantine_path, table_path

try:
    from tests.helpers import rows
    from tests.ogg_xml_render import write_xml_run
    from tests.oracle import Event
    from tests.test_property import (
        SUMMARY_FIELDS,
        Scenario,
        TableSpec,
        assert_names_a_pk_update,
        run_scenario,
        scenarios,
    )
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows  # type: ignore[no-redef]
    from ogg_xml_render import write_xml_run  # type: ignore[no-redef]
    from oracle import Event  # type: ignore[no-redef]
    from test_property import (  # type: ignore[no-redef]
        SUMMARY_FIELDS,
        Scenario,
        assert_names_a_pk_update,
        run_scenario,
        scenarios,
    )

try:
    from tests.decode.helpers import decode
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from decode.helpers import decode  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "ogg-xml"
PUBLIC = ("table", "op", "op_ts", "pos", "idx", "seq", "txid", "keys", "before", "after", "source", "_error")


def seq(ts: str, pos: str) -> str:
    """``default_seq`` written out: UTC microseconds + 10**16, the padded pos, idx 0."""
    when = dt.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S.%f")
    micros = calendar.timegm(when.timetuple()) * 10**6 + when.microsecond
    return f"{micros + 10**16:017d}|{pos}|000000"


def event(table: str, op: str, ts: str, pos: str, *, before: dict | None = None, after: dict | None = None,
          source: dict[str, str]) -> dict[str, Any]:
    return {"table": table, "op": op, "op_ts": dt.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S.%f"), "pos": pos,
            "idx": 0, "seq": seq(ts, pos), "txid": None, "keys": None, "before": before, "after": after,
            "source": source, "_error": None}


def decode_xml(spark, paths, **options) -> list[dict[str, Any]]:
    """The records of ``paths`` decoded as ogg-xml, as dicts."""
    return [r.asDict(recursive=True) for r in decode(spark, "ogg-xml", paths, **options)]


def public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in PUBLIC}


# -- seed 000, 13.5.2: the four example messages ------------------------------------------------

TCUSTORD = "GG.TCUSTORD"
WILL = {"CUST_CODE": "WILL", "ORDER_DATE": "1994-09-30:15:33:00", "PRODUCT_CODE": "CAR", "ORDER_ID": "144",
        "PRODUCT_PRICE": "17520.00", "PRODUCT_AMOUNT": "3", "TRANSACTION_ID": "100"}
BILL = {"CUST_CODE": "BILL", "ORDER_DATE": "1995-12-31:15:00:00", "PRODUCT_CODE": "CAR", "ORDER_ID": "765",
        "PRODUCT_PRICE": "15000.00", "PRODUCT_AMOUNT": "3", "TRANSACTION_ID": "100"}
SEED_EVENTS = [
    event(TCUSTORD, "I", "2013-06-02 22:14:36.000000", "00000000000000001444", after=WILL,
          source={"current_ts": "2015-10-06T12:21:50.100001", "numCols": "7", "token.R": "AADPkvAAEAAEqL2AAA"}),
    event(TCUSTORD, "U", "2013-06-02 22:14:41.000000", "00000000000000002891", before=BILL,
          after={**BILL, "PRODUCT_PRICE": "14000.00"},
          source={"current_ts": "2015-10-06T12:21:50.413000", "numCols": "7", "token.R": "AADPkvAAEAAEqLzAAA"}),
    # PRODUCT_PRICE, PRODUCT_AMOUNT and TRANSACTION_ID are <missing/>: absent, not NULL
    event(TCUSTORD, "D", "2013-06-02 22:14:41.000000", "00000000000000004338",
          before={"CUST_CODE": "DAVE", "ORDER_DATE": "1993-11-03:07:51:35", "PRODUCT_CODE": "PLANE", "ORDER_ID": "600"},
          source={"current_ts": "2015-10-06T12:21:50.415000", "numCols": "7", "token.L": "206080450",
                  "token.6": "9.0.80330", "token.R": "AADPkvAAEAAEqLzAAC"}),
    event(TCUSTORD, "T", "2013-06-02 22:14:41.000000", "00000000000000004515",
          source={"current_ts": "2015-10-06T12:21:50.415001", "numCols": "7", "token.R": "AADPkvAAEAAEqL2AAB"}),
]
SEED_FILES = sorted(FIX.glob("seed-13.5.2.*.xml"))


@pytest.mark.spark
def test_seed_examples_decode_as_the_seed_says(spark):
    assert [f.name for f in SEED_FILES] == [
        "seed-13.5.2.1-insert.xml", "seed-13.5.2.2-update.xml", "seed-13.5.2.3-delete.xml",
        "seed-13.5.2.4-truncate.xml",
    ]
    got = decode_xml(spark, SEED_FILES)
    assert [public(r) for r in got] == SEED_EVENTS
    # the insert's <before missing='true'/> leaves no before image; the delete's <missing/> columns
    # are not keys of its before image
    assert "PRODUCT_PRICE" not in got[2]["before"]
    for r in got:  # each document is found again at line 1 of its file (prolog included)
        line, raw = locate(r["_file"], r["_block"], {0})[0]
        assert line == 1 and raw.startswith("<?xml version='1.0' encoding='UTF-8'?>\\n<operation table='GG.TCUSTORD'")


@pytest.mark.spark
def test_a_stream_of_documents_with_and_without_prologs(spark, tmp_path):
    docs = [f.read_text() for f in SEED_FILES]
    docs[1] = docs[1].split("\n", 1)[1]  # no prolog (includeProlog=false, the default)
    docs[2] = "".join(line.strip() for line in docs[2].splitlines())  # prolog and document on one line
    text = "\n\n".join(d.rstrip("\n") for d in docs) + "\n"
    f = tmp_path / "stream.xml"
    f.write_bytes(text.replace("\n", "\r\n").encode())  # CRLF line ends
    got = decode_xml(spark, [f])
    assert [public(r) for r in got] == SEED_EVENTS
    staged = got[0]["_file"]
    assert {rank: line for rank, (line, _raw) in locate(staged, 0, {0, 1, 2, 3}).items()} == {0: 1, 1: 39, 2: 76, 3: 78}


def test_split_operations_and_the_staged_escape():
    text = ("<?xml version='1.0'?>\n<operation a='>'><col/>\n<operation b='1'/> tail\n"
            "<?xml version='1.0'?><x><![CDATA[</x><?xml ]]></x>\n"
            "<!DOCTYPE operation [<!ENTITY e \"]>\">]><operation>&e;</operation>")
    assert list(split_operations(text)) == [
        (1, "<?xml version='1.0'?>\n<operation a='>'><col/>"),  # never closed: cut at the next one
        (3, "<operation b='1'/>"),
        (3, "tail"),
        (4, "<?xml version='1.0'?><x><![CDATA[</x><?xml ]]></x>"),
        (5, "<!DOCTYPE operation [<!ENTITY e \"]>\">]><operation>&e;</operation>"),
    ]
    record = "a\\b\nc\r\udcff"
    line = escape_record(record)
    assert "\n" not in line and "\r" not in line
    assert line == "a\\\\b\\nc\\r\\xff"
    assert unescape_record(line) == ("a\\b\nc\r\ufffd", [0xFF])


@pytest.mark.spark
def test_null_empty_missing_and_exact_text(spark, tmp_path):
    f = tmp_path / "values.xml"
    f.write_text(
        "<operation table='S.T' type='U' ts='2020-01-01 00:00:00.000000' pos='00000000000000000007' numCols='10'>\n"
        " <col name='ID' index='0'><before>1</before><after>1</after></col>\n"
        " <col name='NUL' index='1'><before isNull='true'/><after ISNULL='TRUE'/></col>\n"
        " <col name='EMPTY' index='2'><before/><after><![CDATA[]]></after></col>\n"
        " <col name='ESC' index='3'><before>a &lt;b&gt; &amp; &#233;</before>"
        "<after><![CDATA[x]]]]><![CDATA[>y <&>]]></after></col>\n"
        " <col name='NL' index='4'><before><![CDATA[line1\nline2\\n]]></before><after>cr&#13;lf</after></col>\n"
        " <col name='ONLY_AFTER' index='5'><after>日本</after></col>\n"
        " <col name='MISS_ATTR' index='6'><before missing='true'/><after>z</after></col>\n"
        " <col name='GONE' index='7'><missing/></col>\n"
        " <col name='WS' index='8'><before>  spaced  </before><after><![CDATA[ keep ]]></after></col>\n"
        " <col name='NUM' index='9'><before>00017520.000</before><after>123456789012345678901234567890.12</after></col>\n"
        "</operation>\n",
        encoding="utf-8",
    )
    (r,) = decode_xml(spark, [f])
    assert r["_error"] is None
    assert r["before"] == {"ID": "1", "NUL": None, "EMPTY": "", "ESC": "a <b> & é", "NL": "line1\nline2\\n",
                           "WS": "  spaced  ", "NUM": "00017520.000"}
    assert r["after"] == {"ID": "1", "NUL": None, "EMPTY": "", "ESC": "x]]>y <&>", "NL": "cr\rlf",
                          "ONLY_AFTER": "日本", "MISS_ATTR": "z", "WS": " keep ",
                          "NUM": "123456789012345678901234567890.12"}
    assert r["source"] == {"numCols": "10"}


@pytest.mark.spark
def test_custom_op_keys_and_encodings(spark, tmp_path):
    def op(kind: str, pos: int, value: str) -> str:
        return (f"<operation table='S.T' type='{kind}' ts='2020-01-01 00:00:0{pos}.000000' pos='{pos:020d}'>"
                f"<col name='ID' index='0'><before>{pos}</before><after>{pos}</after></col>"
                f"<col name='V' index='1'><before>{value}</before><after>{value}</after></col></operation>\n")

    latin = tmp_path / "a-latin1.xml"  # no prolog: the encoding option says how to read it
    latin.write_bytes((op("INS", 1, "café") + op("UPD", 2, "Ærø") + op("DEL", 3, "x") + op("TRUNC", 4, "y")).encode("latin-1"))
    got = decode_xml(spark, [latin], encoding="ISO-8859-1", insertOpKey="INS", updateOpKey="UPD",
                 deleteOpKey="DEL", truncateOpKey="TRUNC", includeProlog="false", iso8601Format="false")
    assert [(r["op"], r["before"], r["after"]) for r in got] == [
        ("I", None, {"ID": "1", "V": "café"}),
        ("U", {"ID": "2", "V": "Ærø"}, {"ID": "2", "V": "Ærø"}),
        ("D", {"ID": "3", "V": "x"}, None),
        ("T", None, None),
    ]
    declared = tmp_path / "b-declared.xml"  # the prolog's encoding wins over the option's default
    declared.write_bytes(("<?xml version='1.0' encoding='ISO-8859-1'?>\n" + op("I", 5, "señor")).encode("latin-1"))
    (r,) = decode_xml(spark, [declared])
    assert r["after"] == {"ID": "5", "V": "señor"} and r["_error"] is None


def test_options_are_the_formatters_properties():
    d = get_decoder("ogg-xml", {"format": "xml", "encoding": "ISO-8859-1", "includeProlog": "true"})
    assert d.options["insertOpKey"] == "I" and d.options["iso8601Format"] == "true"
    assert "ogg-xml" in DECODERS
    with pytest.raises(ConfigError, match="unknown option.*includeProlg.*known: .*includeProlog"):
        get_decoder("ogg-xml", {"includeProlg": "true"})
    with pytest.raises(ConfigError, match="not true/false"):
        get_decoder("ogg-xml", {"includeProlog": "maybe"})
    with pytest.raises(ConfigError, match="encoding 'EBCDIC-XYZ' is not known"):
        get_decoder("ogg-xml", {"encoding": "EBCDIC-XYZ"})


# -- hostile and malformed input: quarantined, the rest applies ---------------------------------

def op_line(kind: str, pos: int, cols: str, *, table: str = "S.T", ts: str | None = None) -> str:
    ts = ts or f"2020-01-01 00:00:{pos:02d}.000000"
    return f"<operation table='{table}' type='{kind}' ts='{ts}' pos='{pos:020d}'>{cols}</operation>"


def after(id_: str, value: str) -> str:
    return f"<col name='ID' index='0'><after>{id_}</after></col><col name='V' index='1'><after>{value}</after></col>"


def quarantine(target: Path) -> list[dict[str, Any]]:
    table = pa.table(DeltaTable(quarantine_path(str(target))).to_pyarrow_table())
    return sorted(table.to_pylist(), key=lambda r: r["line"])


@pytest.mark.spark
def test_hostile_xml_is_quarantined_unresolved_and_the_rest_applies(spark, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-7f3a9c")
    lols = "\n".join(f' <!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    hostile = {
        "external entity": f'<!DOCTYPE operation [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>\n'
                           + op_line("I", 2, after("2", "&xxe;")),
        "billion laughs": f'<?xml version="1.0"?>\n<!DOCTYPE operation [\n <!ENTITY lol0 "lol">\n{lols}\n]>\n'
                          + op_line("I", 3, after("3", "&lol9;")),
        "quadratic blowup": f'<!DOCTYPE operation [<!ENTITY a "{"x" * 50_000}">]>'
                            + op_line("I", 4, after("4", "&a;" * 20_000)),
        "external DTD": f'<!DOCTYPE operation SYSTEM "{secret.as_uri()}">' + op_line("I", 5, after("5", "v")),
        "parameter entity": f'<!DOCTYPE operation [<!ENTITY % p SYSTEM "{secret.as_uri()}"> %p;]>'
                            + op_line("I", 6, after("6", "v")),
    }
    parts = [op_line("I", 1, after("1", "a")), *hostile.values(), op_line("I", 7, after("7", "g"))]
    f = tmp_path / "landing" / "hostile.xml"
    f.parent.mkdir()
    f.write_text("\n".join(parts) + "\n")
    starts = [1 + sum(p.count("\n") + 1 for p in parts[:i]) for i in range(len(parts))]

    target = tmp_path / "lake"
    summary = lakecdc.apply([str(f)], str(target), format="ogg-xml", keys={"S.T": ["ID"]}, spark=spark)
    assert rows(summary.table("S.T").target, "ID") == [{"ID": "1", "V": "a"}, {"ID": "7", "V": "g"}]
    assert summary.quarantined_unrouted == len(hostile)  # not parsed, so no table to route them to
    found = quarantine(target)
    assert [(r["file"], r["line"]) for r in found] == [(str(f.resolve()), line) for line in starts[1:-1]]
    for r in found:
        assert r["reason"].startswith("XML DOCTYPE/entities are not allowed: DTDForbidden("), r["reason"]
        assert r["source_table"] is None and r["raw"].startswith("<")
    # nothing of the secret file was read: not in the events, the quarantine or the table
    events = lakecdc.read_changes([str(f)], format="ogg-xml", spark=spark).collect()
    everything = repr([r.asDict() for r in events]) + repr(found) + repr(rows(summary.table("S.T").target))
    assert "TOP-SECRET" not in everything
    assert sum(r["_error"] is None for r in events) == 2


@pytest.mark.spark
def test_malformed_and_invalid_operations_are_quarantined_with_file_and_line(spark, tmp_path):
    cases = [
        (op_line("I", 2, after("2", "b"))[: -len("</operation>")], "not well-formed XML: no element found"),
        (op_line("I", 3, "<col name='ID'><after>3</col>"), "not well-formed XML: mismatched tag"),
        ("this is not xml", "not well-formed XML: syntax error"),
        (op_line("I", 4, after("4", "&nbsp;")), "not well-formed XML: undefined entity"),
        (op_line("X", 5, after("5", "e")), "unknown type 'X' (expected one of I, U, D, T)"),
        (op_line("I", 6, after("6", "f"), ts="yesterday"), "'ts' attribute missing or not a timestamp: 'yesterday'"),
        (op_line("I", 7, after("7", "g") + "<col name='ID'><after>7</after></col>"), "col 'ID' appears twice"),
        (op_line("I", 8, "<col name='ID'><before>8</before><after missing='true'/></col>"),
         "no col has a <after> value for type 'I' (every column is missing)"),
        (op_line("D", 9, "<col name='ID'><after>9</after></col>"),
         "no col has a <before> value for type 'D' (every column is missing)"),
        ("<op table='S.T'/>", "root element <op> is not <operation>"),
        (op_line("I", 10, after("10", "j"), table=""), "'table' attribute missing or empty"),
        (op_line("I", 11, "<col index='0'><after>11</after></col>"), "col #1 has no 'name' attribute"),
        (op_line("I", 12, "<col name='ID'><after>12<b/></after></col>"), "col 'ID': <after> holds element <b>, expected text"),
    ]
    good_first = op_line("I", 1, after("1", "a"))
    good_last = "<?xml version='1.0'?>\n" + op_line("I", 13, after("13", "ok")).replace("><", ">\n <")
    bad_bytes = op_line("I", 14, after("14", "caf")).encode().replace(b"caf", b"caf\xff")
    f = tmp_path / "landing" / "bad.xml"
    f.parent.mkdir()
    text = "\n".join([good_first, *[c for c, _ in cases], good_last]) + "\n"
    f.write_bytes(text.encode() + bad_bytes + b"\n")

    target = tmp_path / "lake"
    summary = lakecdc.apply([str(f)], str(target), format="ogg-xml", keys={"S.T": ["ID"]}, spark=spark)
    assert rows(summary.table("S.T").target, "ID") == [{"ID": "1", "V": "a"}, {"ID": "13", "V": "ok"}]
    found = quarantine(target)
    expected = [(line, reason) for line, (_c, reason) in enumerate(cases, start=2)]
    expected.append((text.count("\n") + 1, "undecodable byte(s) 0xff"))
    assert [r["file"] for r in found] == [str(f.resolve())] * len(expected)
    assert [r["line"] for r in found] == [line for line, _ in expected]
    for r, (_line, reason) in zip(found, expected, strict=True):
        assert r["reason"].startswith(reason), (r["line"], r["reason"])
    assert found[0]["raw"] == cases[0][0]
    assert found[-1]["raw"].endswith("caf\\xff</after></col></operation>")
    assert [r["source_table"] for r in found][4:6] == ["S.T", "S.T"]


# -- round trip: random histories rendered as XML, applied, compared with the oracle ------------

SPELLING = str.maketrans({"a": "<&a", "b": "]]>b", " ": " \n", "\\": "\\\r", "é": "é日"})


def _text(value: Any) -> Any:
    """XML carries text: ints as their digits, strings spelled with characters XML must escape."""
    if value is None:
        return None
    return value.translate(SPELLING) if isinstance(value, str) else str(value)


def spelled(sc: Scenario) -> Scenario:
    def image(img: dict | None) -> dict | None:
        return None if img is None else {k: _text(v) for k, v in img.items()}

    events = [dataclasses.replace(e, before=image(e.before), after=image(e.after)) for e in sc.events]
    return dataclasses.replace(sc, events=events)


def xml_applier(spark, sc: Scenario, workdir: Path, target: Path):
    applied: list[str] = []

    def apply(number: int, _json_path: Path, run_events: list[Event], expect_failure: bool):
        path = write_xml_run(run_events, workdir / "xml" / f"run-{number:04d}.xml", seed=number)
        applied.append(str(path))
        kwargs = dict(format="ogg-xml", keys=sc.keys(), pk_update=sc.pk_update, spark=spark)
        if expect_failure:
            with pytest.raises(lakecdc.PrimaryKeyUpdateError) as info:
                lakecdc.apply(list(applied), str(target), **kwargs)
            assert_names_a_pk_update(str(info.value), run_events)
            return None
        summary = lakecdc.apply(list(applied), str(target), **kwargs)
        return {t.source_table: {f: getattr(t, f, None) for f in SUMMARY_FIELDS} for t in summary.tables}

    return apply


def _event(table: str, op: str, second: int, *, before: dict | None = None, after: dict | None = None) -> Event:
    return Event(table, op, f"2024-01-01 00:00:{second:02d}.000000", f"{second * 7:020d}", 0, before, after, ("ID",))


T, U = "S.T", "PDB.S.U"
#: Every column state and op, two runs, replays, a truncate, a primary-key update.
WRITTEN = Scenario(
    specs=[TableSpec(T, ("ID",), [], {"A": "str", "B": "str"}), TableSpec(U, ("ID",), [], {"A": "str"})],
    events=[
        _event(T, "I", 1, after={"ID": "1", "A": "x<&y", "B": None}),
        _event(T, "I", 2, after={"ID": "2", "A": "", "B": "]]>"}),
        _event(U, "I", 3, after={"ID": "1", "A": "gone soon"}),
        _event(T, "U", 4, before={"ID": "1"}, after={"ID": "1", "B": "line\r\nnext"}),  # A missing: kept
        _event(T, "U", 5, before={"ID": "2", "A": ""}, after={"ID": "3", "A": "日本 ]]]]>"}),  # key 2 -> 3
        _event(U, "T", 6),
        _event(T, "D", 7, before={"ID": "1", "A": "x<&y"}),
        _event(U, "I", 8, after={"ID": "2", "A": "  é  "}),
        _event(T, "I", 9, after={"ID": "1", "A": "again", "B": ""}),
        _event(T, "U", 10, before={"ID": "3"}, after={"ID": "3", "B": None}),
    ],
    runs=[[1, 0, 2, 3, 4], [9, 5, 6, 7, 8, 3, 0]],
    pk_update="delete-insert",
    primary_keys=False,
    source={},
)


@pytest.mark.spark
@settings(max_examples=1, deadline=None, database=None)
@given(sc=st.just(WRITTEN))  # run_scenario reports through Hypothesis' note()
def test_round_trip_of_a_written_history_matches_the_oracle(spark, tmp_path_factory, sc):
    workdir = tmp_path_factory.mktemp("xml-written")
    target = workdir / "target"
    run_scenario(sc, workdir, target, xml_applier(spark, sc, workdir, target))
    assert rows(table_path(str(target), T), "ID") == [
        {"ID": "1", "A": "again", "B": ""}, {"ID": "3", "A": "日本 ]]]]>", "B": None},
    ]


@pytest.mark.spark
@settings(max_examples=4, derandomize=True, deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sc=scenarios(max_events=15))
def test_round_trip_of_random_histories_matches_the_oracle(spark, tmp_path_factory, sc):
    sc = spelled(sc)
    workdir = tmp_path_factory.mktemp("xml")
    run_scenario(sc, workdir, workdir / "target", xml_applier(spark, sc, workdir, workdir / "target"))
