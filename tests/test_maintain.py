"""Maintenance: compaction and Z-order keep every row, vacuum keeps readers within the retention,
checkpoints are written, exactly-once marks survive, and the CLI reports what it did."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from lakecdc.cli import main
from lakecdc.config.durations import parse_size
from lakecdc.errors import ConfigError
from lakecdc.lake.state import table_path
from tests.helpers import ogg, write_jsonl

pytestmark = [pytest.mark.spark, pytest.mark.engines]

T = "S.ORDERS"


def snapshot(path: str | Path, version: int | None = None) -> list[dict]:
    """Every column of every row (the _cdc_ ones too), sorted: what maintenance must not change."""
    table = pa.table(DeltaTable(str(path), version=version).to_pyarrow_table())
    return sorted(table.to_pylist(), key=lambda r: r["ID"])


def small_runs(spark, tmp_path: Path, runs: int = 5) -> tuple[Path, Path]:
    """``runs`` separate applies (each leaves its own small files), with updates and deletes."""
    landing, target = tmp_path / "landing", tmp_path / "lake"
    pos = 0
    for r in range(runs):
        msgs = []
        for i in range(20):
            key = r * 20 + i
            pos += 1
            msgs.append(ogg(T, "I", f"00:{r:02d}:{i:02d}", pos, after={"ID": key, "V": f"v{key}", "N": key}, keys=["ID"]))
        if r == runs - 1:  # earlier runs only insert new keys: each leaves a file of its own
            pos += 1
            msgs.append(ogg(T, "U", f"00:{r:02d}:30", pos, before={"ID": r}, after={"ID": r, "V": f"changed in run {r}"}, keys=["ID"]))
            pos += 1
            msgs.append(ogg(T, "D", f"00:{r:02d}:31", pos, before={"ID": 2 * r + 1}, keys=["ID"]))
            pos += 1
            msgs.append(ogg(T, "D", f"00:{r:02d}:32", pos, before={"ID": 2 * r + 2}, keys=["ID"]))
        write_jsonl(landing / f"{r:03d}.json", msgs)
        lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    return landing, target


def test_compaction_keeps_every_row_and_the_exactly_once_marks(spark, tmp_path):
    landing, target = small_runs(spark, tmp_path)
    path = Path(table_path(str(target), T))
    before = snapshot(path)
    marks = DeltaTable(str(path)).transaction_version("lakecdc")
    (report,) = lakecdc.maintain(str(target), vacuum_retention=None)
    assert report.files_before > 1 and report.files_after == 1 and report.files_removed == report.files_before
    assert report.version_after > report.version_before
    assert snapshot(path) == before
    assert DeltaTable(str(path)).transaction_version("lakecdc") == marks
    assert list((path / "_delta_log").glob("*.checkpoint.parquet")), "a checkpoint was written"
    # re-running the applied files changes nothing; a new file still applies exactly once
    again = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert again.runs == () and snapshot(path) == before
    write_jsonl(landing / "999.json", [ogg(T, "U", "01:00:00", 10_000, before={"ID": 0}, after={"ID": 0, "N": -1}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert [r for r in snapshot(path) if r["ID"] == 0][0]["N"] == -1


def test_zorder_by_keys_and_by_columns(spark, tmp_path):
    _, target = small_runs(spark, tmp_path, runs=3)
    path = table_path(str(target), T)
    before = snapshot(path)
    (report,) = lakecdc.maintain(str(target), zorder="keys", vacuum_retention=None, checkpoint=False)
    assert report.zorder == ("ID",) and report.files_after == 1
    assert snapshot(path) == before
    (report,) = lakecdc.maintain(str(target), zorder={T: ["V", "N"]}, vacuum_retention=None)
    assert report.zorder == ("V", "N") and snapshot(path) == before
    with pytest.raises(ConfigError, match="cannot Z-order by \\['NOPE'\\]"):
        lakecdc.maintain(str(target), zorder=["NOPE"])
    with pytest.raises(ConfigError, match="no table 'S.OTHER'"):
        lakecdc.maintain(str(target), tables=["S.OTHER"])


def test_vacuum_keeps_readers_within_the_retention_and_refuses_less_without_force(spark, tmp_path):
    _, target = small_runs(spark, tmp_path, runs=3)
    path = table_path(str(target), T)
    old_version = DeltaTable(path).version()
    old = snapshot(path, old_version)
    (report,) = lakecdc.maintain(str(target))  # compaction, then vacuum keeping 7 days
    assert report.files_vacuumed == 0
    assert snapshot(path, old_version) == old, "a reader of the older version still reads it"
    with pytest.raises(Exception, match="(?i)retention"):
        lakecdc.maintain(str(target), vacuum_retention=dt.timedelta(0), compact=False)
    (report,) = lakecdc.maintain(str(target), vacuum_retention=dt.timedelta(0), force=True, compact=False)
    assert report.files_vacuumed >= 3, "the files compaction replaced are gone"
    assert snapshot(path) == old
    with pytest.raises(Exception):  # noqa: B017 - the old version's files were vacuumed
        snapshot(path, old_version)


def test_tombstones_expire_and_the_cli_reports(spark, tmp_path, capsys):
    _, target = small_runs(spark, tmp_path, runs=3)
    summary = tmp_path / "maintain.json"
    code = main(["maintain", "--target", str(target), "--zorder", "keys", "--tombstone-retention", "0",
                 "--vacuum-retention", "none", "--summary-json", str(summary), "--quiet"])
    assert code == 0
    out = capsys.readouterr().out
    assert re.search(rf"{re.escape(T)} +z-ordered by ID +\d+ -> \d+ +\d+ into \d+ +\S+ -> \S+ +- +2 +\d+ -> \d+", out), out
    (entry,) = json.loads(summary.read_text())["tables"]
    assert entry["source_table"] == T and entry["zorder"] == ["ID"] and entry["tombstones_expired"] == 2
    assert main(["maintain", "--target", str(target), "--table", "S.NONE"]) == 2
    assert parse_size("128MB") == 128 * 2**20 and parse_size("1.5GB") == int(1.5 * 2**30)
    with pytest.raises(ConfigError):
        parse_size("lots")


def test_a_merge_reads_only_the_files_its_key_range_touches(spark, tmp_path):
    """Issue 6's "merge cost follows the change": files holding other key ranges are pruned unread,
    and the summary says how many files were read, pruned and rewritten."""
    landing, target = small_runs(spark, tmp_path, runs=4)  # runs 0-2 insert IDs 0-59, one file each
    write_jsonl(landing / "100.json", [ogg(T, "U", "02:00:00", 50_000, before={"ID": 5}, after={"ID": 5, "N": 0}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    t = s.table(T)
    assert t.updated == 1
    assert t.files_scanned == 1 and t.files_skipped >= 2 and t.files_rewritten == 1, t
    assert "1/" in t.files_line() and "files read/pruned/rewritten" in s.render()
    assert json.loads(s.to_json())["tables"][0]["files_skipped"] == t.files_skipped


def test_maintenance_running_beside_merges_loses_nothing(spark, tmp_path):
    """Issue 6: maintenance and merges started beside each other both finish (one writer at a time:
    each waits for the target's lease) and the table ends as the changes say."""
    import threading

    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "000.json", [ogg(T, "I", "00:00:00", 1, after={"ID": 0, "N": 0}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    stop, errors, passes = threading.Event(), [], [0]

    def maintain_loop():
        while not stop.is_set():
            try:
                lakecdc.maintain(str(target), vacuum_retention=None, checkpoint=False, wait=600)
                passes[0] += 1
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                errors.append(exc)
                return

    worker = threading.Thread(target=maintain_loop)
    worker.start()
    try:
        for r in range(1, 7):
            write_jsonl(landing / f"{r:03d}.json", [
                ogg(T, "I", f"00:{r:02d}:00", 10 * r, after={"ID": r, "N": r}, keys=["ID"]),
                ogg(T, "U", f"00:{r:02d}:01", 10 * r + 1, before={"ID": 0}, after={"ID": 0, "N": r}, keys=["ID"]),
            ])
            assert lakecdc.apply(landing, target, format="ogg-json", spark=spark, wait=600).ok
    finally:
        stop.set()
        worker.join()
    assert not errors and passes[0] >= 1
    path = table_path(str(target), T)
    got = {r["ID"]: r["N"] for r in snapshot(path)}
    assert got == {0: 6, **{r: r for r in range(1, 7)}}
