"""Quality-check overhead: the generated Great Expectations suites after a merge, as a ratio to it.

    python -m bench.quality --events 1000000 --keys 200000 [--warmup 1] [--repeat 1]
        [--workdir DIR] [--seed N] [--write-results]

Issue 7's benchmark: run the suites lakecdc generates from a data contract on the table a
1M-event merge produced, and compare the time with the merge's; target: under 0.5x.

The workload is bench.run's (same cache under ``--workdir``). A lakecdc target preloaded with
its keys is built once (untimed) as ``<workdir>/targets/<workload>/quality-template``. Each run
copies it, applies ``events.json`` (timed: the merge), then runs :func:`lakecdc.check.quality.check_tables` on
the result with the table's contract, twice (each timed): with the GX Data Docs (the default;
``lakecdc check`` and jobs do this) and validating in memory (``data_docs=False``). The contract
is :func:`lakecdc.check.contracts.infer_contract`'s draft of the merged table plus the accepted values
and ranges a reviewer would add (:data:`RULES`), so the suite holds: every column exists (12),
key not null, key unique, the rules (2 ranges, 1 strictly positive, 1 pattern, 2 value sets, row
count) and, outside GX, the schema check and the row-count reconciliation with the merge's run.
Every check must pass. The ratio is check seconds / merge seconds (medians of the timed runs);
the CPU-seconds ratio is reported too: it holds better when other work shares the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from bench.generate import KEY, TABLE, Workload
from bench.run import (
    OtherLoad,
    TreeCpu,
    _lakecdc_apply,
    _lakecdc_preload,
    ensure_workload,
    machine_markdown,
    start_spark,
    workload_markdown,
    write_results,
)

TARGET_RATIO = 0.5
#: accepted values and ranges added to the inferred contract, per column (ODCS v3 property fields)
RULES: dict[str, dict[str, Any]] = {
    "QUANTITY": {"logicalTypeOptions": {"minimum": 1, "maximum": 50}},
    "PRIORITY": {"logicalTypeOptions": {"minimum": 1, "maximum": 5}},
    "UNIT_PRICE": {"logicalTypeOptions": {"exclusiveMinimum": 0}},
    "ORDER_DATE": {"logicalTypeOptions": {"pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
    "STATUS": {"quality": [{"metric": "invalidValues", "mustBe": 0, "arguments": {"validValues": [
        "NEW", "PAID", "PACKED", "SHIPPED", "DELIVERED", "CANCELLED", "RETURNED"]}}]},
    "CHANNEL": {"quality": [{"metric": "invalidValues", "mustBe": 0, "arguments": {"validValues": [
        "WEB", "STORE", "PHONE", "PARTNER"]}}]},
}
TABLE_RULES = [{"metric": "rowCount", "mustBeGreaterThan": 0}]


@dataclass
class Outcome:
    """Seconds (wall and CPU) of each run's merge and checks."""

    merge: list[float] = field(default_factory=list)
    merge_cpu: list[float] = field(default_factory=list)
    docs: list[float] = field(default_factory=list)
    docs_cpu: list[float] = field(default_factory=list)
    memory: list[float] = field(default_factory=list)
    memory_cpu: list[float] = field(default_factory=list)
    checks: int = 0
    failed: list[str] = field(default_factory=list)

    def median(self, name: str) -> float:
        return statistics.median(getattr(self, name))


def contract_yaml(path: Path, spark: SparkSession) -> str:
    """The merged table's inferred ODCS contract with :data:`RULES` added."""
    from lakecdc.check.contracts import infer_contract
    from lakecdc.merge.delta_rs import DeltaRsEngine

    contract = infer_contract(TABLE, DeltaRsEngine().schema(str(path)), (KEY,))
    obj = contract["schema"][0]
    for prop in obj["properties"]:
        prop.update(RULES.get(prop["name"], {}))
    obj["quality"] = TABLE_RULES
    return yaml.safe_dump(contract, sort_keys=False)


def _timed(run: Any, *args: Any, **kwargs: Any) -> tuple[Any, float, float]:
    started, cpu = time.perf_counter(), TreeCpu()
    value = run(*args, **kwargs)
    return value, time.perf_counter() - started, cpu.since()


