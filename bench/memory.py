"""Does lakecdc's memory follow the batch or the table? One batch into tables of several sizes.

    python -m bench.memory --batch 100000 --keys 200000 --keys 1000000 [--repeat 3]

For each ``--keys K`` the cached workload of ``5 * K`` events over ``K`` keys (generated once, as
``bench.run`` does) gives a target preloaded with ``K`` rows; the same batch, the first ``--batch``
events of the smallest workload, is applied to a fresh copy of each target ``--repeat`` times in
one process. Printed per target: seconds and peak RSS of the whole process tree per run. When
memory follows the batch, the peak stays level while the table grows.
"""

from __future__ import annotations

import argparse
import shutil
import time
from itertools import islice
from pathlib import Path

from bench.run import GIB, PeakRss, _lakecdc_apply, _lakecdc_preload, ensure_workload, start_spark


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=100_000, help="events in the batch (default 100,000)")
    parser.add_argument("--keys", type=int, action="append", required=True, help="rows of a target (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per target (the first is cold)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    sizes = sorted(args.keys)
    workloads = [ensure_workload(args.workdir, 5 * k, k, args.seed) for k in sizes]
    scratch = args.workdir / "memory"
    scratch.mkdir(parents=True, exist_ok=True)
    batch = scratch / f"batch_{args.batch}.json"
    with workloads[0].events_json.open("rb") as source, batch.open("wb") as out:
        out.writelines(islice(source, args.batch))
    spark = start_spark()
    print(f"| target rows | {' | '.join(f'run {i + 1}' for i in range(args.repeat))} | peak RSS per run |")
    print(f"|---:|{'---:|' * args.repeat}---|")
    for keys, workload in zip(sizes, workloads, strict=True):
        template = scratch / f"template_{keys}"
        if not template.exists():
            _lakecdc_preload(spark, workload, template)
        seconds, peaks = [], []
        for _ in range(args.repeat):
            target = scratch / "run"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(template, target)
            with PeakRss() as memory:
                started = time.perf_counter()
                _lakecdc_apply(spark, batch, target)
                seconds.append(time.perf_counter() - started)
            peaks.append(memory.peak / GIB)
        runs = " | ".join(f"{s:.2f} s" for s in seconds)
        print(f"| {keys:,} | {runs} | {', '.join(f'{p:.2f}' for p in peaks)} GiB |", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
