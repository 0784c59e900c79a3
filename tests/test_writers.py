"""Several writers on one target: one writer at a time, through the target's lease.

Writers are real processes started at once (the CLI, or ``python -c`` for the lease alone): with
the same inputs, every file is applied once (no SCD2 version, no quarantined record twice); with
different inputs, the tables hold both (no column lost); run ids are distinct. A holder that
crashed (its pid gone, or its lease expired) is taken over; a live one makes the next writer stop
with a message naming it, or wait for it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from lakecdc.errors import LakecdcError
from lakecdc.lake.lease import Holder, TargetBusy, _pid_ns, current_holder, hold, lease_dir
from lakecdc.lake.ledger import InputFile, Ledger, Manifest
from tests.history_oracle import HistoryOracle
from tests.ogg_render import render_ogg_json
from tests.oracle import Event
from tests.test_history import history_problems
from tests.test_property import table_problems

REPO = Path(__file__).parent.parent
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}


def ev(table: str, op: str, t: int, before: dict | None = None, after: dict | None = None) -> Event:
    return Event(table, op, f"2021-01-01 00:{t // 60:02d}:{t % 60:02d}.000000", f"{t:020d}", 0, before, after, ("ID",))


def batch_a() -> list[Event]:
    """S.P (plain) keys 1-4 with V; S.H (SCD2) keys 1-2 with A: inserts, updates, a delete."""
    return [
        ev("S.P", "I", 1, after={"ID": 1, "V": "a"}), ev("S.P", "I", 2, after={"ID": 2, "V": "b"}),
        ev("S.P", "I", 3, after={"ID": 3, "V": "c"}), ev("S.P", "I", 4, after={"ID": 4, "V": "d"}),
        ev("S.P", "U", 5, before={"ID": 2}, after={"ID": 2, "V": "b2"}), ev("S.P", "D", 6, before={"ID": 3}),
        ev("S.H", "I", 7, after={"ID": 1, "A": "x"}), ev("S.H", "U", 8, before={"ID": 1}, after={"ID": 1, "A": "y"}),
        ev("S.H", "U", 9, before={"ID": 1}, after={"ID": 1, "A": "z"}), ev("S.H", "I", 10, after={"ID": 2, "A": "p"}),
        ev("S.H", "D", 11, before={"ID": 2}),
    ]


def batch_b() -> list[Event]:
    """Other keys of both tables, each with a column batch A does not have (W, C)."""
    return [
        ev("S.P", "I", 21, after={"ID": 11, "V": "k", "W": 1}), ev("S.P", "I", 22, after={"ID": 12, "V": "l", "W": 2}),
        ev("S.P", "U", 23, before={"ID": 11}, after={"ID": 11, "W": 10}),
        ev("S.H", "I", 24, after={"ID": 11, "A": "m", "C": 5}),
        ev("S.H", "U", 25, before={"ID": 11}, after={"ID": 11, "A": "n", "C": 6}),
    ]


def land(folder: Path, name: str, events: list[Event], *, bad: int = 0) -> Path:
    """A GoldenGate JSON file of ``events`` and ``bad`` lines that are not JSON (quarantined)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(render_ogg_json(events) + "".join(f"not json {i}\n" for i in range(bad)))
    return path


def cli_apply(landing: Path, target: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lakecdc", "apply", "--format", "ogg-json", "--input", str(landing),
         "--target", str(target), "--scd2", "S.H", *extra],
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(children: list[subprocess.Popen]) -> list[tuple[int, str]]:
    out = []
    for child in children:
        stdout, stderr = child.communicate(timeout=900)
        out.append((child.returncode, stdout + stderr))
    return out


def assert_equals_oracle(target: Path, h: HistoryOracle) -> None:
    problems = table_problems(h.current, "S.P", str(target / "S.P"))
    problems += history_problems(h, "S.H", str(target / "S.H"))
    assert not problems, "the tables differ from the oracle:\n" + "\n".join(problems)


def quarantined(target: Path) -> int:
    path = str(target / "_quarantine")
    return DeltaTable(path).to_pyarrow_table().num_rows if DeltaTable.is_deltatable(path) else 0


