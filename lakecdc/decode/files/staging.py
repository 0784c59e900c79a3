"""Staging: input files rewritten one record per line, so that Spark's line and JSON sources read them.

Spark reads a file of one record per line in splits across executors. A file that is not one
(pretty-printed or concatenated JSON documents, XML documents, text records cut by another
delimiter or in another encoding, kcat ``-K<sep>`` dumps) is first *staged*: written to the run's
staging area with each record on one line, beside a sidecar ``<staged>.lines.json`` that names the
input and holds each staged line's original line number (what
:func:`lakecdc.decode.files.reread.locate` reports for a bad record).

* :func:`stage` writes one file with a :class:`Splitter` (how its records are cut): the staged
  copy is written next to its place and moved there once whole, and a copy an earlier read of the
  same run made from the same file (same path, size, modification time, splitter and wrapper) is
  taken again.
* Splitters: :func:`json_documents` (JSON objects, optionally after leading comments),
  :func:`text_records` (text records cut by a delimiter, each written as a JSON string); vendor
  formats bring their own (GoldenGate XML).
* :func:`staged_documents` stages, for the JSON-source formats, every file whose layout needs it
  (:func:`detect_layout`), in Spark's executors, one task per file (:func:`on_executors`).
* :func:`first_record` and :func:`is_documents` sniff a file that may open with comments
  (``debezium-json``).
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import pyarrow as pa

from lakecdc.decode.files.kcat import KEYED_LINE, keyed_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Layout = Literal["lines", "documents"]
_PEEK_BYTES = 1 << 16
#: JSON whitespace: a line of only these is blank (not a record), for Spark's readers as for lakecdc's.
BLANK = b" \t\r\n"
_CHUNK_BYTES = 1 << 24
#: a blank line (JSON whitespace only) after the first of a text without its final newline (the
#: pattern starts with a plain character: Python's engine then jumps from newline to newline)
_BLANK_LINE = re.compile(rb"\n[ \t\r]*(?:\n|$)")
_BLANK_START = re.compile(rb"[ \t\r]*(?:\n|$)")


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


@dataclass(frozen=True)
class Splitter:
    """How the records of a file are cut for staging.

    ``records(path)`` yields ``(original line, record)`` with each record's text on one line (no
    newline in it); ``name`` tells splitters apart in the sidecar (a staged copy is taken again
    only from the same splitter); ``suffix`` ends the staged file's name. Must be picklable (a
    module-level function, or a ``functools.partial`` of one): staging may run in the executors.
    """

    name: str
    records: Callable[[str], Iterable[tuple[int, str]]]
    suffix: str = ".jsonl"


def _json_documents(path: str, *, comments: bool) -> Iterator[tuple[int, str]]:
    text = Path(path).read_text(encoding="utf-8")
    if comments:
        text = blank_leading_comments(text)
    for line, doc in split_documents(text):
        yield line, doc.replace("\r", " ").replace("\n", " ")


def json_documents(*, comments: bool = False) -> Splitter:
    """JSON objects, pretty-printed or concatenated (:func:`split_documents`), each on one line;
    ``comments``: leading ``/* */`` and ``//`` comments blanked first (:func:`blank_leading_comments`)."""
    return Splitter("json-documents" + ("+comments" if comments else ""),
                    functools.partial(_json_documents, comments=comments))


def _text_records(path: str, *, delimiter: str, encoding: str) -> Iterator[tuple[int, str]]:
    text = Path(path).read_bytes().decode(encoding, errors="replace")
    line, scanned, start = 1, 0, 0
    for record in text.split(delimiter):
        stripped = record.lstrip(_BLANK_TEXT)
        if stripped.rstrip(_BLANK_TEXT):
            first = start + len(record) - len(stripped)
            line += text.count("\n", scanned, first)
            scanned = first
            yield line, json.dumps(record, ensure_ascii=False)
        start += len(record) + len(delimiter)


_BLANK_TEXT = " \t\r\n"


def text_records(delimiter: str, encoding: str) -> Splitter:
    """Text records cut at ``delimiter`` after decoding the file with ``encoding`` (bytes it
    cannot decode replaced), each written as a JSON string; blank records (whitespace only) are
    skipped as blank lines are, a record's line is where its first non-blank character is."""
    return Splitter(f"text-records:{delimiter!r}:{encoding}",
                    functools.partial(_text_records, delimiter=delimiter, encoding=encoding), ".records.jsonl")


