"""GoldenGate Java adapter properties files: parsing, handler choice, format mapping, the CLI flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakecdc.decode.goldengate.properties import parse_properties, read_gg_properties
from lakecdc.errors import ConfigError

SEED_DELIMITED = Path(__file__).parents[2] / "fixtures" / "ogg-delimited"


def test_java_properties_syntax():
    text = (
        "# comment\n! also a comment\n\n"
        "a=1\n"
        "b : two words \n"
        "c\tthree\n"
        "d=long \\\n    continued\n"
        "e=CDATA[\\u0001]\n"
        "f=tab\\there\n"
        "g\\:h=colon in key\n"
        "a=later wins\n"
    )
    assert parse_properties(text) == {
        "a": "later wins", "b": "two words ", "c": "three", "d": "long continued", "e": "CDATA[\u0001]",
        "f": "tab\there", "g:h": "colon in key",
    }


def test_the_handler_its_format_and_its_format_properties(tmp_path):
    p = tmp_path / "hdfs.properties"
    p.write_text(
        "gg.handlerlist=hdfs\n"
        "gg.handler.hdfs.type=hdfs\n"
        "gg.handler.hdfs.mode=op\n"
        "gg.handler.hdfs.format=delimitedtext\n"
        "gg.handler.hdfs.format.fieldDelimiter=CDATA[\\u0001]\n"
        "gg.handler.hdfs.format.includeColumnNames=true\n"
        "gg.handler.other.format=json\n"
    )
    assert read_gg_properties(p) == ("ogg-delimited", {"fieldDelimiter": "CDATA[\u0001]", "includeColumnNames": "true"})
    assert read_gg_properties(p, "other") == ("ogg-json", {})
    with pytest.raises(ConfigError, match="handler 'nope' has no gg.handler.nope.format"):
        read_gg_properties(p, "nope")


def test_the_seeds_avro_sample_spelling_and_clear_errors(tmp_path):
    p = tmp_path / "a.properties"
    # seed 13.4.2.6 writes gg.hdfs.format (no "handler")
    p.write_text("gg.hdfs.format=avro_op\ngg.handler.hdfs.format.insertOpKey=I\n")
    assert read_gg_properties(p) == ("ogg-avro-op", {"insertOpKey": "I"})
    p.write_text("gg.handler.a.format=json\ngg.handler.b.format=xml\n")
    with pytest.raises(ConfigError, match="several handlers have a format \\(a, b\\)"):
        read_gg_properties(p)
    p.write_text("gg.handler.a.format=protobuf\n")
    with pytest.raises(ConfigError, match="'protobuf' is not one of"):
        read_gg_properties(p)


def test_cli_reads_the_replicats_properties(tmp_path):
    from tests.test_cli import run_cli

    props = tmp_path / "hdfs.properties"
    lines = [
        "gg.handlerlist=hdfs",
        "gg.handler.hdfs.format=delimitedtext",
        "gg.handler.hdfs.format.fieldDelimiter=CDATA[|]",
        "gg.handler.hdfs.format.includeTokens=true",
        f"gg.handler.hdfs.format.schemaDirectory={SEED_DELIMITED / 'dirdef'}",
    ]
    props.write_text("\n".join(lines) + "\n")
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.txt").write_text((SEED_DELIMITED / "seed-13.2.2-pipe.txt").read_text())
    summary = tmp_path / "run.json"
    out = run_cli("apply", "--gg-properties", str(props), "--input", str(landing), "--target", str(tmp_path / "lake"),
                  "--key", "GG.TCUSTORD=CUST_CODE,ORDER_DATE,PRODUCT_CODE,ORDER_ID", "--summary-json", str(summary))
    assert out.returncode == 0, out.stderr
    assert json.loads(summary.read_text())["tables"][0]["events"] == 4
    # a misspelt property is reported with the known ones, nothing is applied
    props.write_text("\n".join([*lines, "gg.handler.hdfs.format.fieldDelimter=|"]) + "\n")
    out = run_cli("apply", "--gg-properties", str(props), "--input", str(landing), "--target", str(tmp_path / "lake2"))
    assert out.returncode == 2 and "unknown option(s) fieldDelimter" in out.stderr
    out = run_cli("apply", "--gg-properties", str(props), "--format", "ogg-json", "--input", str(landing),
                  "--target", str(tmp_path / "lake3"))
    assert out.returncode == 2 and "contradicts" in out.stderr
