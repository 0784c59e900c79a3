"""Reading input files: JSON messages through Spark's JSON source, and finding bad records again.

JSON messages are read by Spark's own JSON file source, split across executors, with
``spark.sql.json.enableExactStringParsing`` on so that a value read as a string keeps the exact
text of the message (``17520.00`` stays ``17520.00``; a 20-digit decimal is not rounded through a
double). Two layouts are told apart per file by its first bytes:

* **lines**: one message per line, read in place;
* **documents**: pretty-printed or concatenated objects (GoldenGate ``prettyPrint=true``,
  ``jsonDelimiter``): split by a scanner that knows JSON strings and staged as one object per
  line, with a map back to the original line numbers. Staging runs in Spark's executors, one
  task per file (:func:`on_executors`), never on the driver.

A format whose messages have no fixed member names (GoldenGate's row-modeled JSON: the columns
are members of the message itself) is read *wrapped* (``wrap="m"``): every file is staged with
each record written as ``{"m":<record>}`` on the line it had, so that Spark's file source parses
the whole message as an exact ``map<string, string>`` (``from_json`` would render numbers
through doubles, a variant drops their trailing zeros). ``wrap="m[]"`` writes ``{"m":[<record>]}``:
read as an array, a line holding more than one JSON value (``{...}, "x": 1``, ``{...} {...}``)
is then a corrupt record or an array of more than one element, where the file source reading
the line bare would take its first value and ignore the rest.

Every row carries ``_file`` (the input path), ``_block`` (start of the split it was read from)
and ``_row`` (an id increasing along the split, over non-blank lines). A record's line number
and raw text are recovered only for bad records, by :func:`locate` reading the file again.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

Layout = Literal["lines", "documents"]
CORRUPT = "_corrupt_record"
EXACT_STRINGS = "spark.sql.json.enableExactStringParsing"
_PEEK_BYTES = 1 << 16
#: Spark's JSON reader option ``maxStringLen``: Jackson's ``StreamReadConstraints.maxStringLength``,
#: 20,000,000 characters by default, above which a value is read as a corrupt record. A change
#: carries whole LOBs, so the limit is lifted to the longest string Java holds.
MAX_STRING_LEN = 2**31 - 1
#: The JSON reader options every lakecdc read passes (``from_json`` included).
JSON_LIMITS = {"maxStringLen": str(MAX_STRING_LEN)}
_WS = b" \t\r\n"
_CHUNK_BYTES = 1 << 24
#: a blank line (JSON whitespace only) after the first of a text without its final newline (the
#: pattern starts with a plain character: Python's engine then jumps from newline to newline)
_BLANK_LINE = re.compile(rb"\n[ \t\r]*(?:\n|$)")
_BLANK_START = re.compile(rb"[ \t\r]*(?:\n|$)")


def exact_json_strings(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """Keep JSON values read as strings exactly as written while the block runs."""
    from lakecdc.spark.conf import job_conf

    return job_conf(spark, {EXACT_STRINGS: "true"})


def detect_layout(path: str) -> Layout:
    """``documents`` when the file's first record is a JSON object spread over several lines."""
    with open(path, "rb") as fh:
        head = fh.read(_PEEK_BYTES).decode("utf-8", errors="replace")
    stripped = head.lstrip()
    if not stripped.startswith("{"):
        return "lines"
    first_line = stripped.split("\n", 1)[0].strip()
    try:
        json.loads(first_line)
    except ValueError:
        return "documents"
    return "lines"


#: A kcat ``-K<sep>`` line: a key (plain text without braces or quotes, e.g. ``****``, or a JSON
#: object) and one separator (``^``, tab, ``|``, ``:``, ``;`` or ``,``) before the value's object.
_KEYED_LINE = re.compile(r'^(?:[^{}\[\]"\r\n]+?|\{[^\r\n]*?\})[\^\t|:;,](?=\s*\{)')


def keyed_lines(path: str) -> bool:
    """Whether ``path`` is a kcat ``-K<sep>`` dump: its first non-blank line is ``KEY<sep>{...}``
    (and not a JSON value by itself)."""
    with open(path, "rb") as fh:
        head = fh.read(_PEEK_BYTES).decode("utf-8", errors="replace")
    first = head.lstrip().split("\n", 1)[0].strip()
    if _KEYED_LINE.match(first) is None:
        return False
    try:
        json.loads(first)
    except ValueError:
        return True
    return False


