"""The small batch whose run writes the Spark class archive (:mod:`lakecdc.spark.classarchive`).

:func:`lakecdc.spark.classarchive.build` runs ``python -m lakecdc.run.warmup PATH`` in a child
process. Its embedded session's JVM maps no archive and writes one at exit: the classes a batch
loads on its way through the whole pipeline (decode, fold, merge, read back), so that later
sessions start with them mapped instead of loading and verifying them again.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from lakecdc.run.apply import apply
from lakecdc.run.read import read_table
from lakecdc.spark.classarchive import recording_options
from lakecdc.spark.session import get_spark

_SAMPLE = [
    '{"table":"LAKECDC.WARMUP","op_type":"I","op_ts":"2024-01-01 00:00:00.000000","pos":"00000000000000000001",'
    '"primary_keys":["ID"],"after":{"ID":1,"NAME":"a","AMOUNT":"1.50","AT":"2024-01-01 00:00:00"}}',
    '{"table":"LAKECDC.WARMUP","op_type":"U","op_ts":"2024-01-01 00:00:01.000000","pos":"00000000000000000002",'
    '"primary_keys":["ID"],"before":{"ID":1},"after":{"ID":1,"NAME":"b"}}',
    '{"table":"LAKECDC.WARMUP","op_type":"I","op_ts":"2024-01-01 00:00:02.000000","pos":"00000000000000000003",'
    '"primary_keys":["ID"],"after":{"ID":2,"NAME":"c","AMOUNT":null,"AT":null}}',
    '{"table":"LAKECDC.WARMUP","op_type":"D","op_ts":"2024-01-01 00:00:03.000000","pos":"00000000000000000004",'
    '"primary_keys":["ID"],"before":{"ID":2}}',
    "not json",
]


def record(path: Path) -> None:
    """Run a small batch through the whole pipeline in a JVM that writes the archive to ``path``
    as it exits, then make that JVM exit."""
    spark = get_spark(conf={"spark.driver.extraJavaOptions": recording_options(path)})
    with tempfile.TemporaryDirectory(prefix="lakecdc-warmup-") as work:
        landing = Path(work, "landing")
        landing.mkdir()
        (landing / "batch.json").write_text("\n".join(_SAMPLE) + "\n")
        summary = apply(str(landing), str(Path(work, "lake")), format="ogg-json", spark=spark)
        for table in summary.tables:
            read_table(table.target, spark=spark).toPandas()
    proc = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
    spark.stop()
    # the JVM writes the archive as it exits: it exits when its standard input closes
    proc.stdin.close()
    proc.wait(timeout=600)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m lakecdc.run.warmup ARCHIVE   (run by lakecdc.spark.classarchive.build)")
    record(Path(sys.argv[1]))
