"""SCD type 2 history tables (``stored_as_scd_type=2``) and Change Data Feed, end to end.

Real Spark, real Delta (delta-rs): golden cases written by hand, the history oracle
(``tests/history_oracle.py``: the current-state oracle watched event by event) against random
histories of ``test_property``'s generator, crashes and re-runs, late events across runs, CDF read
back with delta-rs, the MERGE's SQL form parsed by Spark, the CLI and job-file switches.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.errors import ConfigError
from lakecdc.lake.ledger import Ledger
from lakecdc.merge.history_plan import HistoryPlan
from tests.helpers import ogg, version, write_jsonl
from tests.history_oracle import HistoryOracle
from tests.ogg_render import write_runs
from tests.oracle import Event, PrimaryKeyUpdateError
from tests.test_property import Scenario, assert_names_a_pk_update, describe, scenarios

pytestmark = [pytest.mark.spark, pytest.mark.engines]

EXAMPLES = int(os.environ.get("LAKECDC_HISTORY_EXAMPLES", "6"))
VALIDITY = ("__START_AT", "__END_AT", "_cdc_start_seq", "_cdc_end_seq", "_cdc_seq", "_cdc_op", "_cdc_op_ts")


class Crash(RuntimeError):
    """Raised from the progress callback to stop a run at a chosen step, like a killed process."""


def crash_at(fragment: str):
    def say(msg: str) -> None:
        if fragment in msg:
            raise Crash(msg)

    return say


# ---- reading a history table --------------------------------------------------------------------


def versions(path: str | Path, key: str = "ID", cols: tuple[str, ...] = ("A", "B")) -> dict[Any, list[tuple]]:
    """``{key: [(A, B, start second, end second or None), ...]}`` in seq order (times as HH:MM:SS)."""
    table = pa.table(DeltaTable(str(path)).to_pyarrow_table()).to_pylist()
    out: dict[Any, list[tuple]] = {}
    for r in sorted(table, key=lambda r: (str(r[key]), r["_cdc_start_seq"])):
        end = r["__END_AT"].strftime("%H:%M:%S") if r["__END_AT"] is not None else None
        out.setdefault(r[key], []).append((*(r.get(c) for c in cols), r["__START_AT"].strftime("%H:%M:%S"), end))
    return out


def _pos(seq: str | None) -> str | None:
    return seq.split("|")[1].lstrip("0") if seq is not None else None


def history_problems(oracle: HistoryOracle, table: str, path: str | None) -> list[str]:
    """Differences between the Delta history table at ``path`` and the oracle's versions."""
    want = oracle.expected(table)
    if path is None or not DeltaTable.is_deltatable(path):
        return [f"{table}: no history table, the oracle holds {sum(map(len, want.values()))} versions"] if want else []
    keys, cols = oracle.current.keys(table), oracle.columns(table)
    data = pa.table(DeltaTable(path).to_pyarrow_table()).to_pylist()
    problems = [f"{table}: column {c!r} was never in the source"
                for c in (data[0] if data else {}) if c not in cols and c not in VALIDITY]
    got: dict[tuple, list[tuple]] = {}
    for r in sorted(data, key=lambda r: r["_cdc_start_seq"]):
        end = r["__END_AT"]
        got.setdefault(tuple(r[k] for k in keys), []).append((
            r["__START_AT"].strftime("%Y-%m-%d %H:%M:%S.%f"), _pos(r["_cdc_start_seq"]),
            end.strftime("%Y-%m-%d %H:%M:%S.%f") if end is not None else None, _pos(r["_cdc_end_seq"]),
            r["_cdc_op"], *(r.get(c) for c in cols),
        ))
    expected = {k: [(a, p.lstrip("0"), b, q.lstrip("0") if q else None, *rest) for a, p, b, q, *rest in vs]
                for k, vs in want.items()}
    for key in sorted(expected.keys() | got.keys(), key=repr):
        if expected.get(key, []) != got.get(key, []):
            problems.append(f"{table} key {key!r}:\n   found    {got.get(key, [])}\n   expected {expected.get(key, [])}")
    for key, vs in got.items():
        if sum(v[2] is None for v in vs) > 1:
            problems.append(f"{table} key {key!r}: more than one open version")
    return problems


