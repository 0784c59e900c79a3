"""Small helpers the end-to-end tests share: writing GoldenGate JSON, reading Delta tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable


def ogg(table: str, op: str, ts: str, pos: int, *, before: dict | None = None, after: dict | None = None,
        keys: list[str] | None = None) -> dict[str, Any]:
    """One GoldenGate op-modeled JSON message (``ts`` is HH:MM:SS on 2020-01-01)."""
    msg: dict[str, Any] = {"table": table, "op_type": op, "op_ts": f"2020-01-01 {ts}.000000",
                           "current_ts": "2020-01-01T00:00:00.000000", "pos": f"{pos:020d}"}
    if keys is not None:
        msg["primary_keys"] = keys
    if before is not None:
        msg["before"] = before
    if after is not None:
        msg["after"] = after
    return msg


def write_jsonl(path: Path, messages: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


def rows(path: str | Path, key: str | None = None) -> list[dict[str, Any]]:
    """A Delta table's visible rows without the ``_cdc_`` columns, sorted by ``key``."""
    table = pa.table(DeltaTable(str(path)).to_pyarrow_table())
    keep = [c for c in table.column_names if not c.startswith("_cdc_")]
    out = table.select(keep).to_pylist()
    return sorted(out, key=lambda r: tuple(str(r[k]) for k in ([key] if key else keep)))


def version(path: str | Path) -> int:
    return DeltaTable(str(path)).version()
