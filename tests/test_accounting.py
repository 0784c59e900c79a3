"""Every record read is accounted for: applied, duplicate/late, skipped with its exact kind, or
quarantined with a true reason; key/value dumps (kcat -K); runs whose files were all quarantined;
re-applying chosen files; values longer than Jackson's default string limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lakecdc

try:
    from tests.helpers import ogg, rows, write_jsonl
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import ogg, rows, write_jsonl  # type: ignore[no-redef]

BIG = 21_000_000  # over Jackson's default maxStringLength (20,000,000), Spark's JSON reader's limit


@pytest.mark.spark
def test_a_value_over_20_mb_applies(spark, tmp_path):
    big = "x" * BIG
    write_jsonl(tmp_path / "land" / "a.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "DOC": big}, keys=["ID"]),
        ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "DOC": "small"}, keys=["ID"]),
    ])
    summary = lakecdc.apply(tmp_path / "land", tmp_path / "lake", format="ogg-json", spark=spark)
    t = summary.table("S.T")
    assert (t.inserted, t.quarantined) == (2, 0)
    got = {r["ID"]: r["DOC"] for r in rows(tmp_path / "lake" / "S.T", "ID")}
    assert len(got[1]) == BIG and got[2] == "small"


# -- kcat -K key/value dumps ------------------------------------------------------------------------


def dbz(op: str, after: dict | None, before: dict | None = None, ts: int = 1700000000000, table: str = "t") -> dict:
    return {"before": before, "after": after, "op": op, "ts_ms": ts,
            "source": {"connector": "mysql", "db": "shop", "table": table, "ts_ms": ts, "file": "binlog.000001",
                       "pos": ts - 1699999999000, "row": 0, "server_id": 1, "name": "srv"}}


@pytest.mark.spark
def test_kcat_key_value_lines_with_a_placeholder_key_apply(spark, tmp_path):
    land = tmp_path / "land"
    land.mkdir()
    (land / "dump.txt").write_text("\n".join([
        "****^" + json.dumps(dbz("c", {"id": 1, "v": "a"}, ts=1700000001000)),
        '{"id":2}^' + json.dumps(dbz("c", {"id": 2, "v": "b"}, ts=1700000002000)),
        "****^" + json.dumps(dbz("u", {"id": 1, "v": "c"}, {"id": 1, "v": "a"}, ts=1700000003000)),
        '{"id":2}^',  # a tombstone (kcat prints a null value as nothing)
        "// a comment stays a comment",
    ]) + "\n")
    summary = lakecdc.apply(land, tmp_path / "lake", format="debezium-json", keys={"shop.t": ["id"]}, spark=spark)
    t = summary.table("shop.t")
    assert (t.events, t.quarantined) == (3, 0)
    assert rows(tmp_path / "lake" / "shop.t", "id") == [{"id": 1, "v": "c"}, {"id": 2, "v": "b"}]
    kinds = {**summary.skipped_unrouted_kinds}
    for x in summary.tables:
        kinds.update(x.skipped_kinds)
    assert kinds == {"tombstone": 1, "comment": 1}


# -- skipped records by kind, every record accounted for per file -----------------------------------


def canal(type_: str, data: list[dict] | None, **members) -> str:
    msg = {"data": data, "database": "db", "table": "t", "es": 1600000000000, "id": 1, "isDdl": False,
           "old": None, "pkNames": ["id"], "sql": "", "ts": 1600000000500, "type": type_,
           "mysqlType": {"id": "bigint(20)", "v": "varchar(10)"}, "sqlType": {"id": -5, "v": 12}}
    return json.dumps({**msg, **members})


@pytest.mark.spark
def test_skipped_records_are_reported_by_kind_and_every_record_per_file(spark, tmp_path):
    land = tmp_path / "land"
    land.mkdir()
    (land / "a.json").write_text("\n".join([
        canal("INSERT", [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}]),
        canal("ALTER", None, isDdl=True, sql="ALTER TABLE t ADD c INT", id=2),
        canal("HEARTBEAT", None, id=3),
        "this is not JSON",
    ]) + "\n")
    (land / "b.json").write_text(canal("DELETE", [{"id": "2", "v": "b"}], id=4) + "\n")
    summary = lakecdc.apply(land, tmp_path / "lake", format="canal-json", spark=spark)
    kinds = dict(summary.skipped_unrouted_kinds)
    for x in summary.tables:
        for k, n in x.skipped_kinds.items():
            kinds[k] = kinds.get(k, 0) + n
    assert kinds == {"ddl": 1, "heartbeat": 1}
    text = summary.render()
    assert "2 record(s) skipped, no row change: 1 ddl, 1 heartbeat" in text
    assert "tombstones, heartbeats, transaction markers" not in text
    acc = {Path(f).name: a for f, a in summary.file_accounts.items()}
    assert acc == {
        "a.json": {"applied": 2, "skipped:ddl": 1, "skipped:heartbeat": 1, "quarantined": 1},
        "b.json": {"applied": 1},
    }
    assert summary.unreadable_files == ()
    assert summary.to_dict()["file_accounts"] == summary.file_accounts


# -- per file: applied, duplicate/late, held, skipped, quarantined add up to the records read -----


def _lines(path: Path, records: list) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return len(records)


def _by_name(summary) -> dict[str, dict[str, int]]:
    return {Path(f).name: acc for f, acc in summary.file_accounts.items()}


def _spy_fast_path(monkeypatch) -> list:
    """The fast path's results, one per run (None: the run took the ordinary path)."""
    from lakecdc.run import apply as api

    taken: list = []
    real = api.fast_path

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        taken.append(out)
        return out

    monkeypatch.setattr(api, "fast_path", spy)
    return taken


