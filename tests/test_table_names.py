"""Source table names to Delta table directories (one per table), names that cannot be stored
as they are (too long, lakecdc's own column names), and targets made under the earlier rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.lake import state
from lakecdc.lake.state import MAX_DIR_CHARS, table_dir
from lakecdc.merge import delta_rs

try:
    from tests.helpers import ogg, rows, write_jsonl
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import ogg, rows, write_jsonl  # type: ignore[no-redef]

LONG = "SCHEMA." + "T" * 300
#: names the earlier rule sent to one directory (a_b; t_x; __)
NAMES = ["a/b", "a_b", "a b", "_x", "t_x", "é", "ü", "Ä.Ö", "..", "x" * 121, LONG]


def _safe(name: str) -> bool:
    return (0 < len(name) <= MAX_DIR_CHARS and not name.startswith(("_", "."))
            and all(c.isascii() and (c.isalnum() or c in "._$-~") for c in name))


def test_the_rule_keeps_plain_names_and_hashes_the_others():
    assert table_dir("QASOURCE.TCUSTORD") == "QASOURCE.TCUSTORD"
    assert table_dir("a_b") == "a_b" and table_dir("S.T$1-x") == "S.T$1-x"
    slash = table_dir("a/b")
    assert slash.startswith("a_b~") and len(slash) == len("a_b~") + 12 and slash == table_dir("a/b")  # stable
    assert table_dir("_x").startswith("t_x~") and table_dir("t_x") == "t_x"
    assert table_dir(LONG).startswith("SCHEMA.TTT") and len(table_dir(LONG)) == MAX_DIR_CHARS
    dirs = [table_dir(n) for n in NAMES]
    assert len(set(dirs)) == len(NAMES), dirs
    assert all(_safe(d) for d in dirs), dirs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=150), min_size=2, max_size=8, unique=True))
def test_distinct_names_get_distinct_safe_directories(names):
    dirs = [table_dir(n) for n in names]
    assert len(set(dirs)) == len(names)
    assert all(_safe(d) for d in dirs)


def _write(path: Path, table_rows: dict[str, list[dict]], pos: int = 1, op: str = "I") -> None:
    msgs = []
    for table, images in table_rows.items():
        for image in images:
            msgs.append(ogg(table, op, "00:00:01", pos, before={"ID": image["ID"]} if op == "U" else None,
                            after=image, keys=["ID"]))
            pos += 1
    write_jsonl(path, msgs)


def test_tables_whose_names_collapsed_keep_their_own_rows(spark, tmp_path):
    """``a/b`` and ``a_b`` (and non-ASCII names, a name too long for a file name) were one Delta
    table: the loser's rows vanished. Each is its own table now, run after run."""
    names = ["a/b", "a_b", "é.T", "ü.T", "_x", "t_x", LONG]
    _write(tmp_path / "in" / "1.json", {n: [{"ID": 1, "V": f"{i}"}] for i, n in enumerate(names)})
    lake = tmp_path / "lake"
    first = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert first.ok, first.render()
    targets = {t.source_table: t.target for t in first.tables}
    assert len(set(targets.values())) == len(names)
    assert {n: rows(targets[n]) for n in names} == {n: [{"ID": 1, "V": f"{i}"}] for i, n in enumerate(names)}
    # a later run finds each table where the first put it
    _write(tmp_path / "in" / "2.json", {n: [{"ID": 1, "V": f"new {i}"}] for i, n in enumerate(names)}, pos=100, op="U")
    second = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert second.ok, second.render()
    assert {t.source_table: t.target for t in second.tables} == targets
    assert {n: rows(targets[n]) for n in names} == {n: [{"ID": 1, "V": f"new {i}"}] for i, n in enumerate(names)}
    assert all(t.updated == 1 for t in second.tables)
    recorded = {json.loads(f.read_text())["table"] for f in (lake / "_lakecdc" / "tables").glob("*.json")}
    assert recorded == set(names)


