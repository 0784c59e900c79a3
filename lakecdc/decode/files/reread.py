"""Bad records found again in their files: their line number and raw text, for the quarantine.

A row read by :mod:`lakecdc.decode.files.lines` carries only ``_file``, ``_block`` (the start of
its split) and ``_row`` (Spark's ``monotonically_increasing_id``); the line and text of the few
bad records are recovered by reading their split again (:func:`locate`, or :class:`Rereader`
inside a pandas UDF). For a staged file the line is the original file's (from the staged copy's
``.lines.json`` sidecar) and the text the record without the staging's wrapper.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from lakecdc.decode.files.staging import BLANK, wrapping


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
        if raw.strip(BLANK):
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

    def texts(self, splits: np.ndarray, rows: np.ndarray, files: Sequence | np.ndarray, blocks: Sequence | np.ndarray,
              wanted: np.ndarray) -> dict[int, str | None]:
        """Position in the batch -> text, for the ``wanted`` rows (None: not found again)."""
        index = rows & INDEX_MASK
        if len(splits):
            for i in np.flatnonzero(np.r_[True, splits[1:] != splits[:-1]]):
                self._first.setdefault(int(splits[i]), int(index[i]))
        return {i: self._text(int(splits[i]), files[i], int(blocks[i]), int(index[i]) - self._first[int(splits[i])])
                for i in map(int, np.flatnonzero(wanted))}

    def _text(self, split: int, path: str, block: int, rank: int) -> str | None:
        reader = self._open.get(split)
        if reader is None or reader[2][0] > rank:  # (rows come in order: only a new split opens)
            if reader is not None:
                reader[0].close()
            fh: IO[bytes] = open(path, "rb")  # noqa: SIM115 (kept open across batches, closed by close())
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


__all__ = ["INDEX_MASK", "Rereader", "locate", "source_of"]
