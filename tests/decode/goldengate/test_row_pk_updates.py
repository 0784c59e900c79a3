"""Primary-key updates in the row-modeled GoldenGate formats (issue 3, item 7).

A row formatter writes one image per operation, so a key change is visible only when the
formatter split it (``pkUpdateHandling=delete-insert``): a delete of the before image and an
insert of the after image at the update's own ``op_ts`` and ``pos``. Told so (the same
``pkUpdateHandling`` option), lakecdc joins each pair into the key change it was, and its own
``pk_update`` then decides: ``abend`` fails the batch naming the table, both keys and the
position, committing nothing; ``delete-insert`` and ``update`` give the oracle's table, the new
row completed from the before image and the old row (which a plain delete + insert would lose).

Each row format (``ogg-json-row``, ``ogg-delimited``, ``ogg-avro-row``) runs a fixed history with
key changes, a chain of them, partial images, a truncate and replays, under each ``pk_update``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import lakecdc

try:
    from tests.helpers import rows
    from tests.ogg_avro_render import row_scenario_writer
    from tests.ogg_row_render import (
        key_change_scenario,
        missing_as_null,
        render_delimited,
        render_json_row,
        run_row_scenario,
        write_json_schema,
    )
    from tests.test_property import Scenario, delta_tables_under
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows  # type: ignore[no-redef]
    from ogg_avro_render import row_scenario_writer  # type: ignore[no-redef]
    from ogg_row_render import (  # type: ignore[no-redef]
        key_change_scenario,
        missing_as_null,
        render_delimited,
        render_json_row,
        run_row_scenario,
        write_json_schema,
    )
    from test_property import Scenario, delta_tables_under  # type: ignore[no-redef]

pytestmark = [pytest.mark.spark, pytest.mark.engines]

SPLIT = {"pkUpdateHandling": "delete-insert"}


def delimited_setup(sc: Scenario, workdir: Path) -> tuple[Any, dict[str, str]]:
    columns = {}
    for spec in sc.specs:
        kinds = {k: ("integer" if k == "ID" else "string") for k in spec.keys}
        kinds.update({c: ("integer" if kind == "int" else "string") for c, kind in spec.columns.items()})
        write_json_schema(workdir / "dirdef", spec.name, kinds)
        columns[spec.name] = list(kinds)

    def render(events: list[Any]) -> str:
        return render_delimited(events, columns, missing_rep="<M>", field_delimiter="|")

    return render, {"schemaDirectory": str(workdir / "dirdef"), "fieldDelimiter": "|",
                    "missingValueRepresentation": "CDATA[<M>]"}


def json_row_setup(sc: Scenario, workdir: Path) -> tuple[Any, dict[str, str]]:
    return (lambda events: render_json_row(events, primary_keys=sc.primary_keys)), {}


SETUPS = {"ogg-json-row": json_row_setup, "ogg-delimited": delimited_setup, "ogg-avro-row": row_scenario_writer}


#: The formats differ only in decoding: one of them takes the merge of the key changes through
#: every engine, the others through one.
_FORMATS = [fmt if fmt == "ogg-json-row" else pytest.param(fmt, marks=pytest.mark.one_engine(
    "the pairs decode the same whatever the engine; ogg-json-row runs on both")) for fmt in SETUPS]


@pytest.mark.parametrize("mode", ["abend", "delete-insert", "update"])
@pytest.mark.parametrize("fmt", _FORMATS)
def test_split_key_changes_apply_by_pk_update(spark, tmp_path, fmt, mode):
    """The oracle sees each key change whole; lakecdc reads the formatter's delete + insert."""
    sc = dataclasses.replace(key_change_scenario(), pk_update=mode)
    if fmt == "ogg-avro-row":
        sc = missing_as_null(sc)
    render, options = SETUPS[fmt](sc, tmp_path)
    # update: the whole history in one batch (the old rows come from the batch); the others in two
    # (the old rows of the key changes come from the target)
    run_row_scenario(spark, sc, tmp_path, fmt=fmt, render=render, options={**options, **SPLIT},
                     suffix=".bin" if fmt == "ogg-avro-row" else ".txt", max_runs=1 if mode == "update" else 2,
                     rejoin=True)


# -- the same pair, seen up close ---------------------------------------------------------------------

MSGS = [
    {"table": "S.T", "op_type": "I", "op_ts": "2020-01-01 00:00:01.000000", "pos": "00000000000000000001",
     "ID": 1, "A": "a", "B": "b"},
    # the key change 1 -> 2, split by the formatter; its insert lacks B (not logged)
    {"table": "S.T", "op_type": "D", "op_ts": "2020-01-01 00:00:02.000000", "pos": "00000000000000000002",
     "ID": 1, "A": "a"},
    {"table": "S.T", "op_type": "I", "op_ts": "2020-01-01 00:00:02.000000", "pos": "00000000000000000002",
     "ID": 2, "A": "a2"},
]


def _landing(tmp_path: Path) -> Path:
    f = tmp_path / "landing" / "a.json"
    f.parent.mkdir()
    f.write_text("".join(json.dumps(m) + "\n" for m in MSGS))
    return f


