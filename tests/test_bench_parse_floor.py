"""bench/parse_floor.py: its contenders read what its text says they read, and count every message."""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import sys
from pathlib import Path

import msgspec
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import alibaba_qlik, parse_floor  # noqa: E402
from bench.generate import generate  # noqa: E402

pytestmark = pytest.mark.spark


def _lines(path: Path, n: int) -> None:
    rows = [{"magic": "atMSG", "type": "DT", "message": {"data": {"ID": i, "NOTE": "x" * (i % 9), "PRICE": 12.50}}}
            for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 64])
def test_the_ranges_of_a_file_count_each_line_once(tmp_path: Path, parts: int) -> None:
    path = tmp_path / "m.json"
    _lines(path, 500)
    ranges = parse_floor.halves(str(path), parts)
    assert ranges[0][1] == 0 and ranges[-1][2] == path.stat().st_size
    assert sum(parse_floor.count_exact(r) for r in ranges) == 500


def test_the_python_parse_is_exact_and_reads_values_not_lines() -> None:
    got = parse_floor.ENVELOPE_DECODER.decode(b'{"message":{"data":{"A":12.50,"B":123456789012345678901234,"C":"t"}}}')
    assert got.message.data == {"A": "12.50", "B": 123456789012345678901234, "C": "t"}
    # decode_lines reads a stream of values: a line of two is two messages (as for spark-bare,
    # nothing checks one value per line), and a broken one is refused
    assert len(parse_floor.ENVELOPE_DECODER.decode_lines(b'{"magic":"atMSG"} {"magic":"atMSG"}\n')) == 2
    with pytest.raises(msgspec.DecodeError):
        parse_floor.ENVELOPE_DECODER.decode_lines(b'{"magic":"atMSG"\n')


def test_spark_read_bare_takes_a_lines_first_value_and_ignores_the_rest(spark, tmp_path: Path) -> None:
    """Why lakecdc stages each line wrapped: read as it is, a line of two values is one message."""
    path = tmp_path / "two.json"
    path.write_text('{"magic":"atMSG","type":"DT"} {"magic":"atMSG","type":"MD"}\n', encoding="utf-8")
    assert parse_floor.spark_bare(spark, [str(path)]) == 1


def test_every_contender_counts_every_message(spark, tmp_path: Path) -> None:
    workload = generate(tmp_path / "workload", 600, 150, seed=3)
    (encoded,) = alibaba_qlik.encode(workload, [parse_floor.FORMAT], say=lambda _line: None)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        seconds = parse_floor.measure(spark, encoded, tmp_path / "scratch", 1, pool)
    # (measure raises unless each run counted the 600 messages)
    assert set(seconds) == {"floor", "spark-bare", "spark-bare-images", "spark-staged", "msgspec", "msgspec-images",
                            "msgspec-images-spark", "lakecdc"}
    assert all(len(runs) == 1 for runs in seconds.values())


def test_masked_leaves_out_the_columns_whose_bit_is_0(spark) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([({"A": "1", "B": None, "C": "3"}, 0b101), ({"A": "1", "B": None, "C": "3"}, 0b111),
                                ({"A": "1", "B": None, "C": "3"}, None)], "image map<string,string>, col long")
    got = [r[0] for r in df.select(parse_floor.masked(F.col("image"), F.col("col"), [1, 2, 3])).collect()]
    assert got == [{"A": "1", "C": "3"}, {"A": "1", "B": None, "C": "3"}, {"A": "1", "B": None, "C": "3"}]


def test_image_arrays_leave_out_the_columns_whose_bit_is_0() -> None:
    lines = [b'{"message":{"data":{"A":1,"B":null,"C":"x","D":2.50},"beforeData":null,"headers":{"columnMask":"0D"}}}',
             b'{"message":{"data":{"A":2,"B":true,"C":"y","D":1.0},"beforeData":{"A":2,"B":false,"C":"z","D":null},'
             b'"headers":{"columnMask":null}}}']
    data, before = parse_floor.image_arrays(parse_floor.ENVELOPE_DECODER.decode_lines(b"\n".join(lines)))
    assert data.to_pylist() == [[("A", "1"), ("C", "x"), ("D", "2.50")],
                                [("A", "2"), ("B", "true"), ("C", "y"), ("D", "1.0")]]
    assert before.to_pylist() == [None, [("A", "2"), ("B", "false"), ("C", "z"), ("D", None)]]