def assert_each_file_once(target: Path, files: list[Path]) -> None:
    """Every landing file in exactly one run of the ledger; run ids distinct in the run reports."""
    manifests = Ledger(target).manifests()
    named = [f.source for m in manifests for f in m.inputs]
    assert sorted(named) == sorted(str(f.resolve()) for f in files), named
    reports = pa.table(DeltaTable(str(target / "_lakecdc_runs")).to_pyarrow_table()).to_pylist()
    pairs = [(r["run_id"], r["source_table"]) for r in reports]
    assert len(pairs) == len(set(pairs)), f"a run id was taken twice: {sorted(pairs)}"
    assert all(m.status == "committed" for m in manifests)


# ---- writers started at once --------------------------------------------------------------------


@pytest.mark.slow
def test_writers_at_once_same_inputs_apply_each_file_once(tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    files = [land(landing, "a.json", batch_a(), bad=2)]
    h = HistoryOracle()
    h.apply_run(batch_a())
    results = finish([cli_apply(landing, target, "--wait", "600") for _ in range(3)])
    assert all(code == 0 for code, _ in results), results
    assert_equals_oracle(target, h)
    assert quarantined(target) == 2  # the bad lines once, not once per writer
    assert_each_file_once(target, files)
    # one writer applied the file; the others found it applied
    assert sum("nothing new to apply" in text for _, text in results) == 2, [t[-400:] for _, t in results]


@pytest.mark.slow
def test_writers_at_once_different_inputs_keep_every_column(tmp_path):
    target = tmp_path / "lake"
    a = land(tmp_path / "landing-a", "a.json", batch_a(), bad=1)
    b = land(tmp_path / "landing-b", "b.json", batch_b(), bad=1)
    h = HistoryOracle()
    h.apply_run(batch_a())  # disjoint keys: either order gives these tables
    h.apply_run(batch_b())
    results = finish([cli_apply(a.parent, target, "--wait", "600"), cli_apply(b.parent, target, "--wait", "600")])
    assert all(code == 0 for code, _ in results), results
    assert_equals_oracle(target, h)  # W and C are there (table_problems: a missing column differs)
    assert {"W"} <= set(DeltaTable(str(target / "S.P")).schema().to_arrow().names)
    assert {"C"} <= set(DeltaTable(str(target / "S.H")).schema().to_arrow().names)
    assert quarantined(target) == 2
    assert_each_file_once(target, [a, b])
    ids = [m.run_id for m in Ledger(target).manifests()]
    assert ids == [1, 2]


@pytest.mark.slow
def test_writers_at_once_without_wait_one_applies_the_others_are_told_busy(tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    files = [land(landing, "a.json", batch_a(), bad=1)]
    h = HistoryOracle()
    h.apply_run(batch_a())
    results = finish([cli_apply(landing, target) for _ in range(3)])
    for code, text in results:  # each either applied, found nothing new, or was told who is busy
        assert code == 0 or (code == 2 and "is busy: held by" in text), text[-2000:]
    assert any(code == 0 for code, _ in results)
    assert_equals_oracle(target, h)
    assert quarantined(target) == 1
    assert_each_file_once(target, files)


# ---- the lease itself ---------------------------------------------------------------------------

_COUNTER = """
import os, sys, time
from pathlib import Path
from lakecdc.lake.lease import hold
target, counter, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
if sys.argv[4] == "no-hard-links":
    def no_link(*args):
        raise PermissionError(1, "Operation not permitted")
    os.link = no_link
for _ in range(n):
    with hold(target, command="test", wait=120):
        v = int(counter.read_text())
        time.sleep(0.002)
        counter.write_text(str(v + 1))
"""


@pytest.mark.parametrize("links", ["hard-links", "no-hard-links"])
def test_lease_excludes_writers_of_other_processes(tmp_path, links):
    """8 processes increment a counter under the lease, reading and writing it non-atomically:
    no increment is lost only if no two ever held the lease at once (also where the filesystem
    has no hard links: an exclusive create instead)."""
    target, counter = tmp_path / "lake", tmp_path / "counter"
    target.mkdir()
    counter.write_text("0")
    children = [subprocess.Popen([sys.executable, "-c", _COUNTER, str(target), str(counter), "15", links], cwd=REPO, env=ENV,
                                 stderr=subprocess.PIPE, text=True) for _ in range(8)]
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
    assert counter.read_text() == str(8 * 15)
    holder = current_holder(target)
    assert holder is not None and holder.released


def _write_generation(target: Path, gen: int, holder: Holder) -> None:
    folder = lease_dir(target)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"lease-{gen:012d}.json").write_text(holder.to_json())


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_lease_of_a_dead_process_is_taken_over(tmp_path):
    now = time.time()
    _write_generation(tmp_path, 1, Holder("t1", socket.gethostname(), _dead_pid(), "apply", now, now + 3600, run_id=4,
                                          pid_ns=_pid_ns()))
    with hold(tmp_path, command="apply") as lease:
        assert lease.gen == 2
        assert current_holder(tmp_path).pid == os.getpid()


def test_expired_lease_is_taken_over_a_live_one_is_busy(tmp_path):
    now = time.time()
    _write_generation(tmp_path, 1, Holder("t1", "another-host", 1, "apply", now - 7200, now - 60, run_id=4))
    with hold(tmp_path, command="apply") as lease:
        assert lease.gen == 2
    _write_generation(tmp_path, 3, Holder("t3", "another-host", 1, "maintain", now - 5, now + 3600, run_id=9))
    with pytest.raises(TargetBusy) as busy, hold(tmp_path, command="apply"):
        pass
    text = str(busy.value)
    assert "is busy: held by run 9 (maintain, host another-host, pid 1) since" in text
    assert "--wait" in text


def test_lease_waits_for_its_holder(tmp_path):
    """A writer with ``wait`` takes the lease once the holder (another process) releases it."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom lakecdc.lake.lease import hold\n"
         "with hold(sys.argv[1], command='apply'):\n    print('held', flush=True)\n    time.sleep(2)\n",
         str(tmp_path)], cwd=REPO, env=ENV, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    with pytest.raises(TargetBusy), hold(tmp_path, command="apply"):
        pass
    with hold(tmp_path, command="apply", wait=120) as lease:
        assert current_holder(tmp_path).token == lease.holder.token
    child.wait()


def test_lost_lease_stops_its_holder(tmp_path):
    with hold(tmp_path, command="apply") as lease:
        now = time.time()
        _write_generation(tmp_path, lease.gen + 1, Holder("x", "another-host", 1, "apply", now, now + 60))
        with pytest.raises(LakecdcError, match="lease of target .* was lost"):
            lease.check()


def test_a_run_id_is_never_taken_twice(tmp_path):
    ledger = Ledger(tmp_path)
    first = Manifest(run_id=1, status="planned", format="ogg-json", inputs=[InputFile("a", 1, 1)])
    ledger.write(first, new=True)
    with pytest.raises(LakecdcError, match="run 1 .* was planned by another writer"):
        ledger.write(Manifest(run_id=1, status="planned", format="ogg-json", inputs=[InputFile("b", 1, 1)]), new=True)
    assert [f.path for f in ledger.manifests()[0].inputs] == ["a"]


# ---- through the entry points -------------------------------------------------------------------


def test_apply_maintain_check_respect_the_lease(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    land(landing, "a.json", batch_a())
    h = HistoryOracle()
    h.apply_run(batch_a())
    now = time.time()
    _write_generation(target, 1, Holder("t1", "another-host", 77, "apply", now, now + 3600, run_id=5))
    with pytest.raises(TargetBusy, match="held by run 5 .*pid 77"):
        lakecdc.apply(landing, target, format="ogg-json", stored_as_scd_type={"S.H": 2}, spark=spark)
    with pytest.raises(TargetBusy):
        lakecdc.maintain(str(target))
    from lakecdc.cli import main

    assert main(["check", "--target", str(target), "--unblock", "S.P"]) == 2
    assert main(["maintain", "--target", str(target)]) == 2
    assert not (target / "_lakecdc" / "runs").exists()  # nothing was planned
    _write_generation(target, 2, Holder("t2", "another-host", 77, "apply", now, now - 1, run_id=5))  # expired
    s = lakecdc.apply(landing, target, format="ogg-json", stored_as_scd_type={"S.H": 2}, spark=spark)
    assert s.ok and s.runs == (1,)
    assert_equals_oracle(target, h)
    assert lakecdc.maintain(str(target), vacuum_retention=None)


@pytest.mark.slow
def test_a_killed_writer_does_not_keep_the_target(tmp_path):
    """A run SIGKILLed while it holds the lease: the next run takes the target over at once (its
    pid is gone) and resumes the killed run: the tables equal the oracle."""
    landing, target = tmp_path / "landing", tmp_path / "lake"
    land(landing, "a.json", batch_a(), bad=1)
    h = HistoryOracle()
    h.apply_run(batch_a())
    child = cli_apply(landing, target)
    assert child.stderr is not None
    for line in child.stderr:
        if "merging" in line:
            child.send_signal(signal.SIGKILL)
            break
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    held = current_holder(target)
    assert held is not None and not held.released and held.pid == child.pid
    code, text = finish([cli_apply(landing, target)])[0]
    assert code == 0, text
    assert_equals_oracle(target, h)
    assert quarantined(target) == 1
    assert [m.run_id for m in Ledger(target).manifests()] == [1]
    assert json.loads(lease_dir(target).joinpath(sorted(os.listdir(lease_dir(target)))[-1]).read_text())["released"]


def test_stream_batches_respect_the_lease(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    land(landing, "a.json", batch_a())
    h = HistoryOracle()
    h.apply_run(batch_a())
    now = time.time()
    _write_generation(target, 1, Holder("t1", "another-host", 77, "maintain", now, now + 3600))
    with pytest.raises(TargetBusy, match=r"held by lakecdc maintain \(host another-host, pid 77\)"):
        lakecdc.stream(landing, target, format="ogg-json", spark=spark, stored_as_scd_type={"S.H": 2}).await_termination()
    assert not (target / "_lakecdc" / "runs").exists()
    _write_generation(target, 2, Holder("t2", "another-host", 77, "maintain", now, now - 1))  # expired
    s = lakecdc.stream(landing, target, format="ogg-json", spark=spark, stored_as_scd_type={"S.H": 2}, wait=60)
    s.await_termination()
    assert s.total.ok and s.total.runs == (1,)
    assert_equals_oracle(target, h)


def test_a_holder_renews_its_lease_while_it_works(tmp_path):
    with hold(tmp_path, command="apply", ttl=3.0) as lease:
        first = current_holder(tmp_path).expires
        time.sleep(4.0)  # longer than the ttl: the lease lives only if it was renewed
        now = current_holder(tmp_path)
        assert now.token == lease.holder.token and now.expires > first
        assert now.stale(time.time()) is None
        lease.check()


def test_job_run_holds_the_lease_for_its_runs_and_maintenance(spark, tmp_path):
    from lakecdc.cli import main

    landing, target = tmp_path / "landing", tmp_path / "lake"
    land(landing, "a.json", batch_a())
    job = tmp_path / "job.yaml"
    job.write_text(f"name: w\ntarget: {target}\nsources:\n  - input: {landing}\n    format: ogg-json\n"
                   "maintenance:\n  every_runs: 1\n  vacuum_retention: 7d\n")
    now = time.time()
    _write_generation(target, 1, Holder("t1", "another-host", 77, "apply", now, now + 3600, run_id=3))
    assert main(["run", str(job), "--quiet"]) == 2
    _write_generation(target, 2, Holder("t2", "another-host", 77, "apply", now, now + 2))  # ends in 2 s
    assert main(["run", str(job), "--quiet", "--wait", "120"]) == 0
    assert [m.run_id for m in Ledger(target).manifests()] == [1]
    assert current_holder(target).released