def stage_keyed_lines(path: str, staging: str, *, wrap: str | None = None) -> str:
    """Write a kcat ``-K<sep>`` dump with each ``KEY<sep>VALUE`` line's value alone (the Kafka key
    dropped; other lines as they are), line for line, so that every record keeps its line number;
    return the staged file's path."""
    out, stamp = _staged_path(path, staging), {**_stamp(path, wrap), "keyed": True}
    head, tail = (x.encode() for x in wrapping(wrap))
    with open(path, "rb") as src, _replacing(out) as dst:
        for raw in src:
            line = raw.decode("utf-8", errors="surrogateescape")
            m = _KEYED_LINE.match(line)
            if m is not None:
                line = line[m.end():]
            body = line.rstrip("\r\n").encode("utf-8", errors="surrogateescape")
            end = b"\n" if raw.endswith(b"\n") else b""
            dst.write((head + body + tail if body.strip(_WS) else body) + end)
    _write_sidecar(out, stamp, None)
    return str(out)


def _staged_path(path: str, staging: str) -> Path:
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:16]
    out = Path(staging) / f"{Path(path).name}.{digest}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def _stamp(path: str, wrap: str | None) -> dict[str, object]:
    """What a staged copy was made from (kept in its sidecar; taken before the file is read)."""
    stat = os.stat(path)
    return {"source": path, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "wrap": wrap}


@contextlib.contextmanager
def _replacing(out: Path) -> Iterator[IO[bytes]]:
    """A file written next to ``out`` and moved over it once whole: a reader, or a second read
    staging the same file at the same time, never meets a part of it."""
    part = out.with_name(f"{out.name}.{os.getpid()}.{os.urandom(4).hex()}.part")
    try:
        with open(part, "wb") as fh:
            yield fh
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)


def _write_sidecar(out: Path, stamp: Mapping[str, object], lines: list[int] | None) -> None:
    with _replacing(Path(f"{out}.lines.json")) as fh:
        fh.write(json.dumps({**stamp, "lines": lines}).encode())


def wrapping(wrap: str | None) -> tuple[str, str]:
    """The text written before and after each record staged with ``wrap`` (``m``: ``{"m":`` and
    ``}``; ``m[]``: ``{"m":[`` and ``]}``; none: nothing)."""
    if not wrap:
        return "", ""
    if wrap.endswith("[]"):
        return f'{{"{wrap[:-2]}":[', "]}"
    return f'{{"{wrap}":', "}"


def stage_documents(path: str, staging: str, *, wrap: str | None = None) -> str:
    """Write the objects of a ``documents`` file one per line; return the staged file's path.

    A sidecar ``<staged>.lines.json`` holds each staged line's original line number. ``wrap``:
    each object written as ``{"<wrap>":<object>}`` (see the module docstring).
    """
    out, stamp = _staged_path(path, staging), _stamp(path, wrap)
    head, tail = wrapping(wrap)
    text = Path(path).read_text(encoding="utf-8")
    lines: list[int] = []
    with _replacing(out) as fh:
        for line, doc in split_documents(text):
            fh.write((head + doc.replace("\r", " ").replace("\n", " ") + tail + "\n").encode())
            lines.append(line)
    _write_sidecar(out, stamp, lines)
    return str(out)


def stage_wrapped_lines(path: str, staging: str, *, wrap: str) -> str:
    """Write a ``lines`` file with each non-blank line ``L`` as ``{"<wrap>":L}`` (see
    :func:`wrapping`), blank lines as they are (so every record keeps its line number); return the
    staged file's path.

    Works on chunks of whole lines with bytes operations, not line by line in Python.
    """
    out, stamp = _staged_path(path, staging), _stamp(path, wrap)
    head, tail = (x.encode() for x in wrapping(wrap))
    with open(path, "rb") as src, _replacing(out) as dst:
        first = True
        while chunk := src.read(_CHUNK_BYTES):
            chunk += src.readline()  # up to the end of the last line
            if first and chunk.startswith(codecs.BOM_UTF8):
                chunk = chunk[len(codecs.BOM_UTF8):]
            first = False
            end = b"\n" if chunk.endswith(b"\n") else b""
            body = chunk[: len(chunk) - len(end)]
            if b"\r" not in body and _BLANK_START.match(body) is None and _BLANK_LINE.search(body) is None:
                dst.write(head + body.replace(b"\n", tail + b"\n" + head) + tail + end)
            else:
                dst.write(b"\n".join(_wrap_line(x, head, tail) for x in body.split(b"\n")) + end)
    _write_sidecar(out, stamp, None)
    return str(out)


