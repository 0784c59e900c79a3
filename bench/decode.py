"""Decode throughput per format: each lakecdc decoder beside the parse floor of its encoding.

    python -m bench.decode --events 1000000 --keys 200000 [--formats a,b] [--repeat R] [--warmup W]
        [--workdir DIR] [--seed S] [--write-results]

The workload of :mod:`bench.generate` (``events.json``) is converted once by :mod:`bench.formats`
into every GoldenGate encoding (in a subprocess, cached under the workload's ``formats/``). Then,
in one Python process with one Spark session (``local[2]``), for each encoding:

* **lakecdc**: ``get_decoder(format, options).read(spark, files, staging=...)``, every column
  evaluated by writing the result to Spark's ``noop`` sink, with an ``Observation`` counting the
  rows and the rows whose ``_error`` is set in the same pass (the run fails unless it decoded
  exactly the workload's events, none bad);
* **floor**: the cheapest honest parse of the same bytes (see :data:`FLOORS`; where there are
  several, the fastest counts), also counted.

With several encodings, each one is measured in a Python process and JVM of its own (this
command run again for that encoding alone, its outcome read back), as a job decodes one format:
the JIT compiles what one decoder runs, and a decoder measured after another one in the same JVM
(qlik-json's large generated methods, say) was up to 1.7x slower than alone (canal-json, stop
17). ``--same-jvm`` measures them all in this process, as before. Spark's start-up and a first
job (lakecdc decoding the first 20,000 events of ``events.json``) are timed and reported apart.
Each contender makes ``--warmup`` untimed runs then ``--repeat`` timed ones, the contenders taking
turns (lakecdc, floor, lakecdc, floor, ...: this machine's speed drifts by 20-25% over minutes,
which skewed the ratio when all of lakecdc's runs came before all of the floor's); the median is
reported, with CPU seconds of the process tree (JVM and Python
workers), the peak resident memory of the tree and its peak above the RSS before the run
(helpers of :mod:`bench.run`). ratio = floor seconds / lakecdc seconds; the target is >= 0.33
(lakecdc within 3x of the floor). The CPU ratio (floor CPU seconds / lakecdc CPU seconds) is
shown too: it is less sensitive to other work on the machine, but counts lakecdc's 2 cores
against single-threaded floors.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import io
import json
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pj
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from bench import formats, peers
from bench.formats import Encoded
from bench.generate import SOURCE_SCHEMA, Workload
from bench.run import (
    GIB,
    REPO,
    OtherLoad,
    PeakRss,
    TreeCpu,
    ensure_workload,
    machine_markdown,
    start_spark,
    warmup_file,
    workload_markdown,
    write_results,
)

HEADING = "Decode throughput per format"
TARGET_RATIO = 1 / 3
MB = 1e6


# -- lakecdc -----------------------------------------------------------------------------------------


@dataclass
class Decoded:
    rows: int
    errors: int
    sample_errors: list[str] = field(default_factory=list)


def _observed(seen: Observation, wait: float = 120.0) -> dict | None:
    """The observed metrics, or None when Spark has not delivered them after ``wait`` seconds
    (a daemon thread waits, so a hung ``get`` never keeps the process from exiting)."""
    box: dict[str, dict] = {}
    waiter = threading.Thread(target=lambda: box.update(m=seen.get), daemon=True)
    waiter.start()
    waiter.join(wait)
    return box.get("m")


def noop_counts(df: DataFrame, *counts: Column) -> dict[str, int]:
    """Every column of ``df`` evaluated (Spark's ``noop`` sink), ``counts`` (named aggregates)
    observed in the same pass."""
    seen = Observation("counted")
    df.observe(seen, *counts).write.format("noop").mode("overwrite").save()
    metrics = _observed(seen)
    if metrics is None:  # Observation.get can wait forever (seen in this project): count again
        metrics = df.agg(*counts).first().asDict()
    return {k: int(v) for k, v in metrics.items()}


def lakecdc_decode(spark: SparkSession, decoder: str, files: list[str], options: dict[str, str], staging: Path) -> Decoded:
    """Decode ``files`` with lakecdc, evaluating every column (``noop`` sink); count rows and errors."""
    from lakecdc.decode import get_decoder
    from lakecdc.spark.conf import job_conf

    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with job_conf(spark):
            events = get_decoder(decoder, options).read(spark, files, staging=str(staging))
            metrics = noop_counts(events, F.count(F.lit(1)).alias("rows"), F.count("_error").alias("errors"))
            decoded = Decoded(int(metrics["rows"]), int(metrics["errors"]))
            if decoded.errors:  # not timed in any useful sense: the run is reported as failed
                decoded.sample_errors = [
                    r[0] for r in events.where(F.col("_error").isNotNull()).select("_error").limit(3).collect()
                ]
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return decoded


# -- floors ------------------------------------------------------------------------------------------


def json_row_schema() -> pa.Schema:
    """A row-modeled message: the metadata members, then the columns at the top level."""
    meta = [f for f in peers.arrow_event_schema() if f.name not in ("before", "after")]
    return pa.schema([*meta, *SOURCE_SCHEMA])


def floor_json(schema: pa.Schema) -> Callable[[Encoded], int]:
    def parse(encoded: Encoded) -> int:
        return sum(
            pj.read_json(
                path,
                read_options=pj.ReadOptions(use_threads=True),
                parse_options=pj.ParseOptions(explicit_schema=schema),
            ).num_rows
            for path in encoded.files
        )

    return parse


def floor_delimited(encoded: Encoded) -> int:
    """pyarrow's CSV reader as a plain splitter: no quoting, no escapes, every field a string."""
    fields = 5 + len(SOURCE_SCHEMA)
    names = [f"f{i}" for i in range(fields)]
    rows = 0
    for path in encoded.files:
        rows += pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(use_threads=True, column_names=names),
            parse_options=pcsv.ParseOptions(
                delimiter=formats.FIELD_DELIMITER, quote_char=False, double_quote=False, escape_char=False
            ),
            convert_options=pcsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=False
            ),
        ).num_rows
    return rows


