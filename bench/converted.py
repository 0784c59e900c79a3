"""Decode benchmarks of *converted* encodings: the workload's events rewritten in another vendor's
format, then each decoded by lakecdc beside its floor (shared by :mod:`bench.debezium` and
:mod:`bench.alibaba_qlik`).

A benchmark module declares its encodings (:class:`Encoding`: a name, the lakecdc decoder, a
``build(events_json, out_dir)`` writing the files and returning their names and the decoder's
options) and the floors of each, and hands them to a :class:`ConvertedSuite`, which provides:

* **caching** (:meth:`ConvertedSuite.load` / :meth:`ConvertedSuite.encode`): each encoding under
  ``<workload>/formats/<encoding>/`` with a ``manifest.json`` (written last, stamped with the
  suite's ``version`` and the size and mtime of ``events.json``: a stale or partial directory is
  rebuilt). Decoder options whose name ends in ``Directory`` are stored relative to the
  encoding's directory;
* **conversion in a subprocess** (:meth:`ConvertedSuite.ensure`: ``python -m <module>
  --convert-only ...``), so that the measuring process stays lean;
* **the command line and the run** (:meth:`ConvertedSuite.main`): the options of
  :mod:`bench.decode` plus ``--convert-only``; measuring and reporting are
  :func:`bench.decode.run_and_report`'s.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.json as pj

from bench.decode import MB, Floor, parse_decode_args, run_and_report
from bench.formats import Encoded, encoded_dir
from bench.generate import Workload, workload_dir
from bench.run import REPO, ensure_workload

_FLUSH = 1 << 22
_JSON_FLOOR = "pyarrow.json.read_json, explicit schema, 2 threads"

#: ``build(events_json, out_dir) -> (file names, decoder options)``
Build = Callable[[Path, Path], tuple[list[str], dict[str, str]]]


@dataclass(frozen=True)
class Encoding:
    """One converted encoding: how it is built and which decoder reads it."""

    name: str
    decoder: str
    description: str
    build: Build


@dataclass(frozen=True)
class ConvertedSuite:
    """The encodings and floors of one benchmark module (see the module docstring)."""

    module: str  # e.g. "bench.debezium": run as ``python -m <module>``
    heading: str  # the section of RESULTS.md
    version: int  # bumped whenever an encoding's bytes change, so that caches are rebuilt
    encodings: dict[str, Encoding]
    floors: dict[str, list[Floor]]
    #: what the results say of the conversion, e.g. "The workload's events converted to ... (bench/x.py)"
    converted_as: str
    description: str = ""  # the command line's (the module docstring's first paragraph)

    # -- caching -----------------------------------------------------------------------------------

    def _stamp(self, workload: Workload) -> dict[str, int]:
        stat = workload.events_json.stat()
        return {"version": self.version, "source_bytes": stat.st_size, "source_mtime_ns": stat.st_mtime_ns}

    def load(self, workload: Workload, name: str) -> Encoded | None:
        """The cached encoding ``name`` of ``workload``, None when absent or stale."""
        directory = encoded_dir(workload, name)
        manifest_path = directory / "manifest.json"
        if not manifest_path.exists():
            return None
        manifest = json.loads(manifest_path.read_text())
        if any(manifest.get(k) != v for k, v in self._stamp(workload).items()):
            return None
        encoding = self.encodings[name]
        options = {k: str(directory / v) if k.endswith("Directory") else v for k, v in manifest["options"].items()}
        return Encoded(name=name, decoder=encoding.decoder, description=encoding.description, directory=directory,
                       files=tuple(directory / f for f in manifest["files"]), options=options,
                       events=manifest["events"], seconds=manifest["seconds"])

    def encode(self, workload: Workload, names: list[str], *, say: Callable[[str], None] = print) -> list[Encoded]:
        """The encodings ``names`` of ``workload``, built (and cached) when absent or stale."""
        out = []
        for name in names:
            cached = self.load(workload, name)
            if cached is None:
                directory = encoded_dir(workload, name)
                staging = directory.with_name(directory.name + ".partial")
                shutil.rmtree(staging, ignore_errors=True)
                staging.mkdir(parents=True)
                started = time.perf_counter()
                files, options = self.encodings[name].build(workload.events_json, staging)
                seconds = time.perf_counter() - started
                manifest = {**self._stamp(workload), "format": name, "decoder": self.encodings[name].decoder,
                            "files": files, "options": options, "events": workload.events,
                            "seconds": round(seconds, 2)}
                (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
                shutil.rmtree(directory, ignore_errors=True)
                os.replace(staging, directory)
                cached = self.load(workload, name)
                assert cached is not None
                say(f"  {name}: {cached.bytes / MB:,.1f} MB in {seconds:.1f} s ({directory})")
            out.append(cached)
        return out

    def ensure(self, workload: Workload, workdir: Path, seed: int, names: list[str]) -> list[Encoded]:
        """The encodings, converted by a subprocess first when any is absent (keeping this process lean)."""
        missing = [n for n in names if self.load(workload, n) is None]
        if missing:
            command = [sys.executable, "-m", self.module, "--convert-only", "--events", str(workload.events),
                       "--keys", str(workload.keys), "--seed", str(seed), "--workdir", str(workdir),
                       "--formats", ",".join(missing)]
            subprocess.run(command, check=True, cwd=REPO)
        loaded = [self.load(workload, n) for n in names]
        if any(e is None for e in loaded):
            raise RuntimeError(f"{self.module} did not produce every encoding")
        return loaded  # type: ignore[return-value]

    # -- the command line ----------------------------------------------------------------------------

    def main(self, argv: list[str] | None = None) -> None:
        """``python -m <module>``: convert (when needed), measure, report."""
        args = parse_decode_args(argv, self.description, list(self.encodings), convert_only=True)
        names = args.formats.split(",")
        args.workdir.mkdir(parents=True, exist_ok=True)
        if args.convert_only:
            workload = Workload(workload_dir(args.workdir, args.events, args.keys, args.seed), args.events, args.keys)
            if not workload.exists():
                raise SystemExit(f"no workload at {workload.directory}: generate it first (python -m bench.generate)")
            self.encode(workload, names)
            return
        pa.set_cpu_count(2)  # the 2 cores Spark's local[2] gets
        workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
        encodings = self.ensure(workload, args.workdir, args.seed, names)
        command = f"python -m {self.module} " + " ".join(sys.argv[1:] if argv is None else argv)
        run_and_report(workload, encodings, args, command=command, heading=self.heading,
                       floors=lambda e: self.floors[e.name], intro=self.converted_as)


# -- converting: reading the workload, writing messages ------------------------------------------------


def gg_messages(events_json: Path) -> Iterator[dict[str, Any]]:
    """The workload's GoldenGate messages, numbers with a fraction as :class:`~decimal.Decimal`."""
    with events_json.open(encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line, parse_float=Decimal)


