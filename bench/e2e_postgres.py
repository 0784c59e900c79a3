"""End to end, from a PostgreSQL commit to a Delta commit: PostgreSQL -> Debezium (Kafka Connect)
-> Kafka -> ``lakecdc.stream`` -> Delta, on real services started on loopback.

    python -m bench.e2e_postgres [--changes 100000] [--per-transaction 1000] [--rate 2000]
        [--trigger "1 second"] [--write-results]

The services are those the tests start (``scripts/services/*.sh`` through tests/services.py): a
Kafka broker (KRaft), Kafka Connect with Debezium's PostgreSQL connector (the tests' settings,
JSON with schemas) and PostgreSQL. A workload thread commits transactions of
``--per-transaction`` changes to one table (half inserts, three tenths updates of a few columns,
a fifth deletes) at about ``--rate`` changes a second, ``--changes`` in all, while
``lakecdc.stream(lakecdc.Kafka(...), format="debezium-json")`` runs with ``--trigger``.

Reported:

* **events/s**: the changes over the time from the first commit in PostgreSQL to the Delta commit
  of the batch that applied the last one (the offered rate caps it: raise ``--rate`` to find the
  most the pipeline takes);
* **lag per micro-batch**, p50 and p95 over the batches: the time from the PostgreSQL commit of
  the batch's *oldest* change (Debezium's ``source.ts_ms``) to the batch's Delta commit (the worst
  wait of a change in that batch), and the same for its newest change;
* the Delta table checked against ``SELECT`` of the PostgreSQL table (rows and a checksum).

Before the timed workload, ten rows are committed and applied, untimed: the stream's first batch
creates the table and pays Spark's first compilations.

The lag includes Debezium's and Kafka's part (capture, publish), lakecdc's landing and apply,
and the wait for the next trigger.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.services import (  # noqa: E402  (the services harness of the tests)
    SERVICES,
    KafkaConnect,
    Postgres,
    debezium_postgres_config,
)

TABLE = "item"


@dataclass
class Batches:
    """What the stream's ``on_batch`` saw: per batch, its time, its events and its landed files."""

    seen: list[tuple[float, int, tuple[str, ...]]] = field(default_factory=list)
    events: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, batch: Any) -> None:
        done = time.time()
        n = sum(t.events for t in batch.summary.tables)
        with self.lock:
            self.seen.append((done, n, batch.files))
            self.events += n


def transactions(changes: int, per_txn: int) -> int:
    return -(-changes // per_txn)


def workload(pg: Postgres, schema: str, changes: int, per_txn: int, rate: float, commits: list[float]) -> None:
    """Commits ``changes`` changes (rounded up to whole transactions) in transactions of ``per_txn``:
    inserts of new ids, updates of two columns of rows inserted by the previous transaction,
    deletes of rows inserted two before."""
    inserts, updates = per_txn // 2, per_txn * 3 // 10
    deletes = per_txn - inserts - updates
    start = time.monotonic()
    for j in range(transactions(changes, per_txn)):
        lo = j * inserts
        sql = [f"insert into {schema}.{TABLE} select g, g % 97, (g % 1000) / 10.0, 'item ' || g, now() "
               f"from generate_series({lo}, {lo + inserts - 1}) g;"]
        if j >= 1:
            p = lo - inserts
            sql.append(f"update {schema}.{TABLE} set qty = qty + 1, updated = now() where id between {p} and {p + updates - 1};")
        else:
            sql.append(f"update {schema}.{TABLE} set qty = qty + 1, updated = now() where id between 0 and {updates - 1};")
        if j >= 2:
            p = lo - 2 * inserts + updates
            sql.append(f"delete from {schema}.{TABLE} where id between {p} and {p + deletes - 1};")
        else:  # (nothing to delete yet: as many inserts, of ids no later statement touches)
            sql.append(f"insert into {schema}.{TABLE} select -g, 0, 0, 'filler', now() "
                       f"from generate_series({j * deletes + 1}, {(j + 1) * deletes}) g;")
        pg.sql("begin; " + " ".join(sql) + " commit;")
        commits.append(time.time())
        ahead = (j + 1) * per_txn / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)


