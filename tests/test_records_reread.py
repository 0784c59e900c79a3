"""Records read again from their files (:mod:`lakecdc.decode.files`): the wrappers a staged
copy may have, and :class:`~lakecdc.decode.files.reread.Rereader`, which finds the lines the Python
reader needs by split and rank, reading each split forward once."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.files import lines, staging
from lakecdc.decode.files.reread import INDEX_MASK, Rereader, locate
from lakecdc.decode.files.staging import wrapping


def test_wrappers():
    assert wrapping(None) == ("", "")
    assert wrapping("m") == ('{"m":', "}")
    assert wrapping("m[]") == ('{"m":[', "]}")


@pytest.mark.parametrize("chunk", [1 << 24, 5])
def test_array_wrapper_staging_and_locate(tmp_path, monkeypatch, chunk):
    """Each record staged as {"m":[<record>]}, CRLF kept outside, blank lines blank; located again
    as written, on its own line."""
    monkeypatch.setattr(staging, "_CHUNK_BYTES", chunk)
    src = tmp_path / "a.json"
    src.write_bytes(b'{"a":1}\r\n\n{"b":2} trailing\r\n  \n{"c":3}, {"d":4}')
    staged = staging._stage(str(src), str(tmp_path / "s"), wrap="m[]")
    with open(staged, "rb") as fh:
        assert fh.read().split(b"\n") == [b'{"m":[{"a":1}]}\r', b"", b'{"m":[{"b":2} trailing]}\r', b"  ",
                                          b'{"m":[{"c":3}, {"d":4}]}']
    assert locate(staged, 0, {0, 1, 2}) == {0: (1, '{"a":1}'), 1: (3, '{"b":2} trailing'), 2: (5, '{"c":3}, {"d":4}')}


def test_a_line_that_is_more_than_one_value_is_told_apart(spark, tmp_path):
    """Read bare, Spark's file source takes a line's first JSON value and ignores the rest; read
    wrapped in an array, such a line is corrupt or has more than one element."""
    src = tmp_path / "a.json"
    src.write_text('{"x":1}\n{"x":2} trailing\n{"x":3}, "y": 4\n{"x":5}{"x":6}\n{"x":7}, {"x":8}\n')
    schema = T.StructType([T.StructField("m", T.ArrayType(T.StructType([T.StructField("x", T.LongType())])))])
    with lines.exact_json_strings(spark):
        rows = lines.read_json(spark, [str(src)], schema, staging=str(tmp_path / "s"), wrap="m[]").select(
            F.size("m").alias("n"), F.col(lines.CORRUPT).isNotNull().alias("bad")).orderBy("_row").collect()
    assert [(r["n"] if not r["bad"] else "corrupt") for r in rows] == [1, "corrupt", "corrupt", "corrupt", 2]


def test_rereader_finds_each_wanted_record_across_splits_and_batches(tmp_path):
    """Rows of two splits of a file and a whole second file in one partition, fed in batches of 3:
    each wanted record's text is the one locate finds by its rank in its split."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"n": i, "pad": "x" * (i % 7)}) + "\n" + ("\n" if i % 4 == 0 else "") for i in range(40)))
    b.write_text("".join(json.dumps({"m": i}) + "\n" for i in range(9)))
    middle = a.stat().st_size // 2
    # the records of each split: (split id, file, block, texts in rank order)
    parts = []
    for split_id, (path, block, end) in enumerate([(str(a), 0, middle), (str(a), middle, None), (str(b), 0, None)]):
        everything = locate(path, block, set(range(1000)))
        if end is not None:  # the split ends with the line that crosses its end
            after = locate(path, end, set(range(1000)))
            everything = {r: t for r, t in everything.items() if r < len(everything) - len(after)}
        parts.append((split_id + 11, path, block, [everything[r][1] for r in sorted(everything)]))
    assert sum(len(t) for *_x, t in parts) == 49
    rows = [(sid, path, block, text) for sid, path, block, texts in parts for text in texts]
    partition = 3
    ids = np.array([(partition << 33) + 100 + i for i in range(len(rows))])  # (the partition's first id is not 0)
    wanted = np.array([i % 3 != 1 for i in range(len(rows))])
    reader = Rereader()
    got: dict[int, str | None] = {}
    for start in range(0, len(rows), 3):
        batch = rows[start:start + 3]
        texts = reader.texts(np.array([r[0] for r in batch]), ids[start:start + 3], [r[1] for r in batch],
                             [r[2] for r in batch], wanted[start:start + 3])
        got.update({start + i: t for i, t in texts.items()})
    reader.close()
    assert got == {i: rows[i][3] for i in range(len(rows)) if wanted[i]}
    assert ids[0] & INDEX_MASK == 100


@pytest.mark.parametrize("wrap", ["m", "m[]"])
def test_a_crlf_file_read_wrapped_keeps_a_record_per_line(spark, tmp_path, wrap):
    """Spark's line reader ends a line at a carriage return followed by anything: a CRLF file
    staged wrapped reads back one whole record per line, none corrupt."""
    src = tmp_path / "crlf.json"
    src.write_bytes(b'{"x":1}\r\n{"x":2}\r\n\r\n{"x":3}\r\n')
    inner = T.StructType([T.StructField("x", T.LongType())])
    schema = T.StructType([T.StructField("m", T.ArrayType(inner) if wrap.endswith("[]") else inner)])
    with lines.exact_json_strings(spark):
        rows = lines.read_json(spark, [str(src)], schema, staging=str(tmp_path / "s"), wrap=wrap).orderBy("_row").collect()
    assert [r[lines.CORRUPT] for r in rows] == [None, None, None]
    assert [(r["m"][0] if wrap.endswith("[]") else r["m"])["x"] for r in rows] == [1, 2, 3]
