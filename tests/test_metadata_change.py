"""A metadata change mid-stream (a column added) in every GoldenGate format: the Delta table gains it.

Run 1 writes three rows of ``GG.CUST (ID, A)``. Then ``B`` is added at the source: run 2 holds an
update and an insert carrying ``B`` (written with the new layout / schema), and one update written
*before* the change but delivered after it (the old layout, no ``B``). After run 2 the table has
``B`` with the values of the rows that got one and NULL for the others, and every other column
as the events left it. Each format says "a new column" its own way:

* ``ogg-json``, ``ogg-json-row``, ``ogg-xml``: the new member / ``col`` simply appears;
* ``ogg-delimited``: records carry one more value; the table's old and new
  ``<table>.schema.json`` give the two layouts, the value count picks one;
* ``ogg-avro-row``, ``ogg-avro-op``: a new ``<table>.avsc`` (the old one kept as a versioned
  ``<table>_<timestamp>.avsc``), the version that decodes a message exactly is used;
* ``ogg-avro-op`` in OCF files: each file's header holds the schema it was written with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import lakecdc

try:
    from tests.helpers import rows
    from tests.ogg_avro_render import (
        encode,
        length_prefixed,
        op_record,
        op_schema,
        row_record,
        row_schema,
        write_ocf,
        write_schema_dir,
    )
    from tests.ogg_render import render_ogg_json
    from tests.ogg_row_render import render_delimited, render_json_row, row_events, write_json_schema
    from tests.ogg_xml_render import write_xml_run
    from tests.oracle import Event
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows  # type: ignore[no-redef]
    from ogg_avro_render import (  # type: ignore[no-redef]
        encode,
        length_prefixed,
        op_record,
        op_schema,
        row_record,
        row_schema,
        write_ocf,
        write_schema_dir,
    )
    from ogg_render import render_ogg_json  # type: ignore[no-redef]
    from ogg_row_render import render_delimited, render_json_row, row_events, write_json_schema  # type: ignore[no-redef]
    from ogg_xml_render import write_xml_run  # type: ignore[no-redef]
    from oracle import Event  # type: ignore[no-redef]

pytestmark = [pytest.mark.spark, pytest.mark.engines]

TABLE = "GG.CUST"
OLD_COLUMNS = {"ID": "long", "A": "string"}
NEW_COLUMNS = {"ID": "long", "A": "string", "B": "string"}


def _ev(op: str, second: int, *, before: dict | None = None, after: dict | None = None) -> Event:
    return Event(TABLE, op, f"2020-01-01 00:00:{second:02d}.000000", f"{second:020d}", 0, before, after, ("ID",))


RUN1 = [_ev("I", 1, after={"ID": 1, "A": "a1"}), _ev("I", 2, after={"ID": 2, "A": "a2"}),
        _ev("I", 3, after={"ID": 3, "A": "a3"})]
#: run 2, written after B was added
NEW = [_ev("U", 11, before={"ID": 1, "A": "a1"}, after={"ID": 1, "A": "a1x", "B": "b1"}),
       _ev("I", 12, after={"ID": 4, "A": "a4", "B": "b4"})]
#: run 2, written before B was added (old layout), delivered with the new ones
LATE = [_ev("U", 5, before={"ID": 3, "A": "a3"}, after={"ID": 3, "A": "a3x"})]
EXPECTED = [{"ID": "1", "A": "a1x", "B": "b1"}, {"ID": "2", "A": "a2", "B": None},
            {"ID": "3", "A": "a3x", "B": None}, {"ID": "4", "A": "a4", "B": "b4"}]


def _rows(events: list[Event]) -> list[Event]:
    return [r for e in events for r in row_events(e)]


# -- one writer per format: (workdir, run number) -> (files of the run, decoder options) ----------

Writer = Callable[[Path, int], tuple[list[Path], dict[str, str]]]


def _json(workdir: Path, run: int) -> tuple[list[Path], dict[str, str]]:
    path = workdir / f"run-{run}.json"
    path.write_text(render_ogg_json(RUN1 if run == 1 else NEW + LATE))
    return [path], {}


def _json_row(workdir: Path, run: int) -> tuple[list[Path], dict[str, str]]:
    path = workdir / f"run-{run}.json"
    path.write_text(render_json_row(_rows(RUN1 if run == 1 else NEW + LATE)))
    return [path], {}


def _xml(workdir: Path, run: int) -> tuple[list[Path], dict[str, str]]:
    return [write_xml_run(RUN1 if run == 1 else NEW + LATE, workdir / f"run-{run}.xml", seed=run)], {}


def _delimited(workdir: Path, run: int) -> tuple[list[Path], dict[str, str]]:
    """Positional values; names from the formatter's JSON schemas (the old one kept, renamed)."""
    dirdef = workdir / "dirdef"
    kinds = {"ID": "integer", "A": "string", "B": "string"}
    old, new = list(OLD_COLUMNS), list(NEW_COLUMNS)
    if run == 1:
        write_json_schema(dirdef, TABLE, {c: kinds[c] for c in old})
        text = render_delimited(_rows(RUN1), {TABLE: old}, field_delimiter="|")
    else:
        current = dirdef / f"{TABLE}.schema.json"
        kept = current.rename(dirdef / f"{TABLE}_2020-01-01_00-00-10.000.schema.json")
        os.utime(kept, (1_600_000_000, 1_600_000_000))
        write_json_schema(dirdef, TABLE, {c: kinds[c] for c in new})
        text = (render_delimited(_rows(NEW), {TABLE: new}, field_delimiter="|")
                + render_delimited(_rows(LATE), {TABLE: old}, field_delimiter="|"))
    path = workdir / f"run-{run}.txt"
    path.write_text(text)
    return [path], {"fieldDelimiter": "|", "schemaDirectory": str(dirdef)}