# ---- golden cases -------------------------------------------------------------------------------


def test_history_versions_tracked_untracked_missing_pk_update_delete_reinsert_truncate(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    T = "S.T"
    write_jsonl(landing / "1.json", [
        ogg(T, "I", "00:00:01", 1, after={"ID": 1, "A": "x", "B": 1}, keys=["ID"]),
        ogg(T, "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "B": 2}, keys=["ID"]),      # untracked B: in place
        ogg(T, "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"]),    # tracked A, B missing
        ogg(T, "U", "00:00:04", 4, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"]),    # no change: in place
        ogg(T, "I", "00:00:05", 5, after={"ID": 2, "A": "p", "B": 5}, keys=["ID"]),
        ogg(T, "D", "00:00:06", 6, before={"ID": 2}, keys=["ID"]),
        ogg(T, "I", "00:00:07", 7, after={"ID": 2, "A": "q"}, keys=["ID"]),                       # re-insert: B NULL
        ogg(T, "U", "00:00:08", 8, before={"ID": 4, "A": "o"}, after={"ID": 4, "B": 4}, keys=["ID"]),  # unknown key
        ogg(T, "I", "00:00:05", 5, after={"ID": 2, "A": "p", "B": 5}, keys=["ID"]),             # a replay
        ogg(T, "I", "00:00:05", 15, after={"ID": 6, "A": "m"}, keys=["ID"]),
        ogg(T, "D", "00:00:06", 16, before={"ID": 6}, keys=["ID"]),
    ])
    # tombstones kept for no time at all: the closed versions alone stop late events
    opts: dict[str, Any] = {"stored_as_scd_type": {"S.*": 2}, "track_history_except_column_list": ["B"],
                            "tombstone_retention": dt.timedelta(0)}
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark, **opts)
    t = s.table(T)
    assert (t.events, t.duplicate_or_late, t.inserted, t.updated, t.deleted) == (11, 1, 6, 0, 0)
    assert versions(t.target) == {
        1: [("x", 2, "00:00:01", "00:00:03"), ("y", 2, "00:00:03", None)],
        2: [("p", 5, "00:00:05", "00:00:06"), ("q", None, "00:00:07", None)],
        4: [("o", 4, "00:00:08", None)],
        6: [("m", None, "00:00:05", "00:00:06")],
    }
    row = [r for r in DeltaTable(t.target).to_pyarrow_table().to_pylist() if r["ID"] == 1 and r["__END_AT"] is None][0]
    assert row["_cdc_op"] == "U" and row["_cdc_seq"] > row["_cdc_start_seq"]   # the in-place update at 00:00:04
    # a primary-key update, an untracked change, a truncate, then a new row; a late event is dropped
    write_jsonl(landing / "2.json", [
        ogg(T, "U", "00:00:09", 9, before={"ID": 1}, after={"ID": 1, "B": 9}, keys=["ID"]),
        ogg(T, "U", "00:00:10", 10, before={"ID": 2}, after={"ID": 3}, keys=["ID"]),
        ogg(T, "T", "00:00:11", 11),
        ogg(T, "I", "00:00:12", 12, after={"ID": 5, "A": "z"}, keys=["ID"]),
        ogg(T, "U", "00:00:03", 3, before={"ID": 4}, after={"ID": 4, "A": "late"}, keys=["ID"]),   # older than its row
        ogg(T, "U", "00:00:05", 17, before={"ID": 6}, after={"ID": 6, "A": "late"}, keys=["ID"]),  # before its delete
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark, **opts)
    t = s.table(T)
    assert (t.events, t.duplicate_or_late, t.inserted) == (6, 2, 2)
    assert versions(t.target) == {
        1: [("x", 2, "00:00:01", "00:00:03"), ("y", 9, "00:00:03", "00:00:11")],
        2: [("p", 5, "00:00:05", "00:00:06"), ("q", None, "00:00:07", "00:00:10")],
        3: [("q", None, "00:00:10", "00:00:11")],   # the new key's row: after, then before, then the old row
        4: [("o", 4, "00:00:08", "00:00:11")],      # closed by the truncate: nothing touched it in this run
        5: [("z", None, "00:00:12", None)],
        6: [("m", None, "00:00:05", "00:00:06")],
    }
    again = lakecdc.apply(landing, target, format="ogg-json", spark=spark, **opts)
    assert again.runs == () and version(t.target) == t.delta_version


def test_one_run_out_of_order_gives_the_history_of_the_events_in_order(spark, tmp_path):
    """Delivered out of order inside one run: the history of the events in seq order (written out
    by hand below); track_history_column_list; a key change and a truncate in the same run."""
    T = "S.T"
    events = [
        ogg(T, "I", "00:00:01", 1, after={"ID": 1, "A": "a", "B": 1}, keys=["ID"]),
        ogg(T, "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "A": "b"}, keys=["ID"]),   # A untracked
        ogg(T, "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "B": 2}, keys=["ID"]),     # B tracked
        ogg(T, "U", "00:00:04", 4, before={"ID": 1}, after={"ID": 9, "A": "c"}, keys=["ID"]),   # pk update
        ogg(T, "U", "00:00:05", 5, before={"ID": 9}, after={"ID": 9, "B": 3}, keys=["ID"]),
        ogg(T, "T", "00:00:06", 6),
        ogg(T, "I", "00:00:07", 7, after={"ID": 9, "A": "d", "B": 3}, keys=["ID"]),
        ogg(T, "U", "00:00:08", 8, before={"ID": 9}, after={"ID": 9, "A": "e"}, keys=["ID"]),
    ]
    want = {
        1: [("b", 1, "00:00:01", "00:00:03"), ("b", 2, "00:00:03", "00:00:04")],
        9: [("c", 2, "00:00:04", "00:00:05"), ("c", 3, "00:00:05", "00:00:06"), ("e", 3, "00:00:07", None)],
    }
    write_jsonl(tmp_path / "landing" / "a.json", events[::-1][3:] + events[::-1][:3])
    s = lakecdc.apply(tmp_path / "landing", tmp_path / "lake", format="ogg-json", spark=spark, stored_as_scd_type=2,
                      track_history_column_list={T: ["B"]})
    assert versions(s.table(T).target) == want


def test_a_crash_then_a_rerun_applies_each_history_exactly_once(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "a.json", [
        ogg("S.A", "I", "00:00:01", 1, after={"ID": 1, "A": "x"}, keys=["ID"]),
        ogg("S.B", "I", "00:00:02", 2, after={"ID": 1, "A": "x"}, keys=["ID"]),
        ogg("S.A", "U", "00:00:03", 3, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"]),
    ])
    hist = {"stored_as_scd_type": 2, "change_data_feed": True}
    with pytest.raises(Crash):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, progress=crash_at("S.B: merging"), **hist)
    a, b = str(target.resolve() / "S.A"), str(target.resolve() / "S.B")
    assert versions(a, cols=("A",)) == {1: [("x", "00:00:01", "00:00:03"), ("y", "00:00:03", None)]}
    assert not DeltaTable.is_deltatable(b) or not DeltaTable(b).to_pyarrow_table().num_rows
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark, **hist)
    assert s.resumed and s.table("S.A").status == "skipped"
    assert versions(a, cols=("A",)) == {1: [("x", "00:00:01", "00:00:03"), ("y", "00:00:03", None)]}
    assert versions(b, cols=("A",)) == {1: [("x", "00:00:02", None)]}
    # a crash after every commit, before the manifest closed: the re-run commits nothing
    write_jsonl(landing / "b.json", [ogg("S.A", "D", "00:00:04", 4, before={"ID": 1}, keys=["ID"])])
    with pytest.raises(Crash):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, progress=crash_at("recording the run"), **hist)
    v = version(a)
    lakecdc.apply(landing, target, format="ogg-json", spark=spark, **hist)
    assert version(a) == v
    assert versions(a, cols=("A",)) == {1: [("x", "00:00:01", "00:00:03"), ("y", "00:00:03", "00:00:04")]}
    assert [m.status for m in Ledger(target).manifests()] == ["committed", "committed"]
    # the Change Data Feed shows each version change once
    cdf = pa.table(DeltaTable(a).load_cdf(starting_version=0).read_all()).to_pylist()
    changes = sorted((r["_commit_version"], r["_change_type"], r["A"], r["__END_AT"] is None) for r in cdf)
    assert changes == [(1, "insert", "x", False), (1, "insert", "y", True),
                       (2, "update_postimage", "y", False), (2, "update_preimage", "y", True)]
    # a history table stays one: applied as a current-state table, the run stops, nothing committed
    write_jsonl(landing / "c.json", [ogg("S.A", "I", "00:00:05", 5, after={"ID": 1, "A": "z"}, keys=["ID"])])
    with pytest.raises(ConfigError, match="is an SCD type 2 history table"):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert version(a) == v


def test_change_data_feed_on_current_state_tables_and_a_type_switch_is_refused(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [
        ogg("S.C", "I", "00:00:01", 1, after={"ID": 1, "A": "x"}, keys=["ID"]),
        ogg("S.P", "I", "00:00:01", 3, after={"ID": 1, "A": "x"}, keys=["ID"]),
    ])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark, change_data_feed=["S.C"])
    c, p = (str(target.resolve() / t) for t in ("S.C", "S.P"))
    assert DeltaTable(p).metadata().configuration.get("delta.enableChangeDataFeed") is None
    write_jsonl(landing / "2.json", [
        ogg("S.C", "U", "00:00:02", 4, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"]),
        ogg("S.P", "U", "00:00:02", 5, before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=["ID"]),
    ])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark, change_data_feed=True)
    kinds = sorted((r["_commit_version"], r["_change_type"], r["A"]) for r in
                   pa.table(DeltaTable(c).load_cdf(starting_version=0).read_all()).to_pylist())
    assert kinds == [(1, "insert", "x"), (2, "update_postimage", "y"), (2, "update_preimage", "x")]
    # S.P got the property before its second merge: the feed starts there
    feed = pa.table(DeltaTable(p).load_cdf(starting_version=DeltaTable(p).version()).read_all()).to_pylist()
    assert sorted(r["_change_type"] for r in feed) == ["update_postimage", "update_preimage"]
    # a table keeps its kind: the run stops before committing anything
    write_jsonl(landing / "3.json", [ogg("S.C", "U", "00:00:03", 6, before={"ID": 1}, after={"ID": 1, "A": "z"}, keys=["ID"])])
    cv = DeltaTable(c).version()
    with pytest.raises(ConfigError, match="current-state table"):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, stored_as_scd_type=2)
    assert DeltaTable(c).version() == cv
    with pytest.raises(ConfigError, match="not both"):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, track_history_column_list={"S.H": ["A"]},
                      track_history_except_column_list={"S.H": ["A"]})
    with pytest.raises(ConfigError, match="1 .current state. or 2"):
        lakecdc.apply(landing, target, format="ogg-json", spark=spark, stored_as_scd_type=3)