def _wrap_line(line: bytes, head: bytes, tail: bytes) -> bytes:
    """One line wrapped (a blank one as it is); a carriage return ending it stays outside the
    wrapper: Spark's line reader ends a line at a carriage return followed by anything."""
    if not line.strip(_WS):
        return line
    cr = b"\r" if line.endswith(b"\r") else b""
    return head + line[: len(line) - len(cr)] + tail + cr


def _staged_before(path: str, staging: str, wrap: str | None, keyed: bool = False) -> str | None:
    """The staged copy an earlier read of this run made from the same file (same path, size and
    modification time, same ``wrap``), if there is one."""
    out, stamp = _staged_path(path, staging), _stamp(path, wrap)
    sidecar = Path(f"{out}.lines.json")
    if out.exists() and sidecar.exists():
        try:
            earlier = json.loads(sidecar.read_text())
        except ValueError:  # (a staging cut short)
            earlier = {}
        if {k: earlier.get(k) for k in stamp} == stamp and bool(earlier.get("keyed")) == (keyed and keyed_lines(path)):
            return str(out)
    return None


def _stage(path: str, staging: str, *, wrap: str | None, keyed: bool = False) -> str:
    """The staged copy of ``path`` (:func:`stage_wrapped_lines`, :func:`stage_documents`, or with
    ``keyed`` :func:`stage_keyed_lines`)."""
    if keyed and keyed_lines(path):
        return stage_keyed_lines(path, staging, wrap=wrap)
    if wrap and detect_layout(path) == "lines":
        return stage_wrapped_lines(path, staging, wrap=wrap)
    return stage_documents(path, staging, wrap=wrap)


def staged_documents(
    spark: SparkSession, files: Sequence[str], staging: str, *, wrap: str | None = None, keyed: bool = False,
) -> list[str]:
    """``files`` with every ``documents`` file replaced by its staged one-object-per-line copy
    (every file, with ``wrap``: see the module docstring; with ``keyed``, kcat ``-K<sep>`` dumps
    by their values: :func:`stage_keyed_lines`). A staged copy an earlier read of this run made
    from the same file is taken again."""
    todo = files if wrap else [f for f in files if detect_layout(f) != "lines" or (keyed and keyed_lines(f))]
    staged = {f: before for f in todo if (before := _staged_before(f, staging, wrap, keyed)) is not None}
    todo = [f for f in todo if f not in staged]
    stage = functools.partial(_stage, staging=staging, wrap=wrap, keyed=keyed)
    staged.update(zip(todo, on_executors(spark, stage, todo), strict=True))
    return [staged.get(f, f) for f in files]


def on_executors(spark: SparkSession, fn: Callable[[str], str], paths: Sequence[str]) -> list[str]:
    """``fn(path)`` for each path, run by Spark's executors (one task per path), results in order.

    For work on whole files that cannot be split (staging a file of documents): the driver only
    lists the files; the reading and writing happens where the data is, in parallel across files.
    ``fn`` must be picklable (a module-level function or a ``functools.partial`` of one), and the
    paths it writes must be visible to the driver (the staging area under the target).
    """
    if not paths:
        return []
    # one partition per path, made without a shuffle (adaptive execution would coalesce the
    # partitions of a small shuffle into one task, which would then do every path in turn)
    n = len(paths)
    out = spark.range(0, n, 1, n).mapInArrow(functools.partial(_run_each, fn=fn, paths=list(paths)), "i long, out string")
    done = {r["i"]: r["out"] for r in out.collect()}
    return [done[i] for i in range(n)]


