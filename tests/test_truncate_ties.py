"""A truncate whose seq ties keyed events is ordered by arrival like any other tie: an event that
arrived before it is wiped, one that arrived after it applies (semantics.md, ``arrival``), on
current-state and SCD2 history tables, with and without primary-key updates.

The events are rendered as GoldenGate JSON with one ``op_ts`` and one ``pos`` for the tied events
(a trail without positions), so only the place in the file orders them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lakecdc

try:
    import tests.test_history as test_history
    import tests.test_property as test_property
    from tests.helpers import ogg, rows, write_jsonl
    from tests.history_oracle import HistoryOracle
    from tests.oracle import Event, Oracle
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    import test_history  # type: ignore[no-redef]
    import test_property  # type: ignore[no-redef]
    from helpers import ogg, rows, write_jsonl  # type: ignore[no-redef]
    from history_oracle import HistoryOracle  # type: ignore[no-redef]
    from oracle import Event, Oracle  # type: ignore[no-redef]

T = "S.T"
TIE = 5  # the second every tied event shares


def ev(op: str, before: dict | None = None, after: dict | None = None, *, sec: int = TIE) -> Event:
    """An event of ``S.T`` at ``sec`` (its op_ts and pos): events of one ``sec`` tie."""
    return Event(T, op, f"2024-01-01 00:00:{sec:02d}.000000", f"{sec:020d}", 0, before, after,
                 ("ID",) if op != "T" else ())


def ins(i: int, a: str, **kw: Any) -> Event:
    return ev("I", None, {"ID": i, "A": a}, **kw)


def upd(i: int, a: str, *, to: int | None = None, **kw: Any) -> Event:
    return ev("U", {"ID": i}, {"ID": i if to is None else to, "A": a}, **kw)


TRUNC = ev("T")

#: name -> runs (each the events of one file, in the order written) and the rows expected after
#: the last run ({ID: A}); every case is also checked against the oracles.
CASES: dict[str, tuple[list[list[Event]], dict[int, str]]] = {
    "insert before the truncate wiped, insert after kept": (
        [[ins(1, "a"), TRUNC, ins(2, "b")]], {2: "b"}),
    "an earlier run's row and this run's update before the truncate wiped": (
        [[ins(1, "x", sec=1), ins(3, "y", sec=1)], [upd(1, "u"), TRUNC, ins(2, "b"), upd(2, "c")]], {2: "c"}),
    "an exact copy after the truncate is no duplicate of the wiped insert": (
        [[ins(1, "a"), TRUNC, ins(1, "a")]], {1: "a"}),
    "a copy of the truncate after an insert of its seq removes nothing": (
        [[TRUNC, ins(1, "a"), TRUNC]], {1: "a"}),
    "primary-key updates on both sides of the truncate": (
        [[ins(1, "a"), upd(1, "b", to=2), TRUNC, ins(3, "c"), upd(3, "d", to=4)]], {4: "d"}),
    "a later run's insert of the truncate's seq applies": (
        [[ins(1, "a"), TRUNC], [ins(2, "b")]], {2: "b"}),
}


def oracle_rows(runs: list[list[Event]]) -> dict[int, str]:
    oracle = Oracle()
    for run in runs:
        oracle.apply_run(run)
    return {k[0]: r["A"] for k, r in oracle.table(T).items()}


def scenario(runs: list[list[Event]], pk_update: str = "delete-insert") -> test_property.Scenario:
    events = [e for run in runs for e in run]
    starts = [sum(map(len, runs[:n])) for n in range(len(runs))]
    return test_property.Scenario(
        specs=[test_property.TableSpec(T, ("ID",), [(i,) for i in range(1, 5)], {"A": "str"})],
        events=events, runs=[list(range(s, s + len(run))) for s, run in zip(starts, runs, strict=True)],
        pk_update=pk_update, primary_keys=True, source={},
    )


@pytest.mark.parametrize("name", list(CASES))
def test_the_oracles_order_a_tied_truncate_by_arrival(name: str) -> None:
    """The oracle's rows after each case are the expected ones, and the history oracle's open
    versions equal them (a wiped row's version is closed at the truncate)."""
    runs, want = CASES[name]
    assert oracle_rows(runs) == want
    history = HistoryOracle()
    for run in runs:
        history.apply_run(run)
    open_rows = {k[0]: vs[-1].row["A"] for k, vs in history.versions(T).items() if vs[-1].end is None}
    assert open_rows == want


def test_the_oracle_keeps_a_row_an_earlier_run_stored_at_the_truncates_seq() -> None:
    """Across runs the seq alone decides: a row stored by an earlier run at the truncate's seq is
    not older than the truncate and stays, while rows below it go."""
    assert oracle_rows([[ins(1, "a"), ins(3, "z", sec=1)], [TRUNC, ins(2, "b")]]) == {1: "a", 2: "b"}


@pytest.mark.spark
@pytest.mark.parametrize("name", list(CASES))
def test_current_state_tables_follow_arrival_at_a_tied_truncate(spark, tmp_path, monkeypatch, name: str) -> None:
    """Each case, run after run, against the oracle (rows and counts), and the expected rows."""
    monkeypatch.setattr(test_property, "note", lambda _: None)
    runs, want = CASES[name]
    sc = scenario(runs)
    test_property.run_scenario(sc, tmp_path, tmp_path / "lake", test_property.api_applier(spark, sc, tmp_path / "lake"))
    assert {r["ID"]: r["A"] for r in rows(tmp_path / "lake" / T)} == want


@pytest.mark.spark
@pytest.mark.parametrize("name", list(CASES))
def test_history_tables_follow_arrival_at_a_tied_truncate(spark, tmp_path, monkeypatch, name: str) -> None:
    """Each case on an SCD2 table, against the history oracle's versions."""
    monkeypatch.setattr(test_history, "note", lambda _: None)
    runs, _ = CASES[name]
    test_history.run_history_scenario(spark, scenario(runs), tmp_path, "all")


@pytest.mark.spark
def test_update_mode_key_moves_on_both_sides_of_a_tied_truncate(spark, tmp_path, monkeypatch) -> None:
    """``pk_update="update"`` replays the moved keys per table: only the move after the truncate
    is left, as the oracle says."""
    monkeypatch.setattr(test_property, "note", lambda _: None)
    runs, want = CASES["primary-key updates on both sides of the truncate"]
    sc = scenario(runs, "update")
    test_property.run_scenario(sc, tmp_path, tmp_path / "lake", test_property.api_applier(spark, sc, tmp_path / "lake"))
    assert {r["ID"]: r["A"] for r in rows(tmp_path / "lake" / T)} == want


@pytest.mark.spark
@pytest.mark.engines
def test_a_row_an_earlier_run_stored_at_the_truncates_seq_stays(spark, tmp_path) -> None:
    """The merge keeps a row stored at the truncate's seq by an earlier run (not older than the
    truncate), and a row below it goes: the target equals the oracle, plain and SCD2."""
    for scd, lake in ((1, tmp_path / "plain"), (2, tmp_path / "history")):
        landing = tmp_path / f"landing{scd}"
        write_jsonl(landing / "1.json", [ogg(T, "I", "00:00:05", 5, after={"ID": 1, "A": "a"}, keys=["ID"]),
                                         ogg(T, "I", "00:00:01", 1, after={"ID": 3, "A": "z"}, keys=["ID"])])
        lakecdc.apply(landing, lake, format="ogg-json", spark=spark, stored_as_scd_type=scd)
        write_jsonl(landing / "2.json", [ogg(T, "T", "00:00:05", 5),
                                         ogg(T, "I", "00:00:05", 5, after={"ID": 2, "A": "b"}, keys=["ID"])])
        lakecdc.apply(landing, lake, format="ogg-json", spark=spark, stored_as_scd_type=scd)
        live = [r for r in rows(lake / T) if r.get("__END_AT") is None]
        assert {r["ID"]: r["A"] for r in live} == {1: "a", 2: "b"}


def test_scenario_helper_keeps_the_file_order() -> None:
    """The runs the Spark tests write hold the events in the order the cases list them."""
    sc = scenario([[ins(1, "a"), TRUNC], [ins(2, "b")]])
    assert [[sc.events[i] for i in run] for run in sc.runs] == [[ins(1, "a"), TRUNC], [ins(2, "b")]]


def test_cases_tie_the_truncate(tmp_path: Path) -> None:
    """Every case holds a keyed event of the truncate's seq (else it tests nothing here)."""
    for runs, _ in CASES.values():
        events = [e for run in runs for e in run]
        assert any(e.op != "T" and e.seq == TRUNC.seq for e in events)