def test_cli_and_job_file_switches(spark, tmp_path):
    from lakecdc.cli import main
    from lakecdc.jobs import load_job, run_job

    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [
        ogg("S.H", "I", "00:00:01", 1, after={"ID": 1, "A": "x", "B": 1}, keys=["ID"]),
        ogg("S.H", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "B": 2}, keys=["ID"]),
        ogg("S.C", "I", "00:00:01", 3, after={"ID": 1, "A": "x"}, keys=["ID"]),
    ])
    code = main(["apply", "--format", "ogg-json", "--input", str(landing), "--target", str(target), "--quiet",
                 "--scd2", "S.H", "--track-history", "S.H=A", "--change-data-feed"])
    assert code == 0
    h = target.resolve() / "S.H"
    assert versions(h) == {1: [("x", 2, "00:00:01", None)]}           # B is not tracked: in place
    assert DeltaTable(str(h)).metadata().configuration["delta.enableChangeDataFeed"] == "true"
    assert "__END_AT" not in DeltaTable(str(target.resolve() / "S.C")).schema().to_arrow().names
    job = tmp_path / "job.yaml"
    job.write_text(
        f"target: {tmp_path / 'lake2'}\nsources:\n  - input: {landing}\n    format: ogg-json\n"
        "tables:\n  include: [S.H]\n  stored_as_scd_type: {S.H: 2}\n  track_history_except_column_list: {S.H: [B]}\n"
        "change_data_feed: [S.H]\n"
    )
    result = run_job(load_job(job), spark=spark)
    assert result.ok
    assert versions(tmp_path / "lake2" / "S.H") == {1: [("x", 2, "00:00:01", None)]}
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"target: x\nsources:\n  - input: {landing}\n    format: ogg-json\ntables:\n  stored_as_scd_type: {{S.H: 3}}\n")
    with pytest.raises(ConfigError, match="bad.yaml:6"):
        load_job(bad)