def measure(spark: SparkSession, workload: Workload, scratch: Path, warmup: int, repeat: int,
            say: Any = print) -> Outcome:
    """Preload the template once, then ``warmup + repeat`` runs of merge, checks with Data Docs,
    checks in memory; only the last ``repeat`` count."""
    from lakecdc.check.contracts import load_contracts
    from lakecdc.check.quality import check_tables

    template, target, contracts_dir = scratch / "quality-template", scratch / "quality-run", scratch / "contracts"
    if not (template / ".preloaded").exists():
        shutil.rmtree(template, ignore_errors=True)
        started = time.perf_counter()
        _lakecdc_preload(spark, workload, template)
        (template / ".preloaded").touch()
        say(f"  preloaded {workload.keys:,} keys in {time.perf_counter() - started:.1f} s (not timed)")
    outcome = Outcome()
    for attempt in range(1, warmup + repeat + 1):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(template, target)
        table, merge, merge_cpu = _timed(_lakecdc_apply, spark, workload.events_json, target)
        shutil.rmtree(contracts_dir, ignore_errors=True)
        contracts_dir.mkdir(parents=True)
        (contracts_dir / f"{TABLE}.yaml").write_text(contract_yaml(table, spark))
        contracts = load_contracts(contracts_dir)
        with_docs, docs, docs_cpu = _timed(check_tables, str(target), contracts, spark=spark)
        in_memory, memory, memory_cpu = _timed(check_tables, str(target), contracts, spark=spark, data_docs=False)
        if not (target / "_lakecdc" / "data_docs" / "index.html").exists():
            raise RuntimeError("check_tables wrote no Data Docs")
        kind = "warm-up" if attempt <= warmup else "timed"
        say(f"  run {attempt}/{warmup + repeat} ({kind}): merge {merge:.2f} s ({merge_cpu:.1f} CPU s), checks with "
            f"Data Docs {docs:.2f} s ({docs_cpu:.1f} CPU s), in memory {memory:.2f} s ({memory_cpu:.1f} CPU s); "
            f"ratio {docs / merge:.2f} / {memory / merge:.2f}")
        if attempt > warmup:
            for name, value in (("merge", merge), ("merge_cpu", merge_cpu), ("docs", docs), ("docs_cpu", docs_cpu),
                                ("memory", memory), ("memory_cpu", memory_cpu)):
                getattr(outcome, name).append(value)
        outcome.checks = len(with_docs)
        outcome.failed = [r.line() for r in [*with_docs, *in_memory] if not r.success]
    return outcome


def table_markdown(outcome: Outcome) -> str:
    merge, merge_cpu = outcome.median("merge"), outcome.median("merge_cpu")
    rows = ["| step | seconds | CPU s | ratio to the merge | CPU ratio |", "|---|---:|---:|---:|---:|",
            f"| merge (`lakecdc.apply`) | {merge:.2f} | {merge_cpu:.1f} | 1.00 | 1.00 |"]
    for label, name in (("checks with Data Docs (default)", "docs"), ("checks in memory (`data_docs=False`)", "memory")):
        seconds, cpu = outcome.median(name), outcome.median(f"{name}_cpu")
        rows.append(f"| {label} | {seconds:.2f} | {cpu:.1f} | {seconds / merge:.2f} | "
                    f"{cpu / merge_cpu if merge_cpu else float('nan'):.2f} |")
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs; medians are reported (default 1)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--write-results", action="store_true", help="record the table in bench/RESULTS.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, spark: SparkSession | None = None) -> dict[str, Any]:
    """Run the benchmark; returns the :class:`Outcome`, the ratios and the Markdown table."""
    import pyarrow as pa

    args = parse_args(argv)
    pa.set_cpu_count(2)  # as bench.run
    say = lambda line: print(line, flush=True)  # noqa: E731
    workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
    own = spark is None
    started = time.perf_counter()
    spark = spark or start_spark()
    say(f"Spark start-up: {time.perf_counter() - started:.1f} s (not included)")
    heading = f"Quality checks after a merge of {workload.events:,} events over {workload.keys:,} keys"
    say(f"\n== {heading}: {workload_markdown(workload)}")
    scratch = args.workdir / "targets" / workload.directory.name
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        with OtherLoad() as other:
            outcome = measure(spark, workload, scratch, args.warmup, args.repeat, say)
        table = table_markdown(outcome)
        ratio = outcome.median("docs") / outcome.median("merge")
        cpu_ratio = outcome.median("docs_cpu") / outcome.median("merge_cpu") if outcome.median("merge_cpu") else None
        verdict = (f"Checks with Data Docs / merge: {ratio:.2f} ({'meets' if ratio < TARGET_RATIO else 'misses'} the "
                   f"target, under {TARGET_RATIO}); {outcome.checks} checks, "
                   f"{'all passed' if not outcome.failed else f'{len(outcome.failed)} failed'}.")
        load_line = f"Other work took {other.share:.0%} of the machine's CPU time meanwhile."
        say(f"\n{table}\n\n{verdict}\n{load_line}")
        for line in outcome.failed:
            say(f"  {line}")
        if args.write_results:
            when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            command = "python -m bench.quality " + " ".join(sys.argv[1:] if argv is None else argv)
            runs = f"median of {args.repeat} timed runs" if args.repeat > 1 else "one timed run"
            write_results(heading, (
                f"Measured {when}, {runs} after {args.warmup} warm-up run{'s' if args.warmup != 1 else ''}, with "
                f"`{command}` (issue 7's benchmark; see [README.md](README.md#quality-check-overhead-qualitypy)).\n\n"
                f"- Machine: {machine_markdown(spark)}.\n- Workload: {workload_markdown(workload)}.\n- {load_line}\n\n"
                f"{table}\n\n{verdict}\n"))
        return {"outcome": outcome, "ratio": ratio, "cpu_ratio": cpu_ratio, "table": table, "verdict": verdict}
    finally:
        if own:
            spark.stop()


if __name__ == "__main__":
    main()
