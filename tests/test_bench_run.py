"""The merge benchmark (bench/run.py) gives each contender a process and JVM of its own, a fresh
one per round, the contenders taking turns, and reports their runs together as one run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import run as bench_run  # noqa: E402

pytestmark = pytest.mark.spark


def test_each_contender_runs_in_a_process_of_its_own_every_round(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bench.run", "--events", "2000", "--keys", "500", "--workdir", str(tmp_path),
            "--only", "floor,peer", "--repeat", "2", "--warmup", "0"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True)
    out = done.stdout
    # turns: floor, peer, floor, peer, each announced, then run by a child of its own
    rounds = re.findall(r"round (\d)/2: (\w+) in a process of its own", out)
    assert rounds == [("1", "floor"), ("1", "peer"), ("2", "floor"), ("2", "peer")]
    # one JVM per child of the peer (and one line in the report); the floor's children start none
    assert out.count("Spark start-up (fresh JVM)") == 3
    assert out.count("No Spark session: no contender measured here needs one.") == 2
    assert len(re.findall(r"(floor|peer) run 1/1 \(timed\)", out)) == 4
    assert "a Python process and Spark JVM of its own, a fresh one per round" in out
    assert "In the first with a JVM: Spark start-up" in out  # (the peer's child's, not the floor's)
    table = out[out.rindex("| contender |"):]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    assert set(rows) == {"contender", "floor", "peer"}
    assert "1.00" in rows["peer"] and "of 891" in rows["peer"]  # the peer's wrong rows, checked in its child
    # each child left its outcome for the parent: the last round's
    child = bench_run.Measured.from_json(json.loads((tmp_path / "outcome-run-peer.json").read_text()))
    (peer,) = child.outcomes
    assert peer.contender.name == "peer" and len(peer.seconds) == 1 and peer.checks[0].expected_rows == 891


def test_runs_of_several_processes_merge_into_one_outcome() -> None:
    peer = bench_run.CONTENDERS["peer"]
    merged = bench_run.Outcome(peer, 0)
    check = bench_run.Check(10, 10, 0, 0, 1, {"X": 1}, [])
    for seconds, peak in (([9.0, 3.0], 5), ([8.0, 4.0], 7)):
        child = bench_run.Outcome(peer, 1, seconds, [2 * s for s in seconds], peak, peak - 1, [check])
        merged.add_timed(bench_run.Outcome.from_json(json.loads(json.dumps(child.to_json()))))
    assert merged.seconds == [3.0, 4.0] and merged.cpu == [6.0, 8.0]  # the warm-up runs left out
    assert merged.first == 9.0 and merged.median == 3.5
    assert (merged.peak, merged.above_baseline, len(merged.checks)) == (7, 6, 2)
    assert merged.worst == check
