"""Concurrent table merges: one multi-table run with ``parallel_tables`` 1, 2, 4, ... compared.

The workload: ``--tables`` GoldenGate op-modeled JSON tables ``BENCH.T00``..., each with ``--keys``
keys. File 1 inserts every key of every table (the tables are created); file 2 updates half the
keys and deletes a tenth of them, the tables' events interleaved. For each setting a fresh target
applies file 1, then file 2 (merges into existing tables); both runs are timed, ``--repeat``
times (median; the settings interleaved). The tables are checked to be identical across settings.

    .venv/bin/python -m bench.parallel_tables --tables 12 --keys 2000 --settings 1,2,4
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import time
from pathlib import Path


def _msg(table: str, op: str, n: int, *, before: dict | None = None, after: dict | None = None) -> str:
    m: dict = {"table": table, "op_type": op, "op_ts": f"2024-01-01 00:00:00.{n % 1000000:06d}",
               "current_ts": "2024-01-01T00:00:00.000000", "pos": f"{n:020d}", "primary_keys": ["ID"]}
    if before is not None:
        m["before"] = before
    if after is not None:
        m["after"] = after
    return json.dumps(m)


def generate(out: Path, tables: int, keys: int, seed: int = 7) -> tuple[Path, Path]:
    """Write the two files (once per parameters) and return their directories."""
    rng = random.Random(seed)
    first, second = out / "load", out / "changes"
    if (out / "done").exists():
        return first, second
    shutil.rmtree(out, ignore_errors=True)
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    names = [f"BENCH.T{t:02d}" for t in range(tables)]
    n = 0
    lines = []
    for name in names:
        for k in range(keys):
            n += 1
            lines.append(_msg(name, "I", n, after={"ID": k, "AMOUNT": f"{k}.50", "STATUS": "new", "QTY": k % 17}))
    (first / "load.json").write_text("\n".join(lines) + "\n")
    events = [(name, k) for name in names for k in rng.sample(range(keys), keys // 2)]
    rng.shuffle(events)
    lines = []
    for i, (name, k) in enumerate(events):
        n += 1
        if i % 5 == 0:
            lines.append(_msg(name, "D", n, before={"ID": k}))
        else:
            lines.append(_msg(name, "U", n, before={"ID": k}, after={"ID": k, "STATUS": "changed", "QTY": i % 23}))
    (second / "changes.json").write_text("\n".join(lines) + "\n")
    (out / "done").write_text("")
    return first, second


def run(work: Path, tables: int, keys: int, settings: list[int], repeat: int) -> dict[int, tuple[float, float]]:
    import lakecdc
    from lakecdc.spark.session import get_spark

    spark = get_spark()
    first, second = generate(work / f"data-{tables}x{keys}", tables, keys)
    results: dict[int, tuple[float, float]] = {}
    contents: dict[int, list] = {}
    # warm-up: the JVM, Spark's code generation and delta-rs
    shutil.rmtree(work / "warmup", ignore_errors=True)
    lakecdc.apply(first, work / "warmup", format="ogg-json", spark=spark, parallel_tables=1)
    times: dict[int, list[tuple[float, float]]] = {p: [] for p in settings}
    for _ in range(repeat):  # settings interleaved: a slow spell of the machine hits them all
        for p in settings:
            target = work / f"target-{p}"
            shutil.rmtree(target, ignore_errors=True)
            t0 = time.perf_counter()
            a = lakecdc.apply(first, target, format="ogg-json", spark=spark, parallel_tables=p)
            t1 = time.perf_counter()
            b = lakecdc.apply(second, target, format="ogg-json", spark=spark, parallel_tables=p)
            t2 = time.perf_counter()
            assert a.ok and b.ok, (a.render(), b.render())
            times[p].append((t1 - t0, t2 - t1))
            contents[p] = [(t.source_table, t.inserted, t.updated, t.deleted) for t in b.tables]
            print(f"parallel_tables={p}: load {t1 - t0:.1f}s, merge run {t2 - t1:.1f}s", flush=True)
    for p in settings:
        results[p] = (statistics.median(x for x, _ in times[p]), statistics.median(y for _, y in times[p]))
        print(f"median parallel_tables={p}: load {results[p][0]:.1f}s, merge run {results[p][1]:.1f}s", flush=True)
    assert len({json.dumps(c) for c in contents.values()}) == 1, "the settings disagree"
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=12)
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--settings", default="1,2,4")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", default="/tmp/lakecdc-bench-tables")
    args = ap.parse_args()
    run(Path(args.workdir), args.tables, args.keys, [int(x) for x in args.settings.split(",")], args.repeat)


if __name__ == "__main__":
    main()