def _avro(kind: str) -> Writer:
    schema_of, record_of = (row_schema, row_record) if kind == "row" else (op_schema, op_record)

    def write(workdir: Path, run: int) -> tuple[list[Path], dict[str, str]]:
        dirdef = workdir / "dirdef"
        old, new = schema_of(TABLE, OLD_COLUMNS), schema_of(TABLE, NEW_COLUMNS)
        if run == 1:
            write_schema_dir(dirdef, {TABLE: old})
            messages = [encode(old, record_of(e, old)) for e in RUN1]
        else:
            # GoldenGate (versionSchemas=true) keeps the old schema as a timestamped copy
            (dirdef / f"{TABLE}_2020-01-01_00-00-00.000.avsc").write_text(json.dumps(old))
            write_schema_dir(dirdef, {TABLE: new})
            messages = [encode(new, record_of(e, new)) for e in NEW] + [encode(old, record_of(e, old)) for e in LATE]
        path = workdir / f"run-{run}.bin"
        path.write_bytes(length_prefixed(messages))
        return [path], {"schemaDirectory": str(dirdef), "versionSchemas": "true"}

    return write


def _avro_op_ocf(workdir: Path, run: int) -> tuple[list[Path], dict[str, str]]:
    old, new = op_schema(TABLE, OLD_COLUMNS), op_schema(TABLE, NEW_COLUMNS)
    if run == 1:
        return [write_ocf(workdir / "run-1.avro", old, [op_record(e, old) for e in RUN1])], {}
    return [write_ocf(workdir / "run-2a.avro", new, [op_record(e, new) for e in NEW], codec="snappy"),
            write_ocf(workdir / "run-2b.avro", old, [op_record(e, old) for e in LATE], codec="null")], {}


FORMATS: dict[str, tuple[str, Writer]] = {
    "ogg-json": ("ogg-json", _json),
    "ogg-json-row": ("ogg-json-row", _json_row),
    "ogg-delimited": ("ogg-delimited", _delimited),
    "ogg-xml": ("ogg-xml", _xml),
    "ogg-avro-row": ("ogg-avro-row", _avro("row")),
    "ogg-avro-op": ("ogg-avro-op", _avro("op")),
    "ogg-avro-op-ocf": ("ogg-avro-op", _avro_op_ocf),
}


def _source_columns(path: str) -> list[str]:
    return [f.name for f in DeltaTable(path).schema().fields if not f.name.startswith("_cdc_")]


def _as_text(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every non-NULL value as text (XML types ID as a string, the others as a number)."""
    return [{k: (None if v is None else str(v)) for k, v in r.items()} for r in found]


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_column_added_mid_stream_is_added_to_the_table(spark, tmp_path, name):
    fmt, write = FORMATS[name]
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    applied: list[str] = []
    summaries = []
    for run in (1, 2):
        files, options = write(landing, run)
        applied += [str(f) for f in files]
        summaries.append(lakecdc.apply(list(applied), str(target), format=fmt, keys={TABLE: ["ID"]},
                                       options=options, spark=spark))
        t = summaries[-1].table(TABLE)
        assert t.quarantined == 0 and t.status == "applied", (run, t)
        if run == 1:
            assert _source_columns(t.target) == ["ID", "A"]
            assert _as_text(rows(t.target, "ID")) == [{"ID": "1", "A": "a1"}, {"ID": "2", "A": "a2"},
                                                      {"ID": "3", "A": "a3"}]
    t = summaries[-1].table(TABLE)
    assert (t.events, t.inserted, t.updated, t.deleted) == (3, 1, 2, 0)
    assert _source_columns(t.target) == ["ID", "A", "B"]
    assert {f.name: f.type.type for f in DeltaTable(t.target).schema().fields}["B"] == "string"
    assert _as_text(rows(t.target, "ID")) == EXPECTED
