"""Crash safety of a scheduled job (issue 6): the ``lakecdc run`` process is killed with SIGKILL at
points of a multi-table run (while decoding, between two tables' merges, right after the Delta
commits, during maintenance), the job is run again, and the tables must equal the oracle: nothing
lost, nothing applied twice.

The kill is real: the job runs in a child process whose progress lines (stderr) are read as they
come; when the line of the chosen point appears, the child gets SIGKILL (it may have gone a little
further by then: any point after the line is as good a test).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lakecdc.jobs import load_job, run_job
from lakecdc.lake.ledger import Ledger
from tests.ogg_render import render_ogg_json
from tests.oracle import Event, Oracle
from tests.test_property import assert_targets_match

REPO = Path(__file__).parent.parent
TABLES = ("S.A", "S.B", "S.C")


def ev(table: str, op: str, t: int, before: dict | None = None, after: dict | None = None) -> Event:
    return Event(table, op, f"2020-01-01 00:{t // 60:02d}:{t % 60:02d}.000000", f"{t:020d}", 0, before, after, ("ID",))


def wave(n: int) -> list[Event]:
    """Wave ``n`` of changes to three tables: inserts, full and partial updates, a key change,
    deletes and a re-insert."""
    base = 100 * n
    out: list[Event] = []
    for i, table in enumerate(TABLES):
        t = base + 10 * i
        k = 10 * n
        out += [
            ev(table, "I", t + 1, after={"ID": k + 1, "V": f"v{n}", "W": n}),
            ev(table, "I", t + 2, after={"ID": k + 2, "V": f"w{n}", "W": None}),
            ev(table, "U", t + 3, before={"ID": k + 1, "V": f"v{n}", "W": n}, after={"ID": k + 1, "W": n + 1}),
        ]
        if n > 0:  # changes to rows of the previous wave
            p = 10 * (n - 1)
            out += [
                ev(table, "U", t + 4, before={"ID": p + 2}, after={"ID": p + 2, "V": "changed"}),
                ev(table, "U", t + 5, before={"ID": p + 1, "V": f"v{n - 1}", "W": n}, after={"ID": p + 7, "V": f"v{n - 1}", "W": n}),
                ev(table, "D", t + 6, before={"ID": k + 2}),
                ev(table, "I", t + 7, after={"ID": k + 2, "V": "again", "W": 0}),
            ]
    return out


def write_job(tmp: Path) -> Path:
    job = tmp / "job.yaml"
    job.write_text(
        f"name: crash\ntarget: {tmp / 'lake'}\n"
        f"sources:\n  - input: {tmp / 'landing'}\n    format: ogg-json\n"
        "maintenance:\n  every_runs: 1\n  zorder: keys\n  vacuum_retention: 7d\n"
    )
    return job


def run_and_kill(job: Path, at: str) -> bool:
    """Run the job in a child process and SIGKILL it when a progress line contains ``at``.
    Returns whether the line came (else the child finished on its own)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "-m", "lakecdc", "run", str(job)], cwd=REPO, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    killed = False
    for line in child.stderr:
        if at in line:
            child.send_signal(signal.SIGKILL)
            killed = True
            break
    child.stderr.close()
    child.wait()
    return killed


@pytest.mark.engines
@pytest.mark.parametrize("at", [
    pytest.param("decoding", marks=pytest.mark.one_engine("killed before any engine writes")),
    "S.B: merging", "recording the run", "z-ordering",
])
def test_sigkill_anywhere_then_rerun_equals_the_oracle(spark, tmp_path, at):
    landing = tmp_path / "landing"
    landing.mkdir()
    job = write_job(tmp_path)
    oracle = Oracle()
    targets = {t: str(tmp_path / "lake" / t) for t in TABLES}
    # wave 0 lands and is applied normally; wave 1 is applied by a run that gets killed
    (landing / "wave-0.json").write_text(render_ogg_json(wave(0)))
    oracle.apply_run(wave(0))
    run_job(load_job(job), spark=spark)
    (landing / "wave-1.json").write_text(render_ogg_json(wave(1)))
    oracle.apply_run(wave(1))
    assert run_and_kill(job, at), f"the run never printed {at!r}"
    # the re-run finishes what the killed one started; a second one finds nothing to do
    result = run_job(load_job(job), spark=spark)
    assert result.ok
    assert_targets_match(oracle, targets, f"SIGKILL at {at!r} and a re-run")
    assert all(m.status == "committed" for m in Ledger(tmp_path / "lake").manifests())
    again = run_job(load_job(job), spark=spark)
    assert all(s.runs == () for s in again.summaries)
    assert_targets_match(oracle, targets, "one more run")