@pytest.mark.spark
def test_every_file_splits_into_applied_duplicate_late_skipped_quarantined(spark, tmp_path, monkeypatch):
    taken = _spy_fast_path(monkeypatch)
    land, lake = tmp_path / "land", tmp_path / "lake"
    update = ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"])
    read = {
        "a.json": _lines(land / "a.json", [
            ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "A": "x"}, keys=["ID"]),
            update,
            ogg("S.U", "I", "00:00:03", 3, after={"ID": 1, "B": "p"}, keys=["ID"]),
            ogg("S.T", "T", "00:00:04", 4),  # read, not applied: skipped
            "this is not JSON",
        ]),
        "b.json": _lines(land / "b.json", [
            update,  # a copy of a.json's update, read after it: a duplicate
            ogg("S.U", "I", "00:00:05", 5, after={"ID": 2, "B": "q"}, keys=["ID"]),
        ]),
    }
    first = lakecdc.apply(land, lake, format="ogg-json", spark=spark, apply_as_truncates=False)
    assert _by_name(first) == {
        "a.json": {"applied": 3, "skipped:truncate (apply_as_truncates off)": 1, "quarantined": 1},
        "b.json": {"applied": 1, "duplicate_or_late": 1},
    }
    assert first.table("S.T").duplicate_or_late == 1
    newer = ogg("S.T", "U", "00:00:06", 6, before={"ID": 1}, after={"ID": 1, "A": "z"}, keys=["ID"])
    read.update({
        "c.json": _lines(land / "c.json", [
            update,  # applied by the first run: late
            newer,
            ogg("S.U", "I", "00:00:07", 7, after={"ID": "not a number", "B": "r"}, keys=["ID"]),  # quarantined
        ]),
        "d.json": _lines(land / "d.json", [newer]),  # a copy of c.json's: a duplicate
    })
    second = lakecdc.apply(land, lake, format="ogg-json", spark=spark, apply_as_truncates=False)
    assert taken == [None, None]  # (two tables: the ordinary path)
    assert _by_name(second) == {
        "c.json": {"applied": 1, "duplicate_or_late": 1, "quarantined": 1},
        "d.json": {"duplicate_or_late": 1},
    }
    assert second.table("S.T").duplicate_or_late == 2 and second.table("S.U").quarantined == 1
    for s in (first, second):
        for name, acc in _by_name(s).items():
            assert sum(acc.values()) == read[name], (name, acc)
    assert second.to_dict()["file_accounts"] == second.file_accounts
    text = second.render()
    assert "1 applied, 1 duplicate or late, 1 quarantined" in text and "d.json: 1 duplicate or late" in text
    assert rows(lake / "S.T", "ID") == [{"ID": 1, "A": "z"}]


