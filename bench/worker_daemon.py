"""The embedded session's Python worker daemon against Spark's own: a 60-task Python stage, timed.

    python bench/worker_daemon.py patched|plain     (bench/RESULTS.md, "The worker-daemon patch")

``patched``: the embedded session as it is (``spark.python.daemon.module=lakecdc.spark.pyworker``);
``plain``: Spark's own daemon. One untimed warm-up, then three timed runs, printed in seconds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

from lakecdc.spark.session import get_spark


def identity(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


def main(mode: str) -> None:
    conf = {} if mode == "patched" else {"spark.python.daemon.module": "pyspark.daemon"}
    spark = get_spark(conf=conf)
    df = spark.range(0, 2_000_000, numPartitions=60)
    df.mapInArrow(identity, df.schema).count()  # warm-up
    times = []
    for _ in range(3):
        started = time.perf_counter()
        df.mapInArrow(identity, df.schema).count()
        times.append(time.perf_counter() - started)
    print(mode, spark.conf.get("spark.python.daemon.module"), [round(t, 2) for t in times])


if __name__ == "__main__":
    main(sys.argv[1])
