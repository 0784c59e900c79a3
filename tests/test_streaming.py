"""``lakecdc.stream``: the apply pipeline as a Structured Streaming query (real Spark, real Delta).

Files land in waves; an available-now query after each wave (a restart from its checkpoint)
must leave exactly the oracle's tables, batch by batch. A batch Spark replays (its commit lost,
a crash inside it, the whole checkpoint lost) applies nothing twice; a failed table stops the
query until fixed, and the restart resumes the batch; a processing-time query applies wave after
wave until stopped. No sleeps: ``process_all_available`` waits for the data, not for the clock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.config.durations import parse_trigger
from lakecdc.errors import ConfigError
from lakecdc.jobs import load_job
from lakecdc.streaming import BatchFailed, StreamBatch
from tests.helpers import ogg, rows, version, write_jsonl
from tests.ogg_render import render_ogg_json
from tests.oracle import Oracle
from tests.test_property import (
    SLOW_SETTINGS,
    SUMMARY_FIELDS,
    Scenario,
    assert_counts,
    assert_targets_match,
    delivery_plans,
    describe,
    histories,
    table_specs,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("LAKECDC_STREAM_EXAMPLES", "2"))


def land(landing: Path, name: str, text: str, *, mtime: int | None = None) -> Path:
    """Put a file into the landing directory whole: written under a hidden name, then renamed."""
    landing.mkdir(parents=True, exist_ok=True)
    tmp, final = landing / f".{name}.tmp", landing / name
    tmp.write_text(text, encoding="utf-8")
    if mtime is not None:  # Spark takes files oldest first: fix the order where a test needs it
        os.utime(tmp, (mtime, mtime))
    os.replace(tmp, final)
    return final.resolve()


def lines(*messages: dict[str, Any]) -> str:
    return "".join(json.dumps(m) + "\n" for m in messages)


# ---- without Spark --------------------------------------------------------------------------------


def test_triggers():
    assert parse_trigger("available-now") == {"availableNow": True}
    assert parse_trigger("once") == {"once": True}
    assert parse_trigger("10 seconds") == parse_trigger("10s") == {"processingTime": "10000 milliseconds"}
    assert parse_trigger("5 minutes") == {"processingTime": "300000 milliseconds"}
    assert parse_trigger("250ms") == {"processingTime": "250 milliseconds"}
    with pytest.raises(ConfigError, match="use available-now, once, or a processing-time interval"):
        parse_trigger("soon")


def test_settings_are_checked_before_anything_starts(tmp_path):
    (tmp_path / "landing").mkdir()
    args = (tmp_path / "landing", tmp_path / "lake")
    with pytest.raises(ConfigError, match="unknown setting.*pk_updates"):
        lakecdc.stream(*args, format="ogg-json", pk_updates="abend")
    with pytest.raises(ConfigError, match="unknown option"):
        lakecdc.stream(*args, format="ogg-json", options={"flaten": "true"})
    with pytest.raises(ConfigError, match="min_file_age: a stream takes each file once"):
        lakecdc.stream(*args, format="ogg-json", min_file_age=30)
    with pytest.raises(ConfigError, match="max_files_per_trigger 0"):
        lakecdc.stream(*args, format="ogg-json", max_files_per_trigger=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        lakecdc.stream(tmp_path / "nope", tmp_path / "lake", format="ogg-json")


def test_job_stream_settings_are_checked_with_their_line(tmp_path):
    body = "target: lake\nsources:\n  - {input: landing, format: ogg-json}\nstream:\n  trigger: sometimes\n"
    (tmp_path / "job.yaml").write_text(body)
    with pytest.raises(ConfigError, match=r"job.yaml:5: stream.trigger: trigger 'sometimes'"):
        load_job(tmp_path / "job.yaml")
    (tmp_path / "job.yaml").write_text(body.replace("trigger: sometimes", "max_files_per_trigger: 0"))
    with pytest.raises(ConfigError, match=r":5: stream.max_files_per_trigger: expected a number, 1 or more, found 0"):
        load_job(tmp_path / "job.yaml")


def test_stream_help_teaches():
    out = subprocess.run([sys.executable, "-m", "lakecdc", "stream", "--help"], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0
    for needle in ("--trigger", "available-now", "--checkpoint", "--max-files-per-trigger", "examples:",
                   "apply, run or stream:", "--key TABLE=COL", "rename"):
        assert needle in out.stdout


# ---- waves against the oracle ---------------------------------------------------------------------


@st.composite
def three_waves(draw: st.DrawFn) -> Scenario:
    """A random multi-table history delivered in (up to) three waves, scattered and replayed as
    the property tests draw them."""
    plan = replace(draw(delivery_plans(20)), n_runs=3)
    pk_update = draw(st.sampled_from(("delete-insert", "update")))
    primary_keys = draw(st.booleans())
    specs = draw(table_specs())
    history = draw(histories(specs, 20))
    runs = plan.split(len(history.events))
    return Scenario(specs, history.events, runs, pk_update, primary_keys, history.source)


@pytest.mark.engines
@pytest.mark.spark
@settings(max_examples=EXAMPLES, **SLOW_SETTINGS)  # type: ignore[arg-type]
@given(sc=three_waves())
def test_waves_equal_the_oracle(spark, tmp_path_factory, sc):
    note(describe(sc))
    work = tmp_path_factory.mktemp("waves")
    landing, lake = work / "landing", work / "lake"
    landing.mkdir()
    oracle, targets = Oracle(), {}
    events_of: dict[str, list] = {}
    for number, run in enumerate(sc.runs, start=1):
        # each wave lands as two files (halves of the wave's messages, in delivery order)
        halves = [run[: len(run) // 2], run[len(run) // 2 :]]
        wave = set()
        for part, idx in enumerate(h for h in halves if h):
            events = [sc.events[i] for i in idx]
            path = land(landing, f"wave-{number}-{part}.json", render_ogg_json(events, primary_keys=sc.primary_keys),
                        mtime=1_700_000_000 + 10 * number + part)
            events_of[str(path)] = events
            wave.add(str(path))
        batches: list[StreamBatch] = []
        one_file_per_batch = number == 2  # the second wave as one batch per file, the others whole
        s = lakecdc.stream(landing, lake, format="ogg-json", keys=sc.keys(), pk_update=sc.pk_update, spark=spark,
                           on_batch=batches.append, max_files_per_trigger=1 if one_file_per_batch else None)
        s.await_termination()
        # a restart from the checkpoint: this wave's files only, each once
        assert sorted(f for b in batches for f in b.files) == sorted(wave)
        assert len(batches) == (len(wave) if one_file_per_batch else 1)
        for b in batches:
            run_events = [e for f in b.files for e in events_of[f]]
            expected = oracle.apply_run(run_events, pk_update=sc.pk_update)  # type: ignore[arg-type]
            actual = {t.source_table: {f: getattr(t, f, None) for f in SUMMARY_FIELDS} for t in b.summary.tables}
            targets.update({t: str(v["target"]) for t, v in actual.items()})
            assert_counts(b.batch_id, sc, run_events, expected, actual)
        assert_targets_match(oracle, targets, f"wave {number}")


# ---- restarts and replays -------------------------------------------------------------------------


def _row(i: int, v: str, ts: str, pos: int, op: str = "I") -> dict[str, Any]:
    if op == "U":
        return ogg("S.T", "U", ts, pos, before={"ID": i}, after={"ID": i, "V": v}, keys=["ID"])
    return ogg("S.T", "I", ts, pos, after={"ID": i, "V": v}, keys=["ID"])


@pytest.mark.spark
def test_a_restart_reads_only_the_new_files(spark, tmp_path, capsys):
    landing, lake = tmp_path / "landing area", tmp_path / "lake"
    a = land(landing, "a.json", lines(_row(1, "a", "00:00:01", 1)), mtime=1_700_000_001)
    b = land(landing / "sub", "b #1.json", lines(_row(2, "b", "00:00:02", 2)), mtime=1_700_000_002)
    land(landing, "_ignored.json", "not a change file\n")
    batches: list[StreamBatch] = []
    s = lakecdc.stream(landing, lake, format="ogg-json", spark=spark, on_batch=batches.append, max_files_per_trigger=1)
    s.await_termination()
    assert [(x.batch_id, x.files) for x in batches] == [(0, (str(a),)), (1, (str(b),))]
    assert s.total.table("S.T").inserted == 2 and s.total.runs == (1, 2)
    # the source lists files, it never reads them: only the path column is scanned
    s.query.explain()
    assert "ReadSchema: struct<path:string>" in capsys.readouterr().out

    c = land(landing, "c.json", lines(_row(1, "c", "00:00:03", 3, "U")), mtime=1_700_000_003)
    d = land(landing, "d.json", lines(_row(3, "d", "00:00:04", 4)), mtime=1_700_000_004)
    # copied in with its timestamp of a month ago (Spark's maxFileAge would have skipped it)
    e = land(landing, "e.json", lines(_row(4, "e", "00:00:05", 5)), mtime=1_700_000_004 - 30 * 86400)
    batches.clear()
    # trigger once: everything new in one batch (it ignores max_files_per_trigger)
    s = lakecdc.stream(landing, lake, format="ogg-json", spark=spark, on_batch=batches.append, trigger="once", max_files_per_trigger=1)
    s.await_termination()
    assert [(x.batch_id, x.files) for x in batches] == [(2, (str(c), str(d), str(e)))]
    assert rows(lake / "S.T", "ID") == [
        {"ID": 1, "V": "c"}, {"ID": 2, "V": "b"}, {"ID": 3, "V": "d"}, {"ID": 4, "V": "e"},
    ]

    batches.clear()
    lakecdc.stream(landing, lake, format="ogg-json", spark=spark, on_batch=batches.append).await_termination()
    assert batches == []  # nothing new: no batch at all
    # one ledger: apply over the same directory finds nothing new either
    assert lakecdc.apply(landing, lake, format="ogg-json", spark=spark).runs == ()


@pytest.mark.engines
@pytest.mark.spark
def test_a_replayed_batch_applies_nothing_twice(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    checkpoint = lake / "_lakecdc" / "stream-checkpoint"
    land(landing, "1.json", lines(_row(1, "a", "00:00:01", 1), _row(2, "b", "00:00:02", 2)), mtime=1_700_000_001)
    two = land(landing, "2.json", lines(_row(1, "c", "00:00:03", 3, "U")), mtime=1_700_000_002)
    batches: list[StreamBatch] = []

    def start(**kw: Any) -> lakecdc.ChangeStream:
        return lakecdc.stream(landing, lake, format="ogg-json", spark=spark,
                              on_batch=kw.pop("on_batch", batches.append), max_files_per_trigger=1, **kw)

    start().await_termination()
    table = lake / "S.T"
    applied, at = rows(table, "ID"), version(table)
    assert applied == [{"ID": 1, "V": "c"}, {"ID": 2, "V": "b"}]

    # Spark stopped after batch 1's MERGE, before committing it: its offsets are there, its commit not
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    batches.clear()
    start().await_termination()
    assert [(x.batch_id, x.files) for x in batches] == [(1, (str(two),))]  # Spark replays batch 1 ...
    assert batches[0].summary.runs == () and batches[0].summary.files == 0  # ... the ledger applies nothing
    assert (rows(table, "ID"), version(table)) == (applied, at)

    # a crash inside a batch after apply committed (here: the batch callback fails)
    three = land(landing, "3.json", lines(_row(2, "d", "00:00:04", 4, "U")), mtime=1_700_000_003)

    def crash(batch: StreamBatch) -> None:
        raise RuntimeError("the driver died here")

    with pytest.raises(RuntimeError, match="the driver died here"):
        start(on_batch=crash).await_termination()
    applied, at = rows(table, "ID"), version(table)
    assert applied == [{"ID": 1, "V": "c"}, {"ID": 2, "V": "d"}]
    batches.clear()
    start().await_termination()
    assert [(x.batch_id, x.files, x.summary.runs) for x in batches] == [(2, (str(three),), ())]
    assert (rows(table, "ID"), version(table)) == (applied, at)

    # the checkpoint lost altogether: every file is listed again, none is applied again
    shutil.rmtree(checkpoint)
    batches.clear()
    lakecdc.stream(landing, lake, format="ogg-json", spark=spark, on_batch=batches.append).await_termination()
    assert len(batches) == 1 and len(batches[0].files) == 3 and batches[0].summary.runs == ()
    assert (rows(table, "ID"), version(table)) == (applied, at)


@pytest.mark.engines
@pytest.mark.spark
def test_a_failed_table_stops_the_stream_and_the_restart_resumes_its_batch(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "1.json", lines(
        ogg("S.GOOD", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
        ogg("S.NOKEY", "I", "00:00:02", 2, after={"ID": 7, "V": "x"}),
    ))
    s = lakecdc.stream(landing, lake, format="ogg-json", spark=spark)
    with pytest.raises(BatchFailed) as failed:
        s.await_termination()
    assert "batch 0" in str(failed.value) and "S.NOKEY" in str(failed.value) and "--key" in str(failed.value)
    assert not s.is_active
    good = lake / "S.GOOD"
    assert rows(good) == [{"ID": 1, "V": "a"}] and not (lake / "S.NOKEY").exists()
    at = version(good)

    batches: list[StreamBatch] = []
    lakecdc.stream(landing, lake, format="ogg-json", spark=spark, keys={"S.NOKEY": ["ID"]}, on_batch=batches.append).await_termination()
    assert [x.batch_id for x in batches] == [0] and batches[0].summary.resumed  # the same batch, resumed
    assert rows(lake / "S.NOKEY") == [{"ID": 7, "V": "x"}]
    assert rows(good) == [{"ID": 1, "V": "a"}] and version(good) == at  # not applied twice


@pytest.mark.spark
def test_a_processing_time_stream_applies_wave_after_wave_until_stopped(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    batches: list[StreamBatch] = []
    with lakecdc.stream(landing, lake, format="ogg-json", spark=spark, trigger="1 second", on_batch=batches.append,
                        path_glob_filter="*.json") as s:
        land(landing, "1.json", lines(_row(1, "a", "00:00:01", 1), _row(2, "b", "00:00:02", 2)))
        land(landing, "README.txt", "not a change file\n")  # left out by the glob
        s.process_all_available()
        assert rows(lake / "S.T", "ID") == [{"ID": 1, "V": "a"}, {"ID": 2, "V": "b"}]
        land(landing, "2.json", lines(_row(2, "c", "00:00:03", 3, "U")))
        land(landing, "3.json", lines(_row(3, "d", "00:00:04", 4)))
        s.process_all_available()
        assert rows(lake / "S.T", "ID") == [{"ID": 1, "V": "a"}, {"ID": 2, "V": "c"}, {"ID": 3, "V": "d"}]
        assert s.is_active
    assert not s.is_active and s.query.exception() is None  # stopped cleanly
    assert sum(len(b.files) for b in batches) == 3 and s.total.table("S.T").events == 4


# ---- the command line and jobs --------------------------------------------------------------------


@pytest.mark.spark
def test_cli_stream_available_now_then_once(spark, tmp_path, capsys):
    from lakecdc.cli import main

    landing, lake, summary = tmp_path / "landing", tmp_path / "lake", tmp_path / "run.json"
    land(landing, "1.json", lines(_row(1, "a", "00:00:01", 1), _row(2, "b", "00:00:02", 2)))
    args = [sys.executable, "-m", "lakecdc", "stream", "--format", "ogg-json", "--input", str(landing),
            "--target", str(lake), "--summary-json", str(summary)]
    out = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "batch 0: 1 file(s)" in out.stdout and "batch 0: run 1: 1 file(s)" in out.stderr
    data = json.loads(summary.read_text())
    assert [(t["source_table"], t["inserted"]) for t in data["tables"]] == [("S.T", 2)]
    assert (lake / "_lakecdc" / "stream-checkpoint" / "commits" / "0").exists()


    # the same command again, in this process (one fresh JVM per test is enough)
    land(landing, "2.json", lines(_row(1, "c", "00:00:03", 3, "U")))
    assert main([*args[3:], "--trigger", "once", "--quiet"]) == 0
    assert "batch 1: 1 file(s)" in capsys.readouterr().out
    data = json.loads(summary.read_text())
    assert data["files"] == 1 and [(t["source_table"], t["updated"]) for t in data["tables"]] == [("S.T", 1)]
    assert rows(lake / "S.T", "ID") == [{"ID": 1, "V": "c"}, {"ID": 2, "V": "b"}]


@pytest.mark.spark
def test_a_job_streams_each_source(spark, tmp_path, capsys):
    from lakecdc.cli import main

    a, b, lake = tmp_path / "a", tmp_path / "b", tmp_path / "lake"
    land(a, "1.json", lines(ogg("APP.ORDERS", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
                            ogg("APP.AUDIT_LOG", "I", "00:00:02", 2, after={"ID": 1}, keys=["ID"])))
    write_jsonl(b / "1.json", [ogg("APP.CUSTOMERS", "I", "00:00:03", 3, after={"ID": 5}, keys=["ID"])])
    job = tmp_path / "job.yaml"
    job.write_text(f"""
