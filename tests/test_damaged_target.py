"""A damaged target is noticed: the ledger and the tables check each other.

Two damages seen on main: ``<target>/_lakecdc/`` deleted (run ids restarted at 1 and every table
skipped the new changes as runs it had committed, exit 0), and the newest ``_delta_log`` commit of
a table deleted (its rows lost, a later partial update recreated a row with NULLs). Now the next
run stops and says what is wrong and how to repair; ``lakecdc doctor`` reports it, ``lakecdc
repair`` mends it, and the tables then equal the oracle.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import lakecdc
from lakecdc.cli import main
from lakecdc.errors import LakecdcError
from lakecdc.lake.ledger import Ledger
from lakecdc.maintenance.doctor import TargetDamaged, diagnose
from lakecdc.merge.delta_rs import DeltaRsEngine
from tests.history_oracle import HistoryOracle
from tests.oracle import Event
from tests.test_writers import assert_equals_oracle, ev, land, quarantined

pytestmark = pytest.mark.spark


def wave1() -> list[Event]:
    return [
        ev("S.P", "I", 1, after={"ID": 1, "V": "a", "W": 1}), ev("S.P", "I", 2, after={"ID": 2, "V": "b", "W": 2}),
        ev("S.H", "I", 3, after={"ID": 1, "A": "x"}),
    ]


def wave2() -> list[Event]:
    return [
        ev("S.P", "U", 11, before={"ID": 1}, after={"ID": 1, "V": "a2", "W": 10}),
        ev("S.P", "I", 12, after={"ID": 5, "V": "e", "W": 5}),
        ev("S.H", "U", 13, before={"ID": 1}, after={"ID": 1, "A": "y"}),
    ]


def wave3() -> list[Event]:
    """Partial updates (only W) of rows wave 2 wrote: they must not make rows of NULLs."""
    return [
        ev("S.P", "U", 21, before={"ID": 5}, after={"ID": 5, "W": 50}),
        ev("S.P", "U", 22, before={"ID": 1}, after={"ID": 1, "W": 100}),
        ev("S.H", "U", 23, before={"ID": 1}, after={"ID": 1, "A": "z"}),
    ]


def run(landing: Path, target: Path, spark):
    return lakecdc.apply(landing, target, format="ogg-json", stored_as_scd_type={"S.H": 2}, spark=spark)


def two_runs(tmp_path: Path, spark) -> tuple[Path, Path, HistoryOracle]:
    landing, target = tmp_path / "landing", tmp_path / "lake"
    h = HistoryOracle()
    land(landing, "1.json", wave1(), bad=1)
    h.apply_run(wave1())
    assert run(landing, target, spark).runs == (1,)
    land(landing, "2.json", wave2())
    h.apply_run(wave2())
    assert run(landing, target, spark).runs == (2,)
    return landing, target, h


def test_lost_ledger_stops_the_run_and_repair_rebuilds_it(spark, tmp_path, capsys):
    landing, target, h = two_runs(tmp_path, spark)
    shutil.rmtree(target / "_lakecdc")
    land(landing, "3.json", wave3())
    h.apply_run(wave3())
    with pytest.raises(TargetDamaged) as damaged:
        run(landing, target, spark)
    text = str(damaged.value)
    assert "nothing was applied" in text
    assert f"the ledger {target / '_lakecdc' / 'runs'} is missing or empty" in text
    assert "committed run 2" in text
    assert f"lakecdc repair --target {target}" in text
    assert not (target / "_lakecdc" / "runs").exists()  # nothing planned
    assert main(["doctor", "--target", str(target)]) == 1
    assert "ledger-missing" in {p.kind for p in diagnose(DeltaRsEngine(), str(target))}
    capsys.readouterr()
    assert main(["repair", "--target", str(target)]) == 0
    out = capsys.readouterr().out
    assert "run 1: manifest rebuilt" in out and "run 2: manifest rebuilt" in out
    assert main(["doctor", "--target", str(target)]) == 0
    s = run(landing, target, spark)
    assert s.ok and s.runs == (3,) and s.files == 1  # only the new file; 1 and 2 are known again
    assert_equals_oracle(target, h)
    assert quarantined(target) == 1  # run 1's bad line was not quarantined again
    assert [m.run_id for m in Ledger(target).manifests()] == [1, 2, 3]


def test_deleted_delta_commit_stops_the_run_and_repair_reapplies_it(spark, tmp_path, capsys):
    landing, target, h = two_runs(tmp_path, spark)
    log = target / "S.P" / "_delta_log"
    newest = sorted(log.glob("*.json"))[-1]
    newest.unlink()  # run 2's merge into S.P
    land(landing, "3.json", wave3())
    h.apply_run(wave3())
    with pytest.raises(TargetDamaged) as damaged:
        run(landing, target, spark)
    text = str(damaged.value)
    version = int(newest.stem)
    assert f"table S.P at {target / 'S.P'} is at Delta version {version - 1}, but run 2 left it at version {version}" in text
    assert "were deleted" in text and "--reapply" in text
    assert main(["doctor", "--target", str(target)]) == 1
    capsys.readouterr()
    assert main(["repair", "--target", str(target)]) == 1  # without --reapply: said, not done
    assert "not repaired" in capsys.readouterr().out
    assert main(["repair", "--target", str(target), "--reapply"]) == 0
    assert "run 2: marked unfinished" in capsys.readouterr().out
    s = run(landing, target, spark)
    assert s.ok and s.runs == (2, 3)
    assert s.table("S.H").status == "applied"  # run 3's; run 2 was skipped by S.H, which had it
    assert_equals_oracle(target, h)  # row 5 is back whole, no NULLs; S.H not doubled
    assert quarantined(target) == 1


def test_missing_manifest_in_the_middle_is_reported(spark, tmp_path):
    landing, target, _ = two_runs(tmp_path, spark)
    (target / "_lakecdc" / "runs" / f"run-{1:010d}.json").unlink()
    problems = diagnose(DeltaRsEngine(), str(target))
    assert [p.kind for p in problems] == ["ledger-gap"]
    assert "run(s) 1" in problems[0].what
    with pytest.raises(TargetDamaged, match="lacks the manifest"):
        land(landing, "3.json", wave3())
        run(landing, target, spark)


def test_ledger_rebuilt_without_run_reports_applies_old_files_as_duplicates(spark, tmp_path, capsys):
    """Both the ledger and the run reports lost: repair still knows the runs the tables committed
    (their transaction versions), so run ids go on from there; the old files come again as a new
    run and the tables take them as the duplicates they are."""
    landing, target, h = two_runs(tmp_path, spark)
    shutil.rmtree(target / "_lakecdc")
    shutil.rmtree(target / "_lakecdc_runs")
    land(landing, "3.json", wave3())
    h.apply_run(wave3())
    with pytest.raises(TargetDamaged, match="committed run 2"):
        run(landing, target, spark)
    assert main(["repair", "--target", str(target)]) == 0
    assert "no run report names its inputs" in capsys.readouterr().out
    s = run(landing, target, spark)
    assert s.ok and s.runs == (3,) and s.files == 3
    assert_equals_oracle(target, h)


def test_unreadable_manifest_is_named_with_its_repair(tmp_path):
    runs = tmp_path / "lake" / "_lakecdc" / "runs"
    runs.mkdir(parents=True)
    (runs / f"run-{1:010d}.json").write_text('{"run_id": 1, "status": "comm')
    with pytest.raises(LakecdcError, match=r"manifest .*run-0000000001.json cannot be read .*'lakecdc repair --target"):
        Ledger(tmp_path / "lake").manifests()


def test_a_target_moved_whole_is_not_damaged(spark, tmp_path):
    """A target copied or moved elsewhere (a backup restored to another place) keeps its tables
    inside it: its runs recorded the old root, and the next run finds them where they are now."""
    landing, target, h = two_runs(tmp_path, spark)
    moved = tmp_path / "restored" / "lake"
    moved.parent.mkdir()
    shutil.move(str(target), str(moved))
    assert diagnose(DeltaRsEngine(), str(moved)) == []
    land(landing, "3.json", wave3())
    h.apply_run(wave3())
    assert run(landing, moved, spark).runs == (3,)
    assert_equals_oracle(moved, h)