def test_history_merge_sql_parses_with_sparks_own_parser(spark):
    when = dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)
    for plan in (
        HistoryPlan(table="S.T", path="/p", columns=("ID", "Odd `Name`"), keys=("ID",), version=3, key_ranges=((1, 9),)),
        HistoryPlan(table="S.T", path="/p", columns=("ID", "V"), keys=("ID",), version=3, truncates=(("a'1", when), ("b", when))),
    ):
        parsed = spark._jsparkSession.sessionState().sqlParser().parsePlan(plan.to_sql())
        assert parsed.getClass().getSimpleName() == "MergeIntoTable"
        assert parsed.matchedActions().size() == 1 and parsed.notMatchedActions().size() == 1
        assert parsed.notMatchedBySourceActions().size() == (1 if plan.truncates else 0)
        assert "__END_AT" in parsed.toString()
    # the truncate's time is read as UTC whatever the session's time zone
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        from lakecdc.merge.history_plan import timestamp_sql

        got = spark.sql(f"SELECT unix_micros({timestamp_sql(when)}) AS us").first()["us"]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert got == int((when - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds()) * 10**6 + 6


# ---- the property: random histories against the history oracle ---------------------------------


def run_history_scenario(spark: Any, sc: Scenario, tmp: Path, tracking: str) -> None:
    note(describe(sc) + f"\ntracking={tracking}")
    files = write_runs(sc.events, sc.runs, tmp / "runs", primary_keys=sc.primary_keys)
    names = [spec.name for spec in sc.specs]
    track = {"only C1": {t: ["C1"] for t in names}, "except C1": None, "all": None}[tracking]
    track_except = {t: ["C1"] for t in names} if tracking == "except C1" else None
    oracle = HistoryOracle(track=track, track_except=track_except)
    kwargs: dict[str, Any] = dict(
        format="ogg-json", keys=sc.keys(), pk_update=sc.pk_update, spark=spark, stored_as_scd_type=2,
        track_history_column_list=["C1"] if tracking == "only C1" else None,
        track_history_except_column_list=["C1"] if tracking == "except C1" else None,
    )
    target, applied, paths = tmp / "lake", [], {}
    for number, (run, path) in enumerate(zip(sc.runs, files, strict=True), start=1):
        run_events: list[Event] = [sc.events[i] for i in run]
        applied.append(str(path))
        try:
            expected = oracle.apply_run(run_events, pk_update=sc.pk_update)  # type: ignore[arg-type]
        except PrimaryKeyUpdateError:
            before = {p: DeltaTable(p).version() for p in paths.values() if DeltaTable.is_deltatable(p)}
            with pytest.raises(lakecdc.PrimaryKeyUpdateError) as info:
                lakecdc.apply(list(applied), target, **kwargs)
            assert_names_a_pk_update(str(info.value), run_events)
            assert {p: DeltaTable(p).version() for p in before} == before, "an abend run committed something"
            return
        summary = lakecdc.apply(list(applied), target, **kwargs)
        problems = []
        for t in summary.tables:
            paths[t.source_table] = t.target
            exp = expected.get(t.source_table)
            if exp is None:
                continue
            if (t.status, t.events, t.duplicate_or_late) != ("applied", exp.events, exp.duplicate_or_late):
                problems.append(f"{t.source_table}: (status, events, dup/late)={(t.status, t.events, t.duplicate_or_late)}, "
                                f"expected {('applied', exp.events, exp.duplicate_or_late)} {t.error or ''}")
        for table in oracle.tables():
            problems += history_problems(oracle, table, paths.get(table))
        assert not problems, f"after run {number}:\n" + "\n".join(problems)


@st.composite
def small_scenarios(draw: st.DrawFn) -> Scenario:
    """``test_property``'s scenarios with one or two tables (each table costs a merge per run)."""
    sc = draw(scenarios(max_events=16))
    names = {spec.name for spec in sc.specs[: draw(st.integers(1, 2))]}
    events = [i for i, e in enumerate(sc.events) if e.table in names]
    index = {old: new for new, old in enumerate(events)}
    runs = [[index[i] for i in run if i in index] for run in sc.runs]
    return Scenario(specs=[s for s in sc.specs if s.name in names], events=[sc.events[i] for i in events],
                    runs=[r for r in runs if r], pk_update=sc.pk_update, primary_keys=sc.primary_keys,
                    source={t: v for t, v in sc.source.items() if t in names})


# the same examples every run; no shrinking: each step re-runs Spark jobs (minutes), and the
# failure report already describes the whole scenario (note)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], print_blob=True)
@given(sc=small_scenarios(), tracking=st.sampled_from(["all", "only C1", "except C1"]))
def test_history_matches_the_oracle(spark: Any, tmp_path_factory: pytest.TempPathFactory, sc: Scenario, tracking: str) -> None:
    run_history_scenario(spark, sc, tmp_path_factory.mktemp("history"), tracking)


def test_history_oracle_on_its_own():
    """The oracle's own rules, without Spark: tracked vs untracked, pk update, truncate, stale."""
    def ev(op: str, sec: int, before: dict | None = None, after: dict | None = None) -> Event:
        return Event("S.T", op, f"2024-01-01 00:00:{sec:02d}.000000", f"{sec:020d}", 0, before, after, ("ID",) if op != "T" else ())

    h = HistoryOracle(track_except={"S.T": ["B"]})
    h.apply_run([ev("I", 1, after={"ID": 1, "A": 1, "B": 1}), ev("U", 2, {"ID": 1}, {"ID": 1, "B": 2}),
                 ev("U", 3, {"ID": 1}, {"ID": 2, "A": 1})])
    counts = h.apply_run([ev("U", 2, {"ID": 2}, {"ID": 2, "A": 9}), ev("T", 4), ev("I", 5, after={"ID": 2, "A": 3})])
    assert counts["S.T"].duplicate_or_late == 1
    got = {k: [(v.row.get("A"), v.row.get("B"), v.start[1][-1], v.end[1][-1] if v.end else None) for v in vs]
           for k, vs in h.versions("S.T").items()}
    assert got == {(1,): [(1, 2, "1", "3")], (2,): [(1, 2, "3", "4"), (3, None, "5", None)]}
    assert {k: r for k, r in h.current.table("S.T").items()} == {(2,): {"ID": 2, "A": 3, "B": None}}