def floor_line_split(encoded: Encoded) -> int:
    """A plain Python line split (one thread)."""
    rows = 0
    for path in encoded.files:
        with open(path, encoding="utf-8", newline="\n") as fh:
            for line in fh:
                line.rstrip("\n").split(formats.FIELD_DELIMITER)
                rows += 1
    return rows


def floor_avro_ocf(encoded: Encoded) -> int:
    """fastavro's reader over the object container file (one thread)."""
    rows = 0
    for path in encoded.files:
        with open(path, "rb") as fh:
            for _record in fastavro.reader(fh):
                rows += 1
    return rows


def count_length_prefixed(files: Sequence[str | Path], schema: Any, skip: int = 0) -> int:
    """fastavro's ``schemaless_reader`` over each message of files of length-prefixed messages
    (4 bytes big-endian each), after ``skip`` header bytes of each message (one thread)."""
    rows = 0
    for path in files:
        data = Path(path).read_bytes()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack_from(">I", data, pos)
            fastavro.schemaless_reader(io.BytesIO(data[pos + 4 + skip : pos + 4 + n]), schema, None)
            pos += 4 + n
            rows += 1
    return rows


def floor_avro_messages(encoded: Encoded) -> int:
    """fastavro's ``schemaless_reader`` over each length-prefixed message (one thread)."""
    avsc = Path(encoded.options["schemaDirectory"]) / f"{formats.TABLE}.avsc"
    return count_length_prefixed(encoded.files, fastavro.parse_schema(json.loads(avsc.read_text())))


def floor_xml(encoded: Encoded) -> int:
    """Each ``<operation>`` document built as an element tree by the standard library's C parser
    (expat and the C TreeBuilder), one Python call per document: the stream is cut after each
    ``</operation>`` with ``bytes.split``. That cut relies on knowing the documents (no value holds
    ``</operation>``), which a general reader cannot, so it is a lower bound. One thread."""
    end = b"</operation>"
    rows = 0
    for path in encoded.files:
        rest = b""
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 24):
                *documents, rest = (rest + chunk).split(end)
                for document in documents:
                    ET.fromstring(document + end)
                rows += len(documents)
        if rest.strip():
            raise ValueError(f"{path}: text after the last </operation>")
    return rows


@dataclass(frozen=True)
class Floor:
    name: str
    run: Callable[[Encoded], int]


_JSON = "pyarrow.json.read_json, explicit schema, 2 threads"
_MESSAGES = "fastavro.schemaless_reader per length-prefixed message, 1 thread"
_OCF = "fastavro.reader over the object container file, 1 thread"
#: The floors of each encoding; the ratio is taken against the fastest (median) of them.
FLOORS: dict[str, list[Floor]] = {
    "ogg-json": [Floor(_JSON, floor_json(peers.arrow_event_schema()))],
    "ogg-json-row": [Floor(_JSON, floor_json(json_row_schema()))],
    "ogg-delimited": [
        Floor("Python `for line in f: line.split('\\x01')`, 1 thread", floor_line_split),
        Floor("pyarrow.csv.read_csv as a plain split (no quotes, no escapes, all strings), 2 threads", floor_delimited),
    ],
    "ogg-avro-op": [Floor(_MESSAGES, floor_avro_messages)],
    "ogg-avro-row": [Floor(_MESSAGES, floor_avro_messages)],
    "ogg-avro-op-ocf": [Floor(_OCF, floor_avro_ocf)],
    "ogg-avro-row-ocf": [Floor(_OCF, floor_avro_ocf)],
    "ogg-xml": [
        Floor("xml.etree.ElementTree.fromstring per document (expat, C tree builder), documents cut at "
              "`</operation>`, 1 thread", floor_xml)
    ],
}


