"""How fast ``qlik-json`` lines can be parsed at all, exactly, beside issue 5's floor.

    python -m bench.parse_floor --events 1000000 --keys 200000 [--repeat 3] [--workdir DIR] [--seed S]

Issue 5 asks each decoder to run within 3x of its floor; for ``qlik-json`` the floor is
``pyarrow.json.read_json`` with an explicit schema (:mod:`bench.alibaba_qlik`), which types every
number on the way (an ``INT8`` above 2**53 or a ``12.50`` comes out changed) and needs no more of a
line than its first value. A decoder must keep each value's text exactly as written and refuse a
line that holds more than one JSON value. This command times, in one process with one Spark
session (``local[2]``), contenders taking turns round after round (the first round a warm-up),
each reading the benchmark's ``qlik-json`` file and counting its messages, nothing decoded:

* **floor**: issue 5's floor (``pyarrow.json.read_json``, explicit schema, 2 threads);
* **spark-bare**: Spark's JSON file source over the file as it is, exact strings, the envelope with
  the images as ``map<string,string>`` (what tells a missing column from a NULL), to the ``noop``
  sink: the least lakecdc's reader could cost in Spark, were a line's trailing values ignored;
* **spark-bare-images**: the same parse, then only the two images with the ``columnMask``
  applied (a column whose bit is 0 left out; no check, no source map, no headers, no ordering
  columns): about the least a correct decode costs after that parse;
* **spark-staged**: each line staged as ``{"m":[<line>]}`` and then parsed as above (what
  lakecdc's reader does, so that a line of two values is caught): staging plus parse;
* **msgspec**: the file cut in two at line ends, each half parsed in a process of its own by
  msgspec's ``decode_lines`` (a typed envelope, images as exact values: numbers keep their text),
  nothing built from the result: the least an exact parse in Python workers costs (it reads a
  stream of values: like spark-bare, it does not check one value per line);
* **msgspec-images**: the same, then the two images with the ``columnMask`` applied built as
  Arrow maps in the workers (not sent anywhere);
* **msgspec-images-spark**: the same in Spark's Python workers (``mapInArrow``), the images handed
  to Spark (``noop`` sink): the least the Python route's decode costs inside Spark;
* **lakecdc**: ``qlik-json`` decoded whole (:func:`bench.decode.lakecdc_decode`).

Prints each contender's runs, median and ratio (floor seconds / contender seconds) and the
budget, 3x the floor. A parse alone above the budget leaves no room for decoding in that route.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import multiprocessing
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bench import alibaba_qlik
from bench.decode import lakecdc_decode, noop_counts, timed
from bench.fold_floor import rounds_parser
from bench.formats import Encoded
from bench.run import ensure_workload, start_spark
from lakecdc.decode import get_decoder
from lakecdc.decode.files import lines
from lakecdc.decode.jsontext import Num
from lakecdc.decode.qlik import sql as qlik_sql
from lakecdc.decode.qlik.catalog import Catalog
from lakecdc.decode.qlik.masks import mask_bits

FORMAT = "qlik-json"
TARGET = 3.0
_CHUNK = 1 << 24


# -- the exact parse in Python workers ------------------------------------------------------------------------


class _Headers(msgspec.Struct):
    operation: str | None = None
    changeSequence: str | None = None  # noqa: N815 (Replicate's names)
    timestamp: str | None = None
    streamPosition: str | None = None  # noqa: N815
    transactionId: str | None = None  # noqa: N815
    changeMask: str | None = None  # noqa: N815
    columnMask: str | None = None  # noqa: N815
    transactionEventCounter: int | None = None  # noqa: N815
    transactionLastEvent: bool | None = None  # noqa: N815


class _Message(msgspec.Struct):
    data: dict[str, Any] | None = None
    beforeData: dict[str, Any] | None = None  # noqa: N815
    headers: _Headers | None = None


class Envelope(msgspec.Struct):
    """Replicate's envelope as msgspec reads it (images untyped: integers exact, others as text)."""

    magic: str | None = None
    type: str | None = None
    messageSchemaId: str | None = None  # noqa: N815
    message: _Message | None = None


ENVELOPE_DECODER = msgspec.json.Decoder(Envelope, float_hook=Num)


