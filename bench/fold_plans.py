"""What each of the fold's plans costs on one batch (issue 37's plan-level levers).

    python -m bench.fold_plans --events 1000000 --keys 200000 [--images partial|whole] [--repeat 3] [--workdir DIR]

One ``lakecdc.apply`` of the workload of :mod:`bench.run` (to a copy of its preloaded target)
gives the fold's input as a run builds it (decoded, typed, marked stale); then, in the same Spark
session, the fold runs to Arrow in each of its plans, taking turns round after round (the first
round a warm-up):

* **per-column, per-file**: the general fold (each column's newest present value; per-file
  counts kept in the fold's window);
* **per-column, one file**: the same without the per-file windows (a batch read from one file);
* **whole images, per-file** and **whole images, one file**: each key's newest image instead of
  each column's newest value (a batch whose after images hold every column).

With ``--images partial`` (GoldenGate JSON) the whole-image plans' answers are not used (a run
would find the partial keys and fold again per column): only their cost is measured. With
``--images whole`` (the same changes as Debezium JSON, see :mod:`bench.run`) all four are right.
"""

from __future__ import annotations

import shutil
import statistics
import time

from bench.fold_floor import rounds_parser
from bench.run import CONTENDERS, ensure_batch, ensure_workload, start_spark

#: plan name -> the fold's choices
PLANS = {
    "per-column, per-file": {"whole": False, "one_file": False},
    "per-column, one file": {"whole": False, "one_file": True},
    "whole images, per-file": {"whole": True, "one_file": False},
    "whole images, one file": {"whole": True, "one_file": True},
}


def captured_input(spark, args) -> dict:  # noqa: ANN001
    """The input of the fold of one lakecdc run of the workload (its DataFrame, layout and reset)."""
    import lakecdc.merge.prepare as prepare

    workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
    batch = ensure_batch(workload, args.images, args.workdir, args.seed)
    contender = CONTENDERS["lakecdc"]
    scratch = args.workdir / "fold-plans"
    shutil.rmtree(scratch, ignore_errors=True)
    assert contender.preload is not None
    contender.preload(spark, batch, scratch / "template")
    shutil.copytree(scratch / "template", scratch / "run")
    real, seen = prepare.fold, {}

    def capture(usable, layout, **choices):  # noqa: ANN001, ANN003, ANN202
        seen.setdefault("input", (usable, layout, choices.get("reset")))
        return real(usable, layout, **choices)

    prepare.fold = capture
    try:
        contender.run(spark, batch, scratch / "run")
    finally:
        prepare.fold = real
    usable, layout, reset = seen["input"]
    return {"usable": usable, "layout": layout, "reset": reset}


def main(argv: list[str] | None = None) -> None:
    from lakecdc.consolidate.fold import fold

    parser = rounds_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--images", choices=("partial", "whole"), default="partial")
    args = parser.parse_args(argv)
    spark = start_spark()
    try:
        given = captured_input(spark, args)
        seconds: dict[str, list[float]] = {name: [] for name in PLANS}
        for round_ in range(args.repeat):
            for name, choices in PLANS.items():
                started = time.perf_counter()
                rows = fold(given["usable"], given["layout"], reset=given["reset"], **choices).toArrow().num_rows
                took = time.perf_counter() - started
                print(f"  round {round_ + 1}/{args.repeat}{' (warm-up)' if round_ == 0 else ''}: {name} "
                      f"{took:.2f} s ({rows:,} keys)", flush=True)
                if round_ or args.repeat == 1:
                    seconds[name].append(took)
        base = statistics.median(seconds["per-column, per-file"])
        print(f"\n{args.events:,} events over {args.keys:,} keys, {args.images} images, one JVM, "
              f"median of {len(seconds[name])}:")
        print("| fold plan | seconds (runs) | vs per-column, per-file |\n|---|---:|---:|")
        for name, runs in seconds.items():
            median = statistics.median(runs)
            print(f"| {name} | {median:.2f} ({', '.join(f'{s:.2f}' for s in runs)}) | {base / median:.2f} |")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