# -- measuring ---------------------------------------------------------------------------------------


@dataclass
class Runs:
    """The runs of one contender on one encoding."""

    warmup: int
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak: int = 0
    above_baseline: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.seconds[self.warmup :])

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu[self.warmup :])

    @property
    def first(self) -> float:
        return self.seconds[0]


def _run_once(label: str, run: Callable[[], int], expected: int, runs: Runs, attempt: int, total: int) -> None:
    """One timed run of ``run`` (it must return ``expected``) recorded in ``runs``."""
    gc.collect()
    with PeakRss() as memory:
        started, cpu_started = time.perf_counter(), TreeCpu()
        got = run()
        seconds, cpu = time.perf_counter() - started, cpu_started.since()
    if got != expected:
        raise AssertionError(f"{label}: {got:,} events, expected {expected:,}")
    runs.seconds.append(seconds)
    runs.cpu.append(cpu)
    runs.peak = max(runs.peak, memory.peak)
    runs.above_baseline = max(runs.above_baseline, memory.peak - memory.baseline)
    kind = "warm-up" if attempt <= runs.warmup else "timed"
    print(
        f"  {label} run {attempt}/{total} ({kind}): {seconds:.2f} s ({cpu:.1f} CPU s), "
        f"peak RSS {memory.peak / GIB:.2f} GiB"
    )


def timed(contenders: Mapping[str, Callable[[], int]], expected: int, warmup: int, repeat: int) -> dict[str, Runs]:
    """Run each of ``contenders`` ``warmup + repeat`` times (each run must return ``expected``):
    time, CPU, memory. The contenders take turns, one run each per round, so that a machine whose
    speed drifts over minutes (a shared host: 20-25% here) slows them alike and the ratio holds."""
    runs = {label: Runs(warmup) for label in contenders}
    total = warmup + repeat
    for attempt in range(1, total + 1):
        for label, run in contenders.items():
            _run_once(label, run, expected, runs[label], attempt, total)
    return runs


@dataclass
class Outcome:
    encoded: Encoded
    lakecdc: Runs
    floors: dict[str, Runs]

    @property
    def floor_name(self) -> str:
        """The fastest floor (by median seconds)."""
        return min(self.floors, key=lambda name: self.floors[name].median)

    @property
    def floor(self) -> Runs:
        return self.floors[self.floor_name]

    @property
    def ratio(self) -> float:
        return self.floor.median / self.lakecdc.median

    @property
    def cpu_ratio(self) -> float:
        return self.floor.median_cpu / self.lakecdc.median_cpu if self.lakecdc.median_cpu else float("nan")


def measure(spark: SparkSession, encoded: Encoded, scratch: Path, warmup: int, repeat: int,
            floors: list[Floor] | None = None) -> Outcome:
    """lakecdc and each floor (``floors``, else :data:`FLOORS` of the encoding) on one encoding."""
    files = [str(f) for f in encoded.files]
    staging = scratch / encoded.name

    def decode() -> int:
        decoded = lakecdc_decode(spark, encoded.decoder, files, encoded.options, staging)
        if decoded.errors:
            raise AssertionError(
                f"{encoded.name}: lakecdc marked {decoded.errors:,} of {decoded.rows:,} events bad, e.g. "
                + "; ".join(decoded.sample_errors)
            )
        return decoded.rows

    print(f"\n== {encoded.name}: {encoded.description}; {encoded.bytes / MB:,.1f} MB in {len(files)} file(s)")
    chosen = FLOORS[encoded.name] if floors is None else floors
    contenders: dict[str, Callable[[], int]] = {f"lakecdc {encoded.decoder}": decode}
    contenders.update({f"floor ({floor.name})": (lambda floor=floor: floor.run(encoded)) for floor in chosen})
    runs = timed(contenders, encoded.events, warmup, repeat)
    return Outcome(encoded, runs[f"lakecdc {encoded.decoder}"],
                   {floor.name: runs[f"floor ({floor.name})"] for floor in chosen})