def halves(path: str, parts: int = 2) -> list[tuple[str, int, int]]:
    """``(path, start, end)`` byte ranges of about equal size; a range owns the lines that start in it."""
    size = os.path.getsize(path)
    step = -(-size // parts)
    return [(path, i * step, min(size, (i + 1) * step)) for i in range(parts) if i * step < size]


def _text(value: Any) -> str | None:
    """A parsed value as the text an image holds (integers and booleans as JSON writes them)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def image_arrays(envelopes: list[Envelope]) -> tuple[pa.Array, pa.Array]:
    """``data`` and ``beforeData`` of ``envelopes`` as Arrow maps, each without the columns whose
    ``columnMask`` bit is 0 (bit ``i`` = the image's ``i``-th member: the benchmark writes them in
    ordinal order)."""
    out = []
    for which in ("data", "beforeData"):
        offsets, keys, values, null = [0], [], [], []
        for envelope in envelopes:
            message = envelope.message
            image = getattr(message, which) if message is not None else None
            null.append(image is None)
            if image is not None:
                text = message.headers.columnMask if message.headers is not None else None
                mask = int(text, 16) if text else -1
                for i, (k, v) in enumerate(image.items()):
                    if mask >> i & 1:
                        keys.append(k)
                        values.append(_text(v))
            offsets.append(len(keys))
        out.append(pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.string()),
                                           pa.array(values, pa.string()), mask=pa.array(null, pa.bool_())))
    return out[0], out[1]


def _chunks(part: tuple[str, int, int]) -> Iterator[bytes]:
    """The whole lines that start in ``part``, about :data:`_CHUNK` bytes at a time."""
    path, start, end = part
    with open(path, "rb") as fh:
        at = start
        if start:  # the line holding byte start - 1 started before this range: the previous one's
            fh.seek(start - 1)
            at = start - 1 + len(fh.readline())
        while at < end:
            chunk = fh.read(min(_CHUNK, end - at))
            if not chunk:
                break
            at += len(chunk)
            if not chunk.endswith(b"\n"):  # a line started here and ends after: this range's
                rest = fh.readline()
                chunk += rest
                at += len(rest)
            yield chunk


def count_exact(part: tuple[str, int, int], images: bool = False) -> int:
    """The messages whose line starts in ``part``, parsed by msgspec; with ``images``, their two
    images built as Arrow maps (:func:`image_arrays`), then dropped."""
    n = 0
    for chunk in _chunks(part):
        envelopes = ENVELOPE_DECODER.decode_lines(chunk)
        if images:
            image_arrays(envelopes)
        n += len(envelopes)
    return n


IMAGES = T.StructType([T.StructField("data", T.MapType(T.StringType(), T.StringType())),
                       T.StructField("before", T.MapType(T.StringType(), T.StringType()))])


def _image_batches(batches: Iterator[pa.RecordBatch], *, ranges: list[tuple[str, int, int]]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for i in batch.column("id").to_pylist():
            for chunk in _chunks(ranges[i]):
                data, before = image_arrays(ENVELOPE_DECODER.decode_lines(chunk))
                yield pa.RecordBatch.from_arrays([data, before], names=["data", "before"])


# -- the contenders ---------------------------------------------------------------------------------------------


def spark_bare(spark: SparkSession, files: list[str]) -> int:
    """Spark's JSON file source over ``files`` as they are (exact strings), to the noop sink."""
    with lines.exact_json_strings(spark):
        parsed = spark.read.schema(qlik_sql.ENVELOPE).json(files)
        return noop_counts(parsed, F.count(F.lit(1)).alias("rows"))["rows"]


def masked(image: Column, col: Column, ordinals: list[int]) -> Column:
    """``image`` (keys in ordinal order) without the columns whose bit of ``col`` is 0; whole when
    every bit is set or ``col`` is NULL. (A lambda over the entries: of the forms tried, the one
    whose cost holds when other columns share its generated code; lakecdc's array concatenation,
    measured alone, costs more here and no less inside its decode.)"""
    shifts = F.array(*[F.lit(o - 1) for o in ordinals])
    every = sum(1 << (o - 1) for o in ordinals)
    kept = F.map_from_entries(F.filter(
        F.map_entries(image), lambda _e, i: F.call_function("shiftright", col, shifts[i]).bitwiseAND(F.lit(1)) == 1))
    return F.when(col.isNull() | (col.bitwiseAND(F.lit(every)) == F.lit(every)), image).otherwise(kept)


def spark_bare_images(spark: SparkSession, files: list[str], catalog: Catalog) -> int:
    """:func:`spark_bare`, then the two images with the ``columnMask`` applied (:func:`masked`,
    the mask read by lakecdc's :func:`~lakecdc.decode.qlik.masks.mask_bits`), nothing else."""
    ((_sid, tv),) = qlik_sql.eligible(catalog)
    ordinals = [c.ordinal for c in tv.columns]
    with lines.exact_json_strings(spark):
        parsed = spark.read.schema(qlik_sql.ENVELOPE).json(files)
        message = parsed["message"]
        text = message["headers"]["columnMask"]
        value, _ok = mask_bits(text, tv.top_ordinal)
        col = F.when(text.isNotNull() & (text != ""), value)
        images = parsed.select(masked(message["data"], col, ordinals).alias("data"),
                               masked(message["beforeData"], col, ordinals).alias("before"))
        return noop_counts(images, F.count(F.lit(1)).alias("rows"))["rows"]


def spark_staged(spark: SparkSession, files: list[str], staging: Path) -> int:
    """Every line staged as ``{"m":[<line>]}``, then parsed by Spark's JSON file source."""
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with lines.exact_json_strings(spark):
            parsed = lines.read_json(spark, files, qlik_sql.WRAPPED, staging=str(staging), wrap=qlik_sql.WRAP)
            return noop_counts(parsed, F.count(F.lit(1)).alias("rows"))["rows"]
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def msgspec_parse(pool: concurrent.futures.Executor, files: list[str], parts: int = 2, *, images: bool = False) -> int:
    """The files cut at line ends into ``parts`` ranges per file, each parsed in a worker process
    (with ``images``: the images built too, :func:`count_exact`)."""
    ranges = [r for f in files for r in halves(f, parts)]
    return sum(pool.map(functools.partial(count_exact, images=images), ranges))


def msgspec_spark(spark: SparkSession, files: list[str], parts: int = 2) -> int:
    """:func:`count_exact` with images in Spark's Python workers (``mapInArrow``, a range each),
    the images handed to Spark and written to the noop sink."""
    ranges = [r for f in files for r in halves(f, parts)]
    rows = spark.range(0, len(ranges), 1, len(ranges)).mapInArrow(
        functools.partial(_image_batches, ranges=ranges), IMAGES)
    return noop_counts(rows, F.count(F.lit(1)).alias("rows"))["rows"]


def contenders(spark: SparkSession, encoded: Encoded, scratch: Path,
               pool: concurrent.futures.Executor) -> dict[str, Callable[[], int]]:
    files = [str(f) for f in encoded.files]
    floor = alibaba_qlik.FLOORS[FORMAT][0]
    decoder = get_decoder(encoded.decoder, encoded.options)
    catalog = decoder.catalog(spark, decoder.inputs(files), staging=str(scratch / "catalog"))
    return {
        "floor": lambda: floor.run(encoded),
        "spark-bare": functools.partial(spark_bare, spark, files),
        "spark-bare-images": functools.partial(spark_bare_images, spark, files, catalog),
        "spark-staged": functools.partial(spark_staged, spark, files, scratch / "staged"),
        "msgspec": functools.partial(msgspec_parse, pool, files),
        "msgspec-images": functools.partial(msgspec_parse, pool, files, images=True),
        "msgspec-images-spark": functools.partial(msgspec_spark, spark, files),
        "lakecdc": lambda: lakecdc_decode(spark, encoded.decoder, files, encoded.options, scratch / "lakecdc").rows,
    }


def measure(spark: SparkSession, encoded: Encoded, scratch: Path, repeat: int,
            pool: concurrent.futures.Executor) -> dict[str, list[float]]:
    """Time the contenders (:func:`bench.decode.timed`: turns, each run must count
    ``encoded.events``; the first of ``repeat`` rounds a warm-up); print medians and ratios;
    return the counted runs' seconds by name."""
    warmup = 1 if repeat > 1 else 0
    runs = timed(contenders(spark, encoded, scratch, pool), encoded.events, warmup, repeat - warmup)
    seconds = {name: r.seconds[warmup:] for name, r in runs.items()}
    floor = runs["floor"].median
    print(f"\n{FORMAT}: {encoded.events:,} messages, {encoded.bytes / 1e6:,.1f} MB; one process, median of "
          f"{repeat - warmup}; budget (within {TARGET:g}x of the floor): {TARGET * floor:.2f} s")
    print("| contender | seconds (runs) | ratio (floor s / s) | within the budget |\n|---|---:|---:|---|")
    for name, r in runs.items():
        shown = ", ".join(f"{x:.2f}" for x in seconds[name])
        print(f"| {name} | {r.median:.2f} ({shown}) | {floor / r.median:.2f} | "
              f"{'yes' if r.median <= TARGET * floor else 'no'} |")
    return seconds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return rounds_parser(__doc__.split("\n\n")[0]).parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
    (encoded,) = alibaba_qlik.SUITE.ensure(workload, args.workdir, args.seed, [FORMAT])
    spark = start_spark()
    # (spawned, not forked: this process holds the JVM's gateway threads)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            measure(spark, encoded, args.workdir / "parse-floor", args.repeat, pool)
        finally:
            spark.stop()


if __name__ == "__main__":
    # (run from the module imported by its name: Spark's Python workers then find its functions
    # there, where functions of __main__ would be pickled by value, msgspec's decoder with them)
    from bench import parse_floor

    parse_floor.main()