def source_times(files: tuple[str, ...]) -> list[float]:
    """Debezium's ``source.ts_ms`` (the PostgreSQL commit) of every change in landed kcat files, in seconds."""
    out = []
    for path in files:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                payload = json.loads(line).get("payload")
                if not payload:
                    continue  # a tombstone
                body = json.loads(payload)
                source = (body.get("payload") or body).get("source") or {}
                if "ts_ms" in source:
                    out.append(source["ts_ms"] / 1000)
    return out


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    import lakecdc

    state = SERVICES.start("kafka")
    connect = KafkaConnect(rest=SERVICES.start("connect")["rest"], bootstrap=state["bootstrap"])
    pg_state = SERVICES.start("postgres")
    pg = Postgres(host=pg_state["host"], port=int(pg_state["port"]), database=pg_state["database"],
                  user=pg_state["user"], password=pg_state["password"], dsn=pg_state["dsn"])
    tag = uuid.uuid4().hex[:8]
    schema, prefix = f"bench_{tag}", f"bench_{tag}"
    pg.sql(f"create schema {schema}; create table {schema}.{TABLE} (id bigint primary key, qty int, "
           f"price numeric(12, 2), note text, updated timestamptz)")
    connect.create_connector(f"bench-{tag}", debezium_postgres_config(pg, prefix, schema))
    target = Path(args.workdir or tempfile.mkdtemp(prefix="lakecdc-e2e-")) / "lake"
    spark = lakecdc.get_spark()
    batches = Batches()
    stream = lakecdc.stream(lakecdc.Kafka(state["bootstrap"], subscribe=f"{prefix}.{schema}.{TABLE}"), target,
                            format="debezium-json", trigger=args.trigger, on_batch=batches, spark=spark)
    # warm-up, untimed: the stream's first batches (Spark's jobs compiled, the table created)
    pg.sql(f"insert into {schema}.{TABLE} select -1000000 - g, 0, 0, 'warm-up', now() from generate_series(1, 10) g")
    deadline = time.monotonic() + args.timeout
    while batches.events < 10:
        if time.monotonic() > deadline:
            raise SystemExit(f"e2e: the warm-up's changes were not applied after {args.timeout}s")
        stream.await_termination(1)
    with batches.lock:
        batches.seen.clear()
        batches.events = 0
    commits: list[float] = []
    driver = threading.Thread(target=workload, args=(pg, schema, args.changes, args.per_transaction, args.rate, commits))
    try:
        started = time.time()
        driver.start()
        driver.join()
        deadline = time.monotonic() + args.timeout
        expected = transactions(args.changes, args.per_transaction) * args.per_transaction
        while batches.events < expected:
            if time.monotonic() > deadline:
                raise SystemExit(f"e2e: {batches.events} of {expected} changes applied after {args.timeout}s")
            stream.await_termination(1)  # (raises the query's error)
    finally:
        stream.stop()
    pg_rows = pg.sql(f"select count(*), coalesce(sum(id * 31 + qty), 0) from {schema}.{TABLE}").strip().split("|")
    delta = lakecdc.read_table(str(target / f"{schema}.{TABLE}"), spark=spark)
    delta_rows = delta.selectExpr("count(*)", "coalesce(sum(id * 31 + qty), 0)").first()
    equal = [int(pg_rows[0]), int(pg_rows[1])] == [int(delta_rows[0]), int(delta_rows[1])]
    oldest, newest = [], []
    for done, _n, files in batches.seen:
        times = source_times(files)
        if times:
            oldest.append(done - min(times))
            newest.append(done - max(times))
    last_done = max(done for done, n, _ in batches.seen if n)
    first_commit = min(commits)
    out = {
        "changes": batches.events, "transactions": len(commits), "batches": sum(1 for _, n, _ in batches.seen if n),
        "offered_per_s": args.rate, "trigger": args.trigger,
        "seconds": round(last_done - first_commit, 1), "events_per_s": round(batches.events / (last_done - first_commit)),
        "workload_seconds": round(commits[-1] - started, 1),
        "lag_oldest_p50": round(percentile(oldest, 0.5), 2), "lag_oldest_p95": round(percentile(oldest, 0.95), 2),
        "lag_newest_p50": round(percentile(newest, 0.5), 2), "lag_newest_p95": round(percentile(newest, 0.95), 2),
        "delta_equals_postgres": equal, "rows": int(pg_rows[0]),
        "load_average": os.getloadavg(),
    }
    try:
        connect.delete_connector(f"bench-{tag}")
    finally:
        SERVICES.stop_all()
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--changes", type=int, default=100_000)
    p.add_argument("--per-transaction", type=int, default=1000)
    p.add_argument("--rate", type=float, default=2000.0, help="changes a second the workload offers")
    p.add_argument("--trigger", default="1 second")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the last change after the workload")
    p.add_argument("--workdir")
    p.add_argument("--write-results", action="store_true", help="append the figures to bench/RESULTS.md")
    args = p.parse_args(argv)
    try:
        result = run(args)
    finally:
        SERVICES.stop_all()
    print(json.dumps(result, indent=1))
    if args.write_results:
        command = "python -m bench.e2e_postgres " + " ".join(argv if argv is not None else sys.argv[1:])
        with open(ROOT / "bench" / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write(f"\n### End to end, PostgreSQL to Delta ({dt.date.today()})\n\n`{command}`\n\n"
                     f"```\n{json.dumps(result, indent=1)}\n```\n")
    if not result["delta_equals_postgres"]:
        raise SystemExit("e2e: the Delta table differs from the PostgreSQL table")


if __name__ == "__main__":
    main()