def test_tables_made_under_the_earlier_rule_stay_where_they_are(spark, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    _write(tmp_path / "in" / "1.json", {"S/T": [{"ID": 1, "V": "a"}], "ÄB": [{"ID": 1, "V": "b"}]})
    with monkeypatch.context() as m:  # the earlier rule: a slug, no hash
        m.setattr(state, "table_dir", state._legacy_dir)
        old = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert {t.source_table: Path(t.target).name for t in old.tables} == {"S/T": "S_T", "ÄB": "t_B"}
    _write(tmp_path / "in" / "2.json", {"S/T": [{"ID": 1, "V": "a2"}], "ÄB": [{"ID": 2, "V": "b2"}]}, pos=10, op="U")
    new = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert new.ok, new.render()
    assert {t.source_table: Path(t.target).name for t in new.tables} == {"S/T": "S_T", "ÄB": "t_B"}
    assert rows(lake / "S_T") == [{"ID": 1, "V": "a2"}]
    assert rows(lake / "t_B", "ID") == [{"ID": 1, "V": "b"}, {"ID": 2, "V": "b2"}]
    assert sorted(p.name for p in lake.iterdir() if not p.name.startswith("_")) == ["S_T", "t_B"]


def test_a_table_whose_directory_holds_another_is_failed_with_a_message(spark, tmp_path, monkeypatch):
    """A target of the earlier rule where ``a/b`` holds directory ``a_b``: a table named ``a_b``
    is not merged into it; it fails, saying how to give it a place, and then applies there."""
    lake = tmp_path / "lake"
    _write(tmp_path / "in" / "1.json", {"a/b": [{"ID": 1, "V": "slash"}]})
    with monkeypatch.context() as m:
        m.setattr(state, "table_dir", state._legacy_dir)
        lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    _write(tmp_path / "in" / "2.json", {"a_b": [{"ID": 1, "V": "under"}], "a/b": [{"ID": 2, "V": "slash 2"}]}, pos=10)
    clash = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    by = {t.source_table: t for t in clash.tables}
    assert by["a_b"].status == "failed" and "holds table 'a/b'" in by["a_b"].error and "table_paths" in by["a_b"].error
    assert by["a/b"].status == "applied"
    assert rows(lake / "a_b", "ID") == [{"ID": 1, "V": "slash"}, {"ID": 2, "V": "slash 2"}]
    fixed = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark, table_paths={"a_b": "a_b_own"})
    assert fixed.ok, fixed.render()
    assert rows(lake / "a_b_own") == [{"ID": 1, "V": "under"}]
    assert rows(lake / "a_b", "ID") == [{"ID": 1, "V": "slash"}, {"ID": 2, "V": "slash 2"}]
    # and later runs keep both apart
    _write(tmp_path / "in" / "3.json", {"a_b": [{"ID": 1, "V": "u3"}], "a/b": [{"ID": 1, "V": "s3"}]}, pos=20, op="U")
    later = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert later.ok, later.render()
    assert rows(lake / "a_b_own") == [{"ID": 1, "V": "u3"}]
    assert rows(lake / "a_b", "ID") == [{"ID": 1, "V": "s3"}, {"ID": 2, "V": "slash 2"}]


def test_two_tables_an_earlier_rule_merged_are_not_merged_further(spark, tmp_path, monkeypatch):
    """Under the earlier rule ``a/b`` and ``a_b`` were applied to one directory (recorded as
    ``a_b``'s, the ledger says ``a/b``'s runs went there too): ``a/b`` is not moved silently nor
    merged further; it fails with a message until it is given a place of its own."""
    lake = tmp_path / "lake"
    _write(tmp_path / "in" / "1.json", {"a/b": [{"ID": 1, "V": "slash"}], "a_b": [{"ID": 2, "V": "under"}]})
    with monkeypatch.context() as m:
        m.setattr(state, "table_dir", state._legacy_dir)
        # those releases did not skip a commit whose (app_id, run) the table already held; today
        # the second table's commit of the run would be taken for a replay of the first's
        m.setattr(delta_rs, "_done", lambda *a: False)
        old = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark, parallel_tables=1)
    assert {Path(t.target).name for t in old.tables} == {"a_b"}
    assert rows(lake / "a_b", "ID") == [{"ID": 1, "V": "slash"}, {"ID": 2, "V": "under"}]
    _write(tmp_path / "in" / "2.json", {"a/b": [{"ID": 3, "V": "slash 3"}], "a_b": [{"ID": 4, "V": "under 4"}]}, pos=10)
    run = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    by = {t.source_table: t for t in run.tables}
    assert by["a_b"].status == "applied"
    assert by["a/b"].status == "failed" and "holds table 'a_b'" in by["a/b"].error
    assert rows(lake / "a_b", "ID") == [{"ID": 1, "V": "slash"}, {"ID": 2, "V": "under"}, {"ID": 4, "V": "under 4"}]
    fixed = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark, table_paths={"a/b": "a_slash_b"})
    assert fixed.ok, fixed.render()
    assert rows(lake / "a_slash_b") == [{"ID": 3, "V": "slash 3"}]
    assert json.loads((lake / "_lakecdc" / "tables" / "a_b.json").read_text())["table"] == "a_b"


def _reasons(summary) -> list[tuple[str, str]]:
    q = DeltaTable(summary.quarantine).to_pyarrow_table().to_pylist()
    return sorted((r["source_table"], r["reason"]) for r in q)