def dump(value: Any) -> str:
    """Compact JSON text, non-ASCII kept as UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def op_ts_micros(op_ts: str) -> int:
    """``2024-01-01 00:00:00.001000`` (UTC) as microseconds since 1970."""
    when = dt.datetime.strptime(op_ts, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp()) * 1_000_000 + when.microsecond


def current_ms(current_ts: str) -> int:
    """``2024-01-01T00:00:01.503000`` (UTC) as milliseconds since 1970."""
    when = dt.datetime.strptime(current_ts, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp()) * 1000 + when.microsecond // 1000


def whole_row(message: dict[str, Any]) -> dict[str, Any] | None:
    """The whole new row of an insert or update (a partial after image laid over the complete
    before image, as sources that write whole rows have it); None for a delete."""
    if message["op_type"] == "D":
        return None
    if message["op_type"] == "U":
        return {**message["before"], **message["after"]}
    return dict(message["after"])


class LengthPrefixed:
    """Writes Avro messages to a file, each preceded by its length (4 bytes, big-endian), as a
    Kafka topic dump holds them."""

    def __init__(self, path: Path) -> None:
        self.fh = path.open("wb")
        self.buffer = io.BytesIO()

    def write(self, parsed: Any, record: Any, header: bytes = b"") -> None:
        """One message: ``header`` (e.g. Confluent's magic byte and schema id), then ``record``'s
        binary encoding by the parsed schema."""
        start = self.buffer.tell()
        self.buffer.write(b"\0\0\0\0" + header)
        fastavro.schemaless_writer(self.buffer, parsed, record)
        end = self.buffer.tell()
        self.buffer.seek(start)
        self.buffer.write(struct.pack(">I", end - start - 4))
        self.buffer.seek(end)
        if end >= _FLUSH:
            self.fh.write(self.buffer.getbuffer())
            self.buffer = io.BytesIO()

    def __enter__(self) -> LengthPrefixed:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.fh.write(self.buffer.getbuffer())
        self.fh.close()


# -- floors -----------------------------------------------------------------------------------------------


def floor_json(schema: pa.Schema, member: str | None = None, *, label: str = _JSON_FLOOR) -> Floor:
    """pyarrow's JSON reader with an explicit schema (members it does not name skipped, not parsed
    into values); ``member``: the records are that member of each line (e.g. ``payload``)."""
    explicit = pa.schema([(member, pa.struct(list(schema)))]) if member else schema

    def parse(encoded: Encoded) -> int:
        return sum(
            pj.read_json(
                path,
                read_options=pj.ReadOptions(use_threads=True, block_size=1 << 24),
                parse_options=pj.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="ignore"),
            ).num_rows
            for path in encoded.files
        )

    return Floor(label, parse)