def measure_in_child(encoded: Encoded, args: argparse.Namespace, command: str) -> tuple[Outcome, float, dict]:
    """:func:`measure` of one encoding by this benchmark run again for it alone (a fresh Python
    process and JVM; its output goes to this one's), its outcome read back with the share of the
    machine other work took meanwhile (the child's: this process cannot count its JVM) and the
    child's Spark start-up and first job (``startup``, ``first_job``, ``rows``)."""
    module = command.split()[2]  # "python -m <module> ..."
    out = args.workdir / f"outcome-{encoded.name}.json"
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", module, "--events", str(args.events), "--keys", str(args.keys),
            "--workdir", str(args.workdir), "--seed", str(args.seed), "--formats", encoded.name,
            "--repeat", str(args.repeat), "--warmup", str(args.warmup), "--outcome-json", str(out)]
    subprocess.run(argv, check=True, cwd=REPO)
    (found,) = json.loads(out.read_text())
    runs = {n: Runs(**r) for n, r in found["floors"].items()}
    return Outcome(encoded, Runs(**found["lakecdc"]), runs), float(found["other"]), found["spark"]


# -- reporting ---------------------------------------------------------------------------------------


def table_markdown(outcomes: list[Outcome]) -> str:
    rows = [
        "| format | input MB | lakecdc s | events/s | MB/s | CPU s | first run s | peak RSS | peak above baseline "
        "| floor s | floor CPU s | floor peak above baseline | ratio (floor s / lakecdc s) | CPU ratio | within 3x |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for o in outcomes:
        e, lc, fl = o.encoded, o.lakecdc, o.floor
        rows.append(
            f"| {e.name} | {e.bytes / MB:,.1f} | {lc.median:.2f} | {e.events / lc.median:,.0f} "
            f"| {e.bytes / MB / lc.median:,.1f} | {lc.median_cpu:.1f} | {lc.first:.2f} | {lc.peak / GIB:.2f} GiB "
            f"| {lc.above_baseline / GIB:.2f} GiB | {fl.median:.2f} | {fl.median_cpu:.1f} "
            f"| {fl.above_baseline / GIB:.2f} GiB | {o.ratio:.2f} | {o.cpu_ratio:.2f} "
            f"| {'yes' if o.ratio >= TARGET_RATIO else '**no**'} |"
        )
    return "\n".join(rows)


def details_markdown(outcomes: list[Outcome]) -> str:
    lines = []
    for o in outcomes:
        e = o.encoded
        line = f"- **{e.name}** ({e.decoder}): {e.description}; options {_shown(e)}. Floor: {o.floor_name}."
        for name, runs in o.floors.items():
            if name != o.floor_name:
                line += (
                    f" Also measured: {name}, {runs.median:.2f} s ({runs.median_cpu:.1f} CPU s; ratio "
                    f"{runs.median / o.lakecdc.median:.2f})."
                )
        lines.append(line)
    return "\n".join(lines)


def _shown(encoded: Encoded) -> str:
    """The decoder options as given, paths relative to the encoding's directory."""
    if not encoded.options:
        return "none"
    prefix = f"{encoded.directory}/"
    return ", ".join(f"`{k}={v.removeprefix(prefix)}`" for k, v in encoded.options.items())


def ensure_formats(workload: Workload, workdir: Path, seed: int, names: list[str]) -> list[Encoded]:
    """The encodings, converted by a subprocess first when any is absent (keeping this process lean)."""
    missing = [n for n in names if formats.load(workload, n) is None]
    if missing:
        command = [sys.executable, "-m", "bench.formats", "--events", str(workload.events), "--keys", str(workload.keys)]
        command += ["--seed", str(seed), "--workdir", str(workdir), "--formats", ",".join(missing)]
        subprocess.run(command, check=True, cwd=REPO)
    loaded = [formats.load(workload, n) for n in names]
    if any(e is None for e in loaded):
        raise RuntimeError("bench.formats did not produce every encoding")
    return loaded  # type: ignore[return-value]


def parse_decode_args(argv: list[str] | None, description: str, encodings: Sequence[str], *,
                      convert_only: bool = False) -> argparse.Namespace:
    """The command line of the decode benchmarks (this module's, :mod:`bench.converted`'s)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument("--formats", default=",".join(encodings), help="comma-separated encodings, in order")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per contender; the median is reported")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per contender before the timed ones")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--write-results", action="store_true", help="record the table in bench/RESULTS.md")
    parser.add_argument("--same-jvm", action="store_true",
                        help="measure every format in this process's Spark JVM (default: one fresh process each)")
    parser.add_argument("--outcome-json", type=Path, help=argparse.SUPPRESS)  # (a child's outcome, for its parent)
    if convert_only:
        parser.add_argument("--convert-only", action="store_true", help="only build the encodings (cached)")
    args = parser.parse_args(argv)
    unknown = set(args.formats.split(",")) - set(encodings)
    if unknown:
        parser.error(f"unknown formats {sorted(unknown)}; choose from {list(encodings)}")
    if args.repeat < 1 or args.warmup < 0:
        parser.error("--repeat must be at least 1 and --warmup at least 0")
    return args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_decode_args(argv, __doc__.split("\n\n")[0], list(formats.ENCODINGS))


def run_and_report(
    workload: Workload, encodings: list[Encoded], args: argparse.Namespace, *, command: str, heading: str,
    floors: Callable[[Encoded], list[Floor]] | None = None, intro: str = "",
) -> list[Outcome]:
    """Start Spark, time a first job, measure every encoding (``floors`` of each, else
    :data:`FLOORS`), print the table and, with ``args.write_results``, write the ``heading``
    section of RESULTS.md (``intro``: what the encodings are, first in its text).

    With several encodings (and not ``--same-jvm``) each is measured by a child process of its
    own, which starts its own Spark: this process starts none, and reports the first child's."""
    children = len(encodings) > 1 and not args.same_jvm
    spark = None
    if children:
        print(f"\nWorkload: {workload_markdown(workload)}")
        print("Each format is measured in a process and JVM of its own.")
        measured = [measure_in_child(e, args, command) for e in encodings]
        outcomes, other_share = [o for o, _, _ in measured], max(share for _, share, _ in measured)
        first_spark = measured[0][2]
        spark_line = ("Each format was measured in a process and JVM of its own. In the first of them: "
                      + _spark_line(**first_spark))
    else:
        started = time.perf_counter()
        spark = start_spark()
        startup = time.perf_counter() - started
        scratch = args.workdir / "decode-staging"
        started = time.perf_counter()
        first = lakecdc_decode(spark, "ogg-json", [str(warmup_file(workload, args.workdir))], {}, scratch / "warmup")
        first_spark = {"startup": startup, "first_job": time.perf_counter() - started, "rows": first.rows}
        spark_line = _spark_line(**first_spark)
        print(spark_line)
        print(f"\nWorkload: {workload_markdown(workload)}")
        with OtherLoad() as other:
            outcomes = [measure(spark, e, scratch, args.warmup, args.repeat, None if floors is None else floors(e))
                        for e in encodings]
        other_share = other.share
    machine = machine_markdown(spark)
    if args.outcome_json:
        args.outcome_json.write_text(json.dumps([
            {"lakecdc": asdict(o.lakecdc), "floors": {n: asdict(r) for n, r in o.floors.items()}, "other": other_share,
             "spark": first_spark}
            for o in outcomes
        ]))
    table = table_markdown(outcomes)
    details = details_markdown(outcomes)
    load_line = f"Other work took {other_share:.0%} of the machine's CPU time meanwhile" + (
        " (the most any format's process saw)." if children else "."
    )
    print(f"\n{table}\n\n{details}\n\n{load_line}")
    if args.write_results:
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        runs = f"median of {args.repeat} timed runs" if args.repeat > 1 else "one timed run"
        runs += f" after {args.warmup} warm-up run{'s' if args.warmup != 1 else ''} per contender"
        lead = f"{intro}; every" if intro else "Every"
        write_results(
            heading,
            f"Measured {when}, {runs}, with `{command}`. {lead} lakecdc run decoded exactly "
            f"{workload.events:,} events, none with `_error`; ratio = floor seconds / lakecdc seconds, "
            f"target >= 0.33 (within 3x).\n\n"
            f"- Machine: {machine}.\n- Workload: {workload_markdown(workload)}.\n- {spark_line}\n- {load_line}\n\n"
            f"{table}\n\n{details}\n",
        )
    if spark is not None:
        spark.stop()
    return outcomes


def _spark_line(startup: float, first_job: float, rows: int) -> str:
    return (f"Spark start-up (fresh JVM): {startup:.1f} s; first job (lakecdc decoding {rows:,} events of "
            f"events.json to the noop sink): {first_job:.1f} s. Neither is included below.")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    pa.set_cpu_count(2)  # the 2 cores Spark's local[2] gets
    args.workdir.mkdir(parents=True, exist_ok=True)
    workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
    encodings = ensure_formats(workload, args.workdir, args.seed, args.formats.split(","))
    command = "python -m bench.decode " + " ".join(sys.argv[1:] if argv is None else argv)
    run_and_report(workload, encodings, args, command=command, heading=HEADING)


if __name__ == "__main__":
    main()