def test_a_column_named_like_lakecdcs_own_quarantines_its_records_and_later_runs_apply(spark, tmp_path):
    """A source column ``_cdc_seq`` (or any ``_cdc_`` name, in any case) failed the table on every
    run; its records are quarantined, naming the column, and the others apply, now and later."""
    lake = tmp_path / "lake"
    write_jsonl(tmp_path / "in" / "1.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "_cdc_seq": "x", "V": "a"}, keys=["ID"]),
        ogg("S.T", "I", "00:00:01", 2, after={"ID": 2, "V": "b"}, keys=["ID"]),
    ])
    first = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert first.ok, first.render()
    (t,) = first.tables
    assert (t.status, t.inserted, t.quarantined) == ("applied", 1, 1)
    assert rows(t.target) == [{"ID": 2, "V": "b"}]
    ((table, reason),) = _reasons(first)
    assert table == "S.T" and reason.startswith("column '_cdc_seq' has a name lakecdc keeps for its own columns")
    write_jsonl(tmp_path / "in" / "2.json", [
        ogg("S.T", "U", "00:00:02", 3, before={"ID": 2}, after={"ID": 2, "V": "b2"}, keys=["ID"]),
        ogg("S.T", "I", "00:00:02", 4, after={"ID": 3, "_CDC_OP": "z", "V": "c"}, keys=["ID"]),
    ])
    second = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert second.ok, second.render()
    (t,) = second.tables
    assert (t.status, t.updated, t.quarantined) == ("applied", 1, 1)
    assert rows(t.target) == [{"ID": 2, "V": "b2"}]
    assert any(r.startswith("column '_CDC_OP' has a name lakecdc keeps") for _t, r in _reasons(second))
    assert {f.name for f in DeltaTable(t.target).schema().fields} == {"ID", "V", "_cdc_seq", "_cdc_op", "_cdc_op_ts"}


def test_a_column_named_like_lakecdcs_own_can_be_left_out(spark, tmp_path):
    write_jsonl(tmp_path / "in" / "1.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "_cdc_seq": "x", "V": "a"}, keys=["ID"]),
    ])
    s = lakecdc.apply(str(tmp_path / "in"), tmp_path / "lake", format="ogg-json", spark=spark,
                      except_column_list={"S.T": ["_cdc_seq"]})
    assert s.ok, s.render()
    (t,) = s.tables
    assert (t.inserted, t.quarantined) == (1, 0) and rows(t.target) == [{"ID": 1, "V": "a"}]


def test_a_key_column_named_like_lakecdcs_own_is_a_clear_error(spark, tmp_path):
    write_jsonl(tmp_path / "in" / "1.json", [
        ogg("S.K", "I", "00:00:01", 1, after={"_cdc_id": 1, "V": "a"}, keys=["_cdc_id"]),
        ogg("S.OK", "I", "00:00:01", 2, after={"ID": 1, "V": "a"}, keys=["ID"]),
    ])
    s = lakecdc.apply(str(tmp_path / "in"), tmp_path / "lake", format="ogg-json", spark=spark)
    by = {t.source_table: t for t in s.tables}
    assert by["S.OK"].status == "applied"
    assert by["S.K"].status == "failed" and "key column '_cdc_id' has a name lakecdc keeps" in by["S.K"].error


def test_a_table_name_too_long_for_a_file_name_applies_run_after_run(spark, tmp_path):
    lake = tmp_path / "lake"
    _write(tmp_path / "in" / "1.json", {LONG: [{"ID": 1, "V": "a"}]})
    first = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert first.ok, first.render()
    (t,) = first.tables
    assert Path(t.target).name == table_dir(LONG) and len(Path(t.target).name) == MAX_DIR_CHARS
    _write(tmp_path / "in" / "2.json", {LONG: [{"ID": 1, "V": "b"}]}, pos=10, op="U")
    _write(tmp_path / "in" / "3.json", {LONG: [{"ID": 2, "V": "c"}]}, pos=20)
    second = lakecdc.apply(str(tmp_path / "in"), lake, format="ogg-json", spark=spark)
    assert second.ok, second.render()
    assert rows(t.target, "ID") == [{"ID": 1, "V": "b"}, {"ID": 2, "V": "c"}]


@pytest.mark.parametrize("name", ["__START_AT", "__end_at"])
def test_a_validity_column_of_a_history_table_is_quarantined(spark, tmp_path, name):
    write_jsonl(tmp_path / "in" / "1.json", [
        ogg("S.H", "I", "00:00:01", 1, after={"ID": 1, name: "x", "V": "a"}, keys=["ID"]),
        ogg("S.H", "I", "00:00:01", 2, after={"ID": 2, "V": "b"}, keys=["ID"]),
    ])
    s = lakecdc.apply(str(tmp_path / "in"), tmp_path / "lake", format="ogg-json", spark=spark, stored_as_scd_type=2)
    assert s.ok, s.render()
    (t,) = s.tables
    assert (t.inserted, t.quarantined) == (1, 1)
    assert f"column '{name}' has a name lakecdc keeps" in _reasons(s)[0][1]
