"""Stream Debezium's topics into a target until killed (the child of
tests/test_debezium_postgres.py's kill test).

``python tests/debezium_stream_child.py BOOTSTRAP TOPICS TARGET`` runs
``lakecdc.stream(lakecdc.Kafka(..., subscribe=TOPICS), TARGET,
format="debezium-json", trigger="1 second")`` and prints ``batch <n>`` after each applied batch
(flushed), so the parent can kill it at any moment.
"""

from __future__ import annotations

import sys

import lakecdc


def main(bootstrap: str, topics: str, target: str) -> None:
    lakecdc.get_spark(conf={"spark.sql.shuffle.partitions": "2"})
    s = lakecdc.stream(lakecdc.Kafka(bootstrap, subscribe=topics), target, format="debezium-json",
                       trigger="1 second", on_batch=lambda b: print(f"batch {b.batch_id}", flush=True))
    s.await_termination()


if __name__ == "__main__":
    main(*sys.argv[1:4])
