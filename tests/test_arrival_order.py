"""Arrival as the last tie-breaker: records whose vendor position ties apply in the order they
were written (file name, then place in the file), for every format (semantics.md, ``arrival``)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakecdc

try:
    from tests.canal_render import canal_messages, message_runs, mysql_columns, run_rendered_scenario
    from tests.helpers import ogg, rows
    from tests.oracle import Event
    from tests.test_property import (
        API_EXAMPLES,
        SLOW_SETTINGS,
        Scenario,
        api_applier,
        run_scenario,
        scenarios,
    )
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from canal_render import (  # type: ignore[no-redef]
        canal_messages,
        message_runs,
        mysql_columns,
        run_rendered_scenario,
    )
    from helpers import ogg, rows  # type: ignore[no-redef]
    from oracle import Event  # type: ignore[no-redef]
    from test_property import (  # type: ignore[no-redef]
        API_EXAMPLES,
        SLOW_SETTINGS,
        Scenario,
        api_applier,
        run_scenario,
        scenarios,
    )

ES, BATCH = 1600000000000, 7


def canal(type_: str, data: list[dict], old: list[dict] | None = None, **members) -> str:
    msg = {"data": data, "database": "db", "table": "t", "es": ES, "id": BATCH, "isDdl": False,
           "old": old, "pkNames": ["id"], "sql": "", "ts": ES + 500, "type": type_,
           "mysqlType": {"id": "bigint(20)", "v": "varchar(10)"}, "sqlType": {"id": -5, "v": 12}}
    return json.dumps({**msg, **members})


def apply_canal(spark, tmp_path: Path, files: dict[str, list[str]]):
    land = tmp_path / "land"
    land.mkdir(exist_ok=True)
    for name, lines in files.items():
        (land / name).write_text("\n".join(lines) + "\n")
    target = tmp_path / "target"
    summary = lakecdc.apply(str(land), str(target), format="canal-json", spark=spark)
    return summary, target / "db.t"


def test_canal_batch_with_equal_es_and_id_applies_in_message_order(spark, tmp_path):
    # one Canal batch: every message shares es and id, every row is data[0]
    summary, path = apply_canal(spark, tmp_path, {"a.json": [
        canal("INSERT", [{"id": "1", "v": "a"}]),
        canal("UPDATE", [{"id": "1", "v": "b"}], [{"v": "a"}]),
        canal("INSERT", [{"id": "2", "v": "x"}]),
        canal("DELETE", [{"id": "2", "v": "x"}]),
        canal("INSERT", [{"id": "3", "v": "p"}]),
        canal("DELETE", [{"id": "3", "v": "p"}]),
        canal("INSERT", [{"id": "3", "v": "q"}]),
    ]})
    assert rows(path, "id") == [{"id": 1, "v": "b"}, {"id": 3, "v": "q"}]
    t = summary.tables[0]
    assert (t.events, t.duplicate_or_late) == (7, 0)


def test_rows_of_a_later_message_that_ties_come_after_every_row_of_the_earlier_one(spark, tmp_path):
    """A real Canal batch (SeaTunnel's canal_data.txt has this shape): a multi-row INSERT, then an
    UPDATE and a DELETE of its later rows, all with one es and id. The row index orders only the
    rows of one message; the later message comes after the whole earlier one."""
    summary, path = apply_canal(spark, tmp_path, {"a.json": [
        canal("INSERT", [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}, {"id": "3", "v": "c"}]),
        canal("UPDATE", [{"id": "2", "v": "B"}], [{"v": "b"}]),
        canal("DELETE", [{"id": "3", "v": "c"}]),
        # an UPDATE statement whose rows change the key one after the other (id = id + 1, highest first)
        canal("UPDATE", [{"id": "5", "v": "a"}, {"id": "4", "v": "B"}], [{"id": "4"}, {"id": "2"}]),
    ]})
    assert rows(path, "id") == [{"id": 1, "v": "a"}, {"id": 4, "v": "B"}, {"id": 5, "v": "a"}]
    t = summary.tables[0]
    assert (t.events, t.duplicate_or_late) == (7, 0)


def test_update_and_delete_that_tie_leave_no_row(spark, tmp_path):
    # the row exists from an earlier batch; then an update and a delete of one key tie
    first = canal("INSERT", [{"id": "1", "v": "a"}], es=ES - 1000, id=1)
    summary, path = apply_canal(spark, tmp_path, {"a.json": [
        first,
        canal("UPDATE", [{"id": "1", "v": "b"}], [{"v": "a"}]),
        canal("DELETE", [{"id": "1", "v": "b"}]),
    ]})
    assert rows(path, "id") == []


def test_update_then_delete_tie_on_an_absent_row_invents_nothing(spark, tmp_path):
    summary, path = apply_canal(spark, tmp_path, {"a.json": [
        canal("UPDATE", [{"id": "1"}], [{"id": "1"}]),
        canal("DELETE", [{"id": "1"}]),
    ]})
    assert rows(path, "id") == []


def test_ties_across_files_follow_file_names(spark, tmp_path):
    summary, path = apply_canal(spark, tmp_path, {
        "b.json": [canal("UPDATE", [{"id": "1", "v": "b"}], [{"v": "a"}])],
        "a.json": [canal("INSERT", [{"id": "1", "v": "a"}])],
        "c.json": [canal("UPDATE", [{"id": "1", "v": "c"}], [{"v": "b"}])],
    })
    assert rows(path, "id") == [{"id": 1, "v": "c"}]


def test_an_exact_copy_of_a_message_is_still_a_duplicate(spark, tmp_path):
    ins = canal("INSERT", [{"id": "1", "v": "a"}])
    summary, path = apply_canal(spark, tmp_path, {"a.json": [ins, ins]})
    assert rows(path, "id") == [{"id": 1, "v": "a"}]
    assert summary.tables[0].duplicate_or_late == 1


# -- property: vendor positions tie, arrival decides (GoldenGate JSON against the oracle) ------------


@st.composite
def tied_scenarios(draw: st.DrawFn) -> Scenario:
    """A scenario whose keyed events come in groups sharing one vendor position (op_ts and pos):
    the oracle then orders each group by arrival, the order the run's file holds them in."""
    sc = draw(scenarios(max_events=20))
    sizes = draw(st.lists(st.integers(1, 4), min_size=len(sc.events), max_size=len(sc.events)))
    events: list[Event] = []
    lead: Event | None = None
    left = 0
    for e, size in zip(sc.events, sizes, strict=True):
        if e.op == "T":  # a truncate keeps a position of its own
            events.append(e)
            lead, left = None, 0
            continue
        if lead is None or left == 0:
            lead, left = e, size
        events.append(dataclasses.replace(e, op_ts=lead.op_ts, pos=lead.pos, idx=0))
        left -= 1
    return dataclasses.replace(sc, events=events)


@pytest.mark.spark
@pytest.mark.slow
@settings(max_examples=max(5, API_EXAMPLES // 2), **SLOW_SETTINGS)  # type: ignore[arg-type]
@given(sc=tied_scenarios())
def test_ties_apply_in_arrival_order_like_the_oracle(spark, tmp_path_factory, sc: Scenario) -> None:
    workdir = tmp_path_factory.mktemp("ties")
    target = workdir / "target"
    run_scenario(sc, workdir, target, api_applier(spark, sc, target))


# -- streams take files in name order ---------------------------------------------------------------


def _land(landing: Path, name: str, *messages: dict, mtime: int) -> Path:
    path = landing / name
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    os.utime(path, (mtime, mtime))
    return path.resolve()


@pytest.mark.spark
def test_stream_with_max_files_per_trigger_takes_files_in_name_order(spark, tmp_path):
    # every file has the same modification time: only the names say the order (each file's
    # changes follow the one before it); an insert taken after its updates would count as late
    landing = tmp_path / "landing"
    landing.mkdir()
    names = [f"part-{i:02d}.json" for i in range(6)]
    _land(landing, names[0], ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "A": "a0", "B": "b"}, keys=["ID"]),
          mtime=1_700_000_000)
    for i, name in enumerate(names[1:], start=1):
        _land(landing, name, ogg("S.T", "U", f"00:00:0{i + 1}", i + 1, before={"ID": 1}, after={"ID": 1, "A": f"a{i}"},
                                 keys=["ID"]), mtime=1_700_000_000)
    lake, by_apply = tmp_path / "lake", tmp_path / "by-apply"
    batches: list = []
    lakecdc.stream(landing, lake, format="ogg-json", spark=spark, on_batch=batches.append, max_files_per_trigger=1).await_termination()
    lakecdc.apply(landing, by_apply, format="ogg-json", spark=spark)
    expected = [{"ID": 1, "A": "a5", "B": "b"}]
    assert rows(by_apply / "S.T", "ID") == expected
    assert rows(lake / "S.T", "ID") == expected
    assert sum(b.summary.files for b in batches) == len(names)


def test_scd2_history_keeps_every_tied_change_in_message_order(spark, tmp_path):
    land = tmp_path / "land"
    land.mkdir()
    (land / "a.json").write_text("\n".join([
        canal("INSERT", [{"id": "1", "v": "a"}]),
        canal("UPDATE", [{"id": "1", "v": "b"}], [{"v": "a"}]),
        canal("INSERT", [{"id": "2", "v": "x"}]),
        canal("DELETE", [{"id": "2", "v": "x"}]),
    ]) + "\n")
    lakecdc.apply(str(land), str(tmp_path / "lake"), format="canal-json", spark=spark, stored_as_scd_type=2)
    got = rows(tmp_path / "lake" / "db.t")
    current = [(r["id"], r["v"]) for r in got if r["__END_AT"] is None]
    assert current == [(1, "b")]
    assert sorted((r["id"], r["v"]) for r in got) == [(1, "a"), (1, "b"), (2, "x")]


# -- property: the same with Canal batches (every message of a batch shares es and id) ---------------


def _one_batch_id(messages: list) -> list:
    """Canal messages as one batch writes them: every message has the same ``id``, so messages of
    one ``es`` tie on (es, id), and then the order they were written in decides."""
    out = []
    for m in messages:
        body = json.loads(m.text)
        body["id"] = BATCH
        seen = tuple(dataclasses.replace(e, pos=f"{BATCH:020d}") for e in m.events)
        out.append(type(m)(json.dumps(body, ensure_ascii=False, separators=(",", ":")), seen))
    return out


@pytest.mark.spark
@pytest.mark.slow
@settings(max_examples=max(3, API_EXAMPLES // 5), **SLOW_SETTINGS)  # type: ignore[arg-type]
@given(sc=tied_scenarios())
def test_canal_batches_apply_in_message_order_like_the_oracle(spark, tmp_path_factory, sc: Scenario) -> None:
    sc = dataclasses.replace(sc, pk_update="delete-insert" if sc.pk_update == "abend" else sc.pk_update)
    messages, message_of = canal_messages(sc.events, mysql_columns(sc.specs), primary_keys=sc.primary_keys)
    render = message_runs(_one_batch_id(messages), message_of, header=lambda _n: [])
    run_rendered_scenario(spark, sc, tmp_path_factory.mktemp("canal-ties"), fmt="canal-json", render=render, max_runs=2)