def _run_each(batches: Iterator[pa.RecordBatch], *, fn: Callable[[str], str], paths: list[str]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        ids = batch.column("id").to_pylist()
        yield pa.RecordBatch.from_pydict({"i": pa.array(ids, pa.int64()), "out": [fn(paths[i]) for i in ids]})


def read_json(
    spark: SparkSession, files: Sequence[str], schema: StructType, *, staging: str,
    derived: Mapping[str, Column] | None = None, wrap: str | None = None,
) -> DataFrame:
    """Messages of ``files`` parsed with ``schema`` (plus ``_corrupt_record``) and origin columns.

    ``derived``: columns computed from the parsed members in a projection of their own, next to
    the reader. Meant for expressions with a lambda function (``map_filter``, ``transform``):
    Spark runs them interpreted, and a projection holding one is left out of the generated code
    and copies every row it passes on. Next to the reader it copies the parsed row only; the
    decoder's projections above it stay generated.

    ``wrap``: read every record as the member of that name of ``schema`` (see the module
    docstring).

    Call inside :func:`exact_json_strings`.
    """
    paths = staged_documents(spark, files, staging, wrap=wrap, keyed=True)
    names = {Path(p).resolve().as_uri(): p for p in paths}
    mapping = F.create_map(*[F.lit(x) for kv in names.items() for x in kv])
    uri = F.input_file_name()
    # (a new struct: StructType.add would change the caller's schema in place)
    full = schema if CORRUPT in schema.fieldNames() else StructType([*schema.fields, StructField(CORRUPT, StringType())])
    df = (
        spark.read.schema(full)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("allowSingleQuotes", "false")  # Spark's default takes {'a':'b'}: no JSON, quarantined
        .options(**JSON_LIMITS)
        .json(paths)
    )
    if derived:
        df = df.select("*", *[c.alias(n) for n, c in derived.items()])
    return df.select(
        "*",
        F.coalesce(mapping[uri], uri).alias("_file"),
        F.input_file_block_start().alias("_block"),
        F.monotonically_increasing_id().alias("_row"),
    )


def read_text(spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
    """Non-blank lines of ``files`` as ``value`` with the same origin columns as :func:`read_json`."""
    paths = staged_documents(spark, files, staging)
    names = {Path(p).resolve().as_uri(): p for p in paths}
    mapping = F.create_map(*[F.lit(x) for kv in names.items() for x in kv])
    uri = F.input_file_name()
    # blank means JSON whitespace only, as for Spark's JSON reader (row ids must agree)
    lines = spark.read.text(paths).where(F.col("value").rlike("[^ \\t\\r\\n]"))
    return lines.select(
        "value",
        F.coalesce(mapping[uri], uri).alias("_file"),
        F.input_file_block_start().alias("_block"),
        F.monotonically_increasing_id().alias("_row"),
    )


def split_documents(text: str) -> Iterator[tuple[int, str]]:
    """Split concatenated JSON objects; yield ``(line, text)`` per object.

    Whitespace and delimiters between objects (``,``, ``;``, a ``jsonDelimiter``) are skipped.
    A trailing comma before ``}`` or ``]`` (as in the GoldenGate manual's own examples) is
    dropped. Text that does not start an object is yielded up to the end of its line, so the
    caller reports it as a bad record instead of losing it.
    """
    i, n, line = 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
            continue
        if ch.isspace() or ch in ",;":
            i += 1
            continue
        if ch != "{":
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield line, text[i:end]
            i = end
            continue
        start_line = line
        out: list[str] = []
        depth, in_str, esc = 0, False, False
        while i < n:
            ch = text[i]
            if ch == "\n":
                line += 1
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
                out.append(ch)
            elif ch == '"':
                in_str = True
                out.append(ch)
            elif ch in "{[":
                depth += 1
                out.append(ch)
            elif ch in "}]":
                _drop_trailing_comma(out)
                depth -= 1
                out.append(ch)
                if depth == 0:
                    i += 1
                    break
            else:
                out.append(ch)
            i += 1
        yield start_line, "".join(out)


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and out[j].isspace():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]


def _split_records(fh: IO[bytes], block: int) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` of each record of the split of ``fh`` starting at ``block``.

    Follows Hadoop's line reader: a split that does not start the file begins after the first
    newline at or after its start; blank lines (JSON whitespace only) are not records.
    """
    line_no = 1
    if block > 0:
        remaining = block
        while remaining > 0:
            chunk = fh.read(min(remaining, 1 << 22))
            if not chunk:
                break
            line_no += chunk.count(b"\n")
            remaining -= len(chunk)
        partial = fh.readline()
        if partial.endswith(b"\n"):
            line_no += 1
    for raw in fh:
        if raw.strip(_WS):
            yield line_no, raw
        line_no += 1


def _as_written(path: str) -> Callable[[int, bytes], tuple[int, str]]:
    """``(line number, raw line)`` of a (possibly staged) file to the original file's line number
    and the record's text as written there (without the staging's wrapper)."""
    original: list[int] | None = None
    head = tail = ""
    sidecar = Path(f"{path}.lines.json")
    if sidecar.exists():
        staged = json.loads(sidecar.read_text())
        original = staged["lines"]
        head, tail = wrapping(staged.get("wrap"))

    def fix(line_no: int, raw: bytes) -> tuple[int, str]:
        text = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
        if head:
            body = text.rstrip("\r")
            if body.startswith(head) and body.endswith(tail):
                text = body[len(head): len(body) - len(tail)].rstrip("\r")
        return (original[line_no - 1] if original is not None else line_no), text

    return fix


def locate(path: str, block: int, ranks: set[int]) -> dict[int, tuple[int, str]]:
    """Line number and raw text of the records of rank ``ranks`` in the split starting at ``block``
    (:func:`_split_records`). For a staged file the line is the original file's, the text the
    record without the staging's wrapper."""
    found: dict[int, tuple[int, str]] = {}
    if not ranks:
        return found
    last, fix = max(ranks), _as_written(path)
    with open(path, "rb") as fh:
        for rank, (line_no, raw) in enumerate(_split_records(fh, block)):
            if rank in ranks:
                found[rank] = fix(line_no, raw)
                if rank >= last:
                    break
    return found


#: ``monotonically_increasing_id``: the bits of a row's index within its partition
INDEX_MASK = (1 << 33) - 1


class Rereader:
    """The raw text of some records of one partition, read again from their files.

    Fed a partition's rows in order (each batch: split ids, row ids, files, blocks, and which rows
    are wanted), it tells each split's first row id (where the split id changes) and so each
    wanted record's rank within its split, and reads each split forward once, however many batches
    want its records: no row waits for the partition's end. Close it when done.
    """

    def __init__(self) -> None:
        self._first: dict[int, int] = {}
        self._open: dict[int, tuple[IO[bytes], Iterator[tuple[int, bytes]], list[int], Callable]] = {}

    def texts(self, splits: np.ndarray, rows: np.ndarray, files: Sequence, blocks: Sequence,
              wanted: np.ndarray) -> dict[int, str | None]:
        """Position in the batch -> text, for the ``wanted`` rows (None: not found again)."""
        index = rows & INDEX_MASK
        if len(splits):
            for i in np.flatnonzero(np.r_[True, splits[1:] != splits[:-1]]):
                self._first.setdefault(int(splits[i]), int(index[i]))
        return {int(i): self._text(int(splits[i]), files[i], int(blocks[i]), int(index[i]) - self._first[int(splits[i])])
                for i in np.flatnonzero(wanted)}

    def _text(self, split: int, path: str, block: int, rank: int) -> str | None:
        reader = self._open.get(split)
        if reader is None or reader[2][0] > rank:  # (rows come in order: only a new split opens)
            if reader is not None:
                reader[0].close()
            fh = open(path, "rb")  # noqa: SIM115 (kept open across batches, closed by close())
            reader = self._open[split] = (fh, _split_records(fh, block), [0], _as_written(path))
        fh, records, at, fix = reader
        for line_no, raw in records:
            at[0] += 1
            if at[0] - 1 == rank:
                return fix(line_no, raw)[1]
        return None

    def close(self) -> None:
        for fh, *_ in self._open.values():
            fh.close()
        self._open.clear()


def source_of(path: str) -> str:
    """The input file a (possibly staged) path stands for."""
    sidecar = Path(f"{path}.lines.json")
    return json.loads(sidecar.read_text())["source"] if sidecar.exists() else path
