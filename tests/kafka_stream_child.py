"""Stream Kafka topics into a target until killed (the child of tests/test_kafka.py's kill tests).

``python tests/kafka_stream_child.py BOOTSTRAP TOPIC TARGET MODE``: MODE ``stream`` runs
``lakecdc.stream(lakecdc.Kafka(...))``; ``hook`` runs a query of its own over Spark's Kafka source
with ``foreachBatch(lakecdc.foreach_batch(...))``, its checkpoint beside the target. Either way a
processing-time trigger of one second, GoldenGate JSON, table ``S.T`` keyed by ``ID``. Prints
``batch <n>`` after each applied batch (``flush``ed), so the parent can kill it at any moment.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lakecdc


def main(bootstrap: str, topic: str, target: str, mode: str) -> None:
    spark = lakecdc.get_spark(conf={"spark.sql.shuffle.partitions": "2"})
    keys = {"S.T": ["ID"]}
    if mode == "stream":
        s = lakecdc.stream(lakecdc.Kafka(bootstrap, subscribe=topic), target, format="ogg-json", keys=keys,
                           trigger="1 second", on_batch=lambda b: print(f"batch {b.batch_id}", flush=True))
        s.await_termination()
        return
    hook = lakecdc.foreach_batch(target, format="ogg-json", keys=keys)

    def batch(df, batch_id):  # noqa: ANN001, ANN202
        hook(df, batch_id)
        print(f"batch {batch_id}", flush=True)

    (
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        .option("startingOffsets", "earliest").load()
        .writeStream.option("checkpointLocation", str(Path(target).parent / "hook-checkpoint"))
        .trigger(processingTime="1 second").foreachBatch(batch).start()
        .awaitTermination()
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
