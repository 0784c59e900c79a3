"""Every contender on every workload of issue 37, side by side, and where lakecdc stands against its targets.

    python -m bench.suite [--quick] [--sizes 1000000:200000,5000000:1000000,20000000:5000000]
        [--whole-sizes 1000000:200000,5000000:1000000] [--engines delta-rs,delta-spark]
        [--repeat 1] [--warmup 1] [--workdir DIR] [--write-results]

One command for the whole contest; it runs, in this order:

1. :mod:`bench.run` on the GoldenGate partial-image workload at each ``--sizes`` (events:keys):
   the typical ``row_number()`` notebook (``peer``), the correct per-column notebook (``correct``),
   lakecdc, each with the chosen Delta engines, and the parse floor;
2. :mod:`bench.run` on the same changes as Debezium JSON with whole after images at each
   ``--whole-sizes``, the same contenders plus OSS Spark's AUTO CDC (``autocdc``, when PySpark 4.3
   is installed beside, see ``bench/autocdc.md``);
3. :mod:`bench.merges` part b: one batch of 10,000 keys, clustered and uniform, into a table of
   ``--rows`` rows (100 files) and one of a tenth of that;

then prints one summary: per workload each target of issue 37 (lakecdc at least as fast as the
correct notebook with 0 wrong rows; on whole images at least as fast as AUTO CDC and within 1.2x of
the typical notebook; memory above the process's baseline) with the measured ratio and met or
missed, and the clustered batch's verdict. ``--quick`` runs small sizes (200,000 events, a
1,000,000-row table) to check the harness in a few minutes. Each contender runs in a process and
Spark JVM of its own, contenders taking turns (see :mod:`bench.run`); figures from a loaded machine
compare only within one table. ``--write-results`` records every table in ``bench/RESULTS.md``.

The 20,000,000-event workload needs about 20 GiB while it is generated (once per workdir) and
about 12 GB of disk; the whole-image conversion of a workload takes as much disk again.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from bench import merges
from bench import run as bench_run

GIB = 1 << 30
#: Issue 37's targets: lakecdc's speed as a share of the reference's (seconds of the reference
#: over lakecdc's: 1.0 is as fast)
TARGETS = {
    "correct": 1.0,  # at least as fast as the correct notebook (every workload)
    "autocdc": 1.0,  # at least as fast as AUTO CDC (whole images)
    "peer": 1 / 1.2,  # within 1.2x of the typical notebook (whole images, where it is right)
}
QUICK = {"sizes": "200000:40000", "whole_sizes": "200000:40000", "rows": 1_000_000}
DEFAULT = {"sizes": "1000000:200000,5000000:1000000,20000000:5000000",
           "whole_sizes": "1000000:200000,5000000:1000000", "rows": 10_000_000}


def _sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        events, _, keys = part.partition(":")
        if not events.isdigit() or not keys.isdigit():
            raise SystemExit(f"bench.suite: size {part!r}: expected EVENTS:KEYS, e.g. 1000000:200000")
        out.append((int(events), int(keys)))
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the harness")
    parser.add_argument("--sizes", help=f"partial-image workloads, EVENTS:KEYS,... (default {DEFAULT['sizes']})")
    parser.add_argument("--whole-sizes", help=f"whole-image workloads (default {DEFAULT['whole_sizes']}; '' for none)")
    parser.add_argument("--rows", type=int, help=f"rows of the merge benchmark's big table (default {DEFAULT['rows']:,})")
    parser.add_argument("--engines", default="delta-rs,delta-spark", help="Delta engines of the notebooks and lakecdc")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument("--no-merges", action="store_true", help="leave out the clustered-batch merge benchmark")
    parser.add_argument("--write-results", action="store_true", help="record every table in bench/RESULTS.md")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else DEFAULT
    args.sizes = _sizes(args.sizes if args.sizes is not None else preset["sizes"])
    args.whole_sizes = _sizes(args.whole_sizes if args.whole_sizes is not None else preset["whole_sizes"])
    args.rows = args.rows or preset["rows"]
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if set(args.engines) - {"delta-rs", "delta-spark"} or not args.engines:
        parser.error("--engines: delta-rs, delta-spark or both")
    return args


def contenders(engines: Sequence[str], images: str, *, autocdc: bool = True) -> list[str]:
    """The contenders of one kind of images, for the chosen engines (``autocdc``: AUTO CDC can
    run here, see :func:`bench.autocdc.unavailable`)."""
    names = []
    for engine in engines:
        suffix = "" if engine == "delta-rs" else "-delta-spark"
        names += [f"peer{suffix}", f"correct{suffix}", f"lakecdc{suffix}"]
    if images == "whole" and autocdc:
        names.append("autocdc")
    return [*names, "floor"]


def autocdc_reason() -> str | None:
    """Why AUTO CDC cannot run here, or None."""
    from bench import autocdc

    return autocdc.unavailable()


def _ratio(outcomes: dict[str, bench_run.Outcome], reference: str, mine: str) -> float | None:
    ref, own = outcomes.get(reference), outcomes.get(mine)
    if ref is None or own is None or not ref.seconds[ref.warmup:] or not own.seconds[own.warmup:]:
        return None
    return ref.median / own.median


def target_lines(batch: bench_run.Batch, measured: bench_run.Measured) -> list[str]:
    """The summary's lines for one workload: each target, its measured ratio, met or missed."""
    by_name = {o.contender.name: o for o in measured.outcomes}
    what = f"{batch.workload.events:,} events, {batch.images} images"
    lines = []
    for suffix in ("", "-delta-spark"):
        mine = f"lakecdc{suffix}"
        if mine not in by_name:
            continue
        own = by_name[mine]
        worst = own.worst
        wrong = worst.wrong if worst is not None else None
        checks = [("correct", f"correct{suffix}")]
        if batch.images == "whole":
            checks += [("autocdc", "autocdc"), ("peer", f"peer{suffix}")]
        for kind, reference in checks:
            ratio = _ratio(by_name, reference, mine)
            if ratio is None:
                lines.append(f"| {what} | {mine} vs {reference} | >= {TARGETS[kind]:.2f} | not measured | |")
                continue
            met = ratio >= TARGETS[kind] and (wrong == 0 or kind != "correct")
            lines.append(f"| {what} | {mine} vs {reference} | >= {TARGETS[kind]:.2f} | {ratio:.2f} "
                         f"| {'met' if met else 'missed'} |")
        lines.append(f"| {what} | {mine}: wrong rows; memory above baseline | 0 | {wrong if wrong is not None else 'n/a'}; "
                     f"{own.above_baseline / GIB:.2f} GiB (peak {own.peak / GIB:.2f}) | {'met' if wrong == 0 else 'missed'} |")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    common = ["--workdir", str(args.workdir), "--repeat", str(args.repeat), "--warmup", str(args.warmup)]
    if args.write_results:
        common.append("--write-results")
    results: list[tuple[bench_run.Batch, bench_run.Measured]] = []
    reason = autocdc_reason() if args.whole_sizes else None
    if reason:
        print(f"AUTO CDC left out: {reason}", flush=True)
    for images, sizes in (("partial", args.sizes), ("whole", args.whole_sizes)):
        for events, keys in sizes:
            print(f"\n#### bench.run: {events:,} events over {keys:,} keys, {images} images", flush=True)
            results += bench_run.main(["--events", str(events), "--keys", str(keys), "--images", images,
                                       "--only", ",".join(contenders(args.engines, images, autocdc=not reason)), *common])
    verdict = None
    if not args.no_merges:
        print(f"\n#### bench.merges part b: 10,000 keys into {args.rows:,} and {args.rows // 10:,} rows", flush=True)
        merge_contenders = ",".join(["lakecdc", *(["lakecdc-delta-spark"] if "delta-spark" in args.engines else []),
                                     "peer"])
        out = merges.main(["--part", "b", "--rows", str(args.rows), "--contenders", merge_contenders,
                           "--workdir", str(args.workdir), "--repeat", str(max(args.repeat, 1)),
                           *(["--write-results"] if args.write_results else [])])
        verdict = out.get("verdict")
    rows = ["| workload | target | goal | measured | |", "|---|---|---:|---|---|"]
    for batch, measured in results:
        rows += target_lines(batch, measured)
    print("\n#### The speed targets (ratio: the reference's seconds over lakecdc's; 1.00 is as fast)\n")
    print("\n".join(rows))
    if verdict is not None:
        print(f"\nClustered 10,000-key batch into {args.rows:,} rows: files rewritten {verdict.rewritten_share:.0%} "
              f"({'met' if verdict.rewritten_ok else 'missed'}, goal <= 5%); cost {verdict.cost_ratio:.2f}x the "
              f"batch into a tenth of the rows ({'met' if verdict.cost_ok else 'missed'}, goal <= 2x).")


if __name__ == "__main__":
    main()