name: demo
target: {lake}
sources:
  - {{input: {a}, format: ogg-json}}
  - {{input: {b}, format: ogg-json}}
tables: {{exclude: ["APP.AUDIT_*"]}}
stream: {{trigger: once}}
""")
    assert main(["run", str(job), "--stream", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("job demo") == 2  # one report per batch
    assert rows(lake / "APP.ORDERS") == [{"ID": 1, "V": "a"}] and rows(lake / "APP.CUSTOMERS") == [{"ID": 5}]
    assert not (lake / "APP.AUDIT_LOG").exists()
    assert (lake / "_lakecdc" / "jobs" / "demo.stream" / "source-1" / "commits" / "0").exists()

    land(b, "2.json", lines(ogg("APP.CUSTOMERS", "I", "00:00:04", 4, after={"ID": 6}, keys=["ID"])))
    assert main(["run", str(job), "--stream", "--quiet", "--trigger", "available-now"]) == 0
    assert capsys.readouterr().out.count("job demo") == 1  # only source 1 had something new
    assert rows(lake / "APP.CUSTOMERS", "ID") == [{"ID": 5}, {"ID": 6}]
    with pytest.raises(SystemExit):
        main(["run", str(job), "--stream", "--trigger"])
    assert main(["run", str(job), "--watch", "--stream"]) == 2