def test_the_pair_is_one_update_and_the_new_row_keeps_unlogged_columns(spark, tmp_path):
    f = _landing(tmp_path)
    joined = lakecdc.read_changes(f, format="ogg-json-row", options=SPLIT, spark=spark).orderBy("_row").collect()
    assert [(r["op"], r["before"], r["after"], r["_row"]) for r in joined] == [
        ("I", None, {"ID": "1", "A": "a", "B": "b"}, 0), ("U", {"ID": "1", "A": "a"}, {"ID": "2", "A": "a2"}, 1)]
    assert joined[1]["seq"] > joined[0]["seq"] and joined[1]["pos"] == "00000000000000000002"

    keys = {"S.T": ["ID"]}
    s = lakecdc.apply(f, tmp_path / "joined", format="ogg-json-row", keys=keys, options=SPLIT, spark=spark)
    t = s.table("S.T")
    assert rows(t.target) == [{"ID": 2, "A": "a2", "B": "b"}]  # B from the old row
    assert (t.events, t.inserted, t.updated, t.deleted) == (2, 1, 0, 0)
    # without the option: the delete and the insert they are, so the unlogged column is lost, and
    # pk_update="abend" has no key change to refuse
    s = lakecdc.apply(f, tmp_path / "plain", format="ogg-json-row", keys=keys, pk_update="abend", spark=spark)
    t = s.table("S.T")
    assert rows(t.target) == [{"ID": 2, "A": "a2", "B": None}]
    assert t.events == 3


def test_abend_names_the_table_both_keys_and_the_position_and_commits_nothing(spark, tmp_path):
    f = _landing(tmp_path)
    target = tmp_path / "lake"
    with pytest.raises(lakecdc.PrimaryKeyUpdateError) as info:
        lakecdc.apply(f, target, format="ogg-json-row", keys={"S.T": ["ID"]}, pk_update="abend", options=SPLIT,
                      spark=spark)
    e = info.value
    assert (e.table, [str(k) for k in e.old_key], [str(k) for k in e.new_key], e.pos) == (
        "S.T", ["1"], ["2"], "00000000000000000002")
    assert "'S.T'" in str(e) and "00000000000000000002" in str(e)
    assert delta_tables_under(target) == {}


def test_replayed_pairs_pair_up_and_a_lone_half_stays(spark, tmp_path):
    """A replayed pair gives the same update twice (a duplicate for the pipeline); a delete whose
    insert is in another batch, and an insert alone, stay as they are; other tables never pair."""
    d, i = MSGS[1], MSGS[2]
    lone_d = {**d, "pos": "00000000000000000003", "op_ts": "2020-01-01 00:00:03.000000", "ID": 5}
    lone_i = {**i, "pos": "00000000000000000004", "op_ts": "2020-01-01 00:00:04.000000", "ID": 6}
    other = {**i, "table": "S.OTHER"}  # same op_ts and pos as the pair, another table
    f = tmp_path / "a.json"
    f.write_text("".join(json.dumps(m) + "\n" for m in [d, i, lone_d, other, d, i, lone_i]))
    got = lakecdc.read_changes(f, format="ogg-json-row", options=SPLIT, spark=spark).orderBy("_row").collect()
    assert [(r["table"], r["op"], r["pos"][-1], r["_row"], r["before"], r["after"]) for r in got] == [
        ("S.T", "U", "2", 0, {"ID": "1", "A": "a"}, {"ID": "2", "A": "a2"}),
        ("S.T", "D", "3", 2, {"ID": "5", "A": "a"}, None),
        ("S.OTHER", "I", "2", 3, None, {"ID": "2", "A": "a2"}),
        ("S.T", "U", "2", 4, {"ID": "1", "A": "a"}, {"ID": "2", "A": "a2"}),
        ("S.T", "I", "4", 6, None, {"ID": "6", "A": "a2"}),
    ]


def test_the_key_move_replay_reads_its_events_once_not_the_input_again(spark, tmp_path, monkeypatch):
    """The replay's several queries run over the widened events kept as a local checkpoint: no
    query of it scans the input files (each did, and planned the decoder's whole plan again)."""
    import lakecdc.merge.prepare

    seen = []
    real = lakecdc.merge.prepare.fold_with_key_moves

    def spy(wide, *args, **kwargs):
        seen.append(wide._jdf.queryExecution().optimizedPlan().toString())
        return real(wide, *args, **kwargs)

    monkeypatch.setattr(lakecdc.merge.prepare, "fold_with_key_moves", spy)
    f = _landing(tmp_path)
    s = lakecdc.apply(f, tmp_path / "lake", format="ogg-json-row", keys={"S.T": ["ID"]}, options=SPLIT, spark=spark)
    assert rows(s.table("S.T").target) == [{"ID": 2, "A": "a2", "B": "b"}]
    assert len(seen) == 1 and "LogicalRDD" in seen[0]
    assert "Relation" not in seen[0] and "json" not in seen[0].lower(), seen[0]