@pytest.mark.spark
def test_the_single_table_fast_path_accounts_every_file(spark, tmp_path, monkeypatch):
    taken = _spy_fast_path(monkeypatch)
    land, lake = tmp_path / "land", tmp_path / "lake"
    _lines(land / "a.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "A": "x"}, keys=["ID"])])
    lakecdc.apply(land, lake, format="ogg-json", spark=spark)
    insert = ogg("S.T", "I", "00:00:03", 3, after={"ID": 2, "A": "b"}, keys=["ID"])
    _lines(land / "b.json", [
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"]),
        insert,
    ])
    _lines(land / "c.json", [
        insert,  # a copy of b.json's insert: a duplicate
        ogg("S.T", "U", "00:00:04", 4, before={"ID": 2}, after={"ID": 2, "A": "c"}, keys=["ID"]),
        insert,  # a third copy: by (seq, arrival) it sorts right after the other two, a duplicate too
    ])
    summary = lakecdc.apply(land, lake, format="ogg-json", spark=spark)
    assert taken[-1] is not None  # the fast path took the run
    assert _by_name(summary) == {"b.json": {"applied": 2}, "c.json": {"applied": 1, "duplicate_or_late": 2}}
    assert summary.table("S.T").duplicate_or_late == 2
    assert rows(lake / "S.T", "ID") == [{"ID": 1, "A": "y"}, {"ID": 2, "A": "c"}]


@pytest.mark.spark
def test_a_history_table_accounts_duplicate_and_late_per_file(spark, tmp_path):
    land, lake = tmp_path / "land", tmp_path / "lake"
    update = ogg("S.H", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"])
    _lines(land / "a.json", [ogg("S.H", "I", "00:00:01", 1, after={"ID": 1, "A": "x"}, keys=["ID"]), update])
    _lines(land / "b.json", [update, ogg("S.H", "I", "00:00:03", 3, after={"ID": 2, "A": "q"}, keys=["ID"])])
    first = lakecdc.apply(land, lake, format="ogg-json", spark=spark, stored_as_scd_type=2)
    assert _by_name(first) == {"a.json": {"applied": 2}, "b.json": {"applied": 1, "duplicate_or_late": 1}}
    _lines(land / "c.json", [
        update,  # late
        ogg("S.H", "U", "00:00:04", 4, before={"ID": 2}, after={"ID": 2, "A": "r"}, keys=["ID"]),
        "not JSON",
    ])
    second = lakecdc.apply(land, lake, format="ogg-json", spark=spark, stored_as_scd_type=2)
    assert _by_name(second) == {"c.json": {"applied": 1, "duplicate_or_late": 1, "quarantined": 1}}
    assert second.table("S.H").duplicate_or_late == 1


# -- a run with the wrong format; re-applying chosen files ------------------------------------------


@pytest.mark.spark
def test_a_wrong_format_run_fails_and_reapply_reads_the_files_again(spark, tmp_path, capsys):
    from lakecdc.cli import main

    land, lake = tmp_path / "land", tmp_path / "lake"
    write_jsonl(land / "a.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "A": "x"}, keys=["ID"]),
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"]),
    ])
    base = ["apply", "--input", str(land), "--target", str(lake), "--quiet"]
    assert main([*base, "--format", "canal-json"]) == 1
    out = capsys.readouterr().out
    assert "1 file(s) gave no row change" in out and "a.json" in out and "--reapply" in out

    # the right format alone finds nothing new: the file is recorded as applied
    assert main([*base, "--format", "ogg-json"]) == 0
    assert "none (nothing new)" in capsys.readouterr().out
    assert not (lake / "S.T").exists()

    assert main([*base, "--format", "ogg-json", "--reapply", "*.json"]) == 0
    assert rows(lake / "S.T", "ID") == [{"ID": 1, "A": "y"}]
    # ... once: the file is recorded again, and a second run has nothing new
    assert main([*base, "--format", "ogg-json"]) == 0
    assert "none (nothing new)" in capsys.readouterr().out


@pytest.mark.spark
def test_reapply_names_no_file_applied_before(spark, tmp_path):
    write_jsonl(tmp_path / "land" / "a.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1}, keys=["ID"])])
    with pytest.raises(lakecdc.ConfigError, match="reapply"):
        lakecdc.apply(tmp_path / "land", tmp_path / "lake", format="ogg-json", spark=spark, reapply=["nothing-*.json"])


# -- property: every record read is accounted for, for every format ---------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lakecdc.decode import DECODERS  # noqa: E402
from lakecdc.lake.summary import FILE_ACCOUNTS  # noqa: E402
from lakecdc.run.profile import NO_ROW_CHANGE, profile_events  # noqa: E402

try:
    from tests.test_property import API_EXAMPLES, SLOW_SETTINGS
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from test_property import API_EXAMPLES, SLOW_SETTINGS  # type: ignore[no-redef]

#: A record per line at least, whatever the line holds (a line a format cannot read is a bad record).
LINE_FORMATS = ("ogg-json", "canal-json", "debezium-json", "shareplex-json", "ogg-json-row")


def _records(i: int) -> dict[str, str]:
    """Single-line records of several formats, and lines of no format, by kind."""
    return {
        "ogg insert": json.dumps(ogg("S.T", "I", "00:00:01", i + 1, after={"ID": i, "A": "x"}, keys=["ID"])),
        "ogg truncate": json.dumps(ogg("S.T", "T", "00:00:01", i + 1)),
        # the same record wherever it is: copies after the first are duplicates
        "ogg insert copy": json.dumps(ogg("S.T", "I", "00:00:00", 0, after={"ID": -1, "A": "x"}, keys=["ID"])),
        "canal insert": canal("INSERT", [{"id": str(i), "v": "a"}], id=i + 1),
        "canal ddl": canal("ALTER", None, isDdl=True, sql="ALTER TABLE t ADD c INT", id=i + 1),
        "canal heartbeat": canal("HEARTBEAT", None, id=i + 1),
        "debezium create": json.dumps(dbz("c", {"id": i, "v": "a"}, ts=1700000000000 + i)),
        "kcat placeholder key": "****^" + json.dumps(dbz("c", {"id": i, "v": "a"}, ts=1700000000000 + i)),
        "kcat tombstone": f'{{"id":{i}}}^',
        "comment": "// a comment",
        "not JSON": f"garbage {i}",
        "JSON array": "[1, 2]",
        "JSON scalar": "42",
        "empty object": "{}",
    }


@st.composite
def landing_files(draw: st.DrawFn) -> list[list[str]]:
    kinds = sorted(_records(0))
    files = draw(st.lists(st.lists(st.sampled_from(kinds), min_size=1, max_size=6), min_size=1, max_size=3))
    return [[_records(n * 10 + i)[k] for i, k in enumerate(f)] for n, f in enumerate(files)]


@pytest.mark.spark
@pytest.mark.slow
@settings(max_examples=max(3, API_EXAMPLES // 5), **SLOW_SETTINGS)  # type: ignore[arg-type]
@given(files=landing_files())
def test_every_record_is_accounted_for_in_every_format(spark, tmp_path_factory, files):
    land = tmp_path_factory.mktemp("acc")
    paths = []
    for n, lines in enumerate(files):
        path = land / f"f{n}.txt"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path.resolve()))
    for fmt in sorted(DECODERS):
        try:
            events = lakecdc.read_changes(paths, format=fmt, spark=spark)
            *_, accounts = profile_events(events)
        except lakecdc.ConfigError:  # the run refuses the input, saying why (e.g. no Avro schemas): nothing lost
            continue
        for path, lines in zip(paths, files, strict=True):
            acc = accounts.files.get(path, {})
            # a record is never skipped without its kind (a record that is no change of this format
            # is quarantined with the reason, not skipped as nothing)
            assert f"skipped:{NO_ROW_CHANGE}" not in acc, (fmt, path, acc)
            assert sum(acc.values()) >= 1, (fmt, path, acc)
            if fmt in LINE_FORMATS:
                # every line is a record at least (a line a reader splits, '{...}^', may be more)
                assert sum(acc.values()) >= len(lines), (fmt, path, lines, acc)
        if fmt in APPLY_FORMATS:
            _check_applied_accounts(spark, fmt, land, paths, files, accounts, tmp_path_factory.mktemp("lake"))


#: Formats whose runs the property also applies (twice: the second run re-reads every file).
APPLY_FORMATS = {"ogg-json": None, "canal-json": None, "debezium-json": {"shop.t": ["id"]}}


def _check_applied_accounts(spark, fmt, land, paths, files, profiled, lake) -> None:
    """A run's file accounts add up to the records read per file; its duplicate/late ones to the
    tables' counts; re-applying every file finds every row change (but truncates) late."""
    try:
        runs = [lakecdc.apply(land, lake, format=fmt, keys=APPLY_FORMATS[fmt], spark=spark)]
    except lakecdc.ConfigError:  # refused, saying why, before anything was committed: nothing lost
        return
    if runs[0].ok:
        runs.append(lakecdc.apply(land, lake, format=fmt, keys=APPLY_FORMATS[fmt], reapply="*", spark=spark))
    else:  # a failed table (rows without keys): its run is resumed first, files are not re-applied
        with pytest.raises(lakecdc.InputChangedError, match="did not finish"):
            lakecdc.apply(land, lake, format=fmt, keys=APPLY_FORMATS[fmt], reapply="*", spark=spark)
    for s in runs:
        assert set(s.file_accounts) <= set(paths), (fmt, s.file_accounts)
        assert sum(a.get("duplicate_or_late", 0) for a in s.file_accounts.values()) == sum(
            t.duplicate_or_late for t in s.tables), (fmt, s.file_accounts, s.tables)
        for path in paths:
            acc = s.file_accounts.get(path, {})
            assert sum(acc.values()) == sum(profiled.files.get(path, {}).values()), (fmt, path, acc)
            assert set(acc) <= {*FILE_ACCOUNTS, *(k for k in acc if k.startswith("skipped:"))}, acc
    if len(runs) == 1:
        return
    first, again = runs
    for path, lines in zip(paths, files, strict=True):
        one, two = first.file_accounts.get(path, {}), again.file_accounts.get(path, {})
        changes = [a.get("applied", 0) + a.get("duplicate_or_late", 0) for a in (one, two)]
        assert changes[0] == changes[1], (fmt, path, one, two)
        if not (fmt == "ogg-json" and any('"op_type": "T"' in line for line in lines)):  # (a truncate applies)
            assert two.get("applied", 0) == 0, (fmt, path, lines, two)


@pytest.mark.spark
@pytest.mark.parametrize("sep", ["^", "\t", ":"])
def test_kcat_key_value_dumps_of_json_formats_apply(spark, tmp_path, sep):
    land = tmp_path / "land"
    land.mkdir()
    (land / "dump.txt").write_text("\n".join([
        f"****{sep}" + canal("INSERT", [{"id": "1", "v": "a"}], id=1),
        f'{{"id":1}}{sep}' + canal("UPDATE", [{"id": "1", "v": "b"}], old=[{"v": "a"}], id=2),
        f"****{sep}" + canal("INSERT", [{"id": "2", "v": "c"}], id=3),
    ]) + "\n")
    summary = lakecdc.apply(land, tmp_path / "lake", format="canal-json", spark=spark)
    t = summary.table("db.t")
    assert (t.events, t.quarantined) == (3, 0)
    assert rows(tmp_path / "lake" / "db.t", "id") == [{"id": 1, "v": "b"}, {"id": 2, "v": "c"}]


@pytest.mark.spark
def test_a_truncate_of_a_table_never_created_is_applied_as_nothing(spark, tmp_path):
    """A file holding only a truncate of a table lakecdc has not created (no keys, no columns):
    nothing to empty and nothing to build, so the run applies it as nothing instead of failing the
    table for want of keys; the file can be re-applied, and a later run with rows creates the table."""
    land, lake = tmp_path / "land", tmp_path / "lake"
    land.mkdir()
    (land / "f0.txt").write_text('{"table": "S.T", "op_type": "T", "op_ts": "2020-01-01 00:00:01.000000", '
                                 '"current_ts": "2020-01-01T00:00:00.000000", "pos": "00000000000000000001"}\n')
    first = lakecdc.apply(land, lake, format="ogg-json", spark=spark)
    assert first.ok, first.render()
    assert first.file_accounts == {str((land / "f0.txt").resolve()): {"applied": 1}}
    assert not (lake / "S.T").exists()
    again = lakecdc.apply(land, lake, format="ogg-json", reapply="*", spark=spark)
    assert again.ok, again.render()
    (land / "f1.txt").write_text(json.dumps({"table": "S.T", "op_type": "I", "op_ts": "2020-01-01 00:00:02.000000",
                                             "current_ts": "2020-01-01T00:00:03.000000", "pos": "00000000000000000002",
                                             "primary_keys": ["ID"], "after": {"ID": 1, "V": "a"}}) + "\n")
    later = lakecdc.apply(land, lake, format="ogg-json", spark=spark)
    assert later.ok, later.render()
    rows = lakecdc.read_table(later.table("S.T").target, spark=spark).select("ID", "V").collect()
    assert [r.asDict() for r in rows] == [{"ID": 1, "V": "a"}]