def stage(path: str, staging: str, splitter: Splitter, *, wrap: str | None = None) -> str:
    """The staged copy of ``path``: its records (``splitter``) one per line, each written as
    ``{"<wrap>":<record>}`` with ``wrap`` (see :func:`wrapping`), beside a sidecar of their
    original line numbers; return the staged file's path. A copy an earlier read of the run made
    the same way from the same file is taken again."""
    out = _staged_path(path, staging, splitter.suffix)
    stamp = {**_stamp(path, wrap), "splitter": splitter.name}
    if _earlier(out, stamp) is not None:
        return str(out)
    head, tail = wrapping(wrap)
    lines: list[int] = []
    with _replacing(out) as fh:
        for line, record in splitter.records(path):
            fh.write((head + record + tail + "\n").encode("utf-8"))
            lines.append(line)
    _write_sidecar(out, stamp, lines)
    return str(out)


def _earlier(out: Path, stamp: Mapping[str, object]) -> dict[str, Any] | None:
    """The sidecar of ``out`` when ``out`` is a staged copy made as ``stamp`` says, else None."""
    sidecar = Path(f"{out}.lines.json")
    if not (out.exists() and sidecar.exists()):
        return None
    try:
        earlier = json.loads(sidecar.read_text())
    except ValueError:  # (a staging cut short)
        return None
    return earlier if isinstance(earlier, dict) and {k: earlier.get(k) for k in stamp} == stamp else None


def stage_keyed_lines(path: str, staging: str, *, wrap: str | None = None) -> str:
    """Write a kcat ``-K<sep>`` dump with each ``KEY<sep>VALUE`` line's value alone (the Kafka key
    dropped; other lines as they are), line for line, so that every record keeps its line number;
    return the staged file's path."""
    out, stamp = _staged_path(path, staging), {**_stamp(path, wrap), "keyed": True}
    head, tail = (x.encode() for x in wrapping(wrap))
    with open(path, "rb") as src, _replacing(out) as dst:
        for raw in src:
            line = raw.decode("utf-8", errors="surrogateescape")
            m = KEYED_LINE.match(line)
            if m is not None:
                line = line[m.end():]
            body = line.rstrip("\r\n").encode("utf-8", errors="surrogateescape")
            end = b"\n" if raw.endswith(b"\n") else b""
            dst.write((head + body + tail if body.strip(BLANK) else body) + end)
    _write_sidecar(out, stamp, None)
    return str(out)


def _staged_path(path: str, staging: str, suffix: str = ".jsonl") -> Path:
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:16]
    out = Path(staging) / f"{Path(path).name}.{digest}{suffix}"
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
    each object written as ``{"<wrap>":<object>}`` (see :func:`wrapping`).
    """
    return stage(path, staging, json_documents(), wrap=wrap)


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
    if not line.strip(BLANK):
        return line
    cr = b"\r" if line.endswith(b"\r") else b""
    return head + line[: len(line) - len(cr)] + tail + cr


def _staged_before(path: str, staging: str, wrap: str | None, keyed: bool = False) -> str | None:
    """The staged copy an earlier read of this run made from the same file (same path, size and
    modification time, same ``wrap``, staged as :func:`_stage` stages it), if there is one."""
    out = _staged_path(path, staging)
    earlier = _earlier(out, _stamp(path, wrap))
    if earlier is None or earlier.get("splitter") not in (None, json_documents().name):
        return None
    return str(out) if bool(earlier.get("keyed")) == (keyed and keyed_lines(path)) else None


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


def blank_leading_comments(text: str) -> str:
    """``text`` with its leading ``/* */`` and ``//`` comments turned to spaces (newlines kept,
    so line numbers stay right)."""
    chars = list(text)
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        else:
            break
        for j in range(i, end):
            if chars[j] != "\n":
                chars[j] = " "
        i = end
    return "".join(chars)


def first_record(path: str) -> str | None:
    """The first line of ``path`` that is neither blank nor a comment."""
    in_comment = False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stripped = line.strip()
            if in_comment:
                in_comment = "*/" not in stripped
                continue
            if not stripped or stripped.startswith(("//", "*")):
                continue
            if stripped.startswith("/*"):
                in_comment = "*/" not in stripped[2:]
                continue
            return stripped
    return None


def is_documents(path: str) -> bool:
    """True when the first record after leading comments (:func:`first_record`) is a JSON object
    spread over several lines (a whole record on one line, even a bad one, is not: unlike
    :func:`detect_layout`, which takes any first line that does not parse for a document)."""
    first = first_record(path)
    if first is None or not first.startswith("{"):
        return False
    try:
        json.loads(first)
        return False
    except ValueError:
        pass
    depth, in_str, esc = 0, False, False
    for ch in first:
        if in_str:
            esc, in_str = (False, in_str) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return False  # a whole (bad) record on one line
    return depth > 0


__all__ = [
    "BLANK", "Layout", "Splitter", "blank_leading_comments", "detect_layout", "first_record", "is_documents",
    "json_documents", "on_executors", "split_documents", "stage", "stage_documents", "stage_keyed_lines",
    "stage_wrapped_lines", "staged_documents", "text_records", "wrapping",
]
