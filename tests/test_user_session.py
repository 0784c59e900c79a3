"""lakecdc on a Spark session it did not build, as a notebook user meets it.

A notebook's session comes from the plain builder: Spark's default settings (200 shuffle
partitions, ANSI mode on), the machine's time zone, none of lakecdc's settings. Every bundled job
(GoldenGate JSON and delimited, Debezium JSON and Avro, DTS Avro, Canal JSON, SharePlex JSON, Qlik
JSON), ``read_changes``, ``to_rows``, ``stream``, the contracts' checks, ``read_table`` and
``maintain`` run on such sessions in child
processes (one session per process), in two zones east and west of UTC, with ANSI mode on and
off; every source table must come out cell for cell and type for type as on lakecdc's own session,
the quarantine must hold the same records with the same reasons, and every instant must be the
same.

The whole suite also runs on such a session: ``LAKECDC_TEST_SESSION=user`` (tests/conftest.py);
CI runs the API tests that way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("user_session_child.py")

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _workdir(tmp_path: Path, name: str) -> Path:
    work = tmp_path / name
    work.mkdir()
    shutil.copytree(ROOT / "jobs", work / "jobs")
    shutil.copytree(ROOT / "data_contracts", work / "data_contracts")
    return work


def _run(work: Path, session: str, *, tz: str | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           # a notebook's workers run the notebook's Python
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("LAKECDC_TEST_SESSION", None)
    if tz is not None:
        env["TZ"] = tz
    done = subprocess.run([sys.executable, str(CHILD), str(work), session], env=env, cwd=work,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"{session}: exit {done.returncode}\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _comparable(result: dict) -> dict:
    """What must not depend on the session: every source table, the quarantined records and their
    reasons, the runs' counts, the instants read; not the ledger's own times and paths."""
    out = {k: v for k, v in result.items() if k not in ("jobs", "zone", "after_maintenance", "streamed")}
    out["streamed"] = {t: v for t, v in result["streamed"].items() if not t.startswith("_")}
    for name, job in result["jobs"].items():
        out[f"{name}.runs"] = job["runs"]
        for table, content in job["tables"].items():
            if table == "_quarantine":
                cols = content["columns"]
                keep = [cols.index(c) for c in ("raw", "reason", "source_table") if c in cols]
                content = sorted(json.dumps([json.loads(r)[i] for i in keep]) for r in content["rows"])
            elif table.startswith("_"):
                continue
            out[f"{name}.{table}"] = content
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """Everything run on lakecdc's own session (UTC, its settings)."""
    return _run(_workdir(tmp_path_factory.mktemp("ref"), "w"), "lakecdc")


@pytest.mark.parametrize(
    ("session", "tz"),
    [
        # the JVM's zone east of UTC (a half-hour offset, no session zone set), ANSI mode off (as on
        # older platforms). The API tests run once more on a session whose own zone is west of UTC
        # with ANSI on (scripts/test.sh, LAKECDC_TEST_SESSION=user): each pass of the bundled jobs
        # on Spark's default settings takes minutes, so this one covers what that run does not.
        ("user:-:false", "Asia/Kolkata"),
    ],
)
def test_a_users_session_gives_the_tables_of_lakecdcs_own(tmp_path, reference, session, tz):
    got = _run(_workdir(tmp_path, "w"), session, tz=tz)
    assert got["zone"] != "UTC"
    want, have = _comparable(reference), _comparable(got)
    assert sorted(have) == sorted(want)
    for key in want:
        assert have[key] == want[key], key
    # the bundled jobs produce tables and quarantined records: the comparison compares something
    assert any(k.startswith("sample.") and not k.endswith("runs") for k in want)
    assert want["sample._quarantine"], "the sample's broken line is quarantined"
    assert len(want["op_ts"]) == 15 and want["rows"] > 0
    assert want["streamed"] == {t: want[f"sample.{t}"] for t in want["streamed"]} and want["streamed"]
    assert want["checks"]
