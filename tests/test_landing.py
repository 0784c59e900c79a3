"""Landing files as writers leave them: still being written, growing after a run read them,
rewritten in place; Kafka batches landed in the order they were read."""

from __future__ import annotations

import json
import os
import time

import pytest

import lakecdc
from lakecdc.errors import InputChangedError
from lakecdc.lake.ledger import InputFile, Ledger, Manifest
from tests.helpers import ogg, rows


def line(m: dict) -> str:
    return json.dumps(m) + "\n"


def ins(pos: int, key: int, n: int) -> dict:
    return ogg("S.T", "I", f"00:00:{pos:02d}", pos, after={"ID": key, "N": n}, keys=["ID"])


def upd(pos: int, key: int, n: int) -> dict:
    return ogg("S.T", "U", f"00:00:{pos:02d}", pos, before={"ID": key}, after={"ID": key, "N": n}, keys=["ID"])


def test_a_growing_file_is_read_on_from_its_new_complete_lines(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    f = landing / "trail.json"
    f.write_text(line(ins(1, 1, 1)) + line(ins(2, 2, 1)))
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    table = target.resolve() / "S.T"
    # the writer appends two messages and is half-way through a third
    third = line(upd(5, 1, 3))
    with f.open("a") as fh:
        fh.write(line(upd(3, 1, 2)) + line(ins(4, 3, 1)) + third[:25])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.table("S.T").events == 2 and s.table("S.T").quarantined == 0
    assert rows(table, "ID") == [{"ID": 1, "N": 2}, {"ID": 2, "N": 1}, {"ID": 3, "N": 1}]
    with f.open("a") as fh:
        fh.write(third[25:] + line(upd(6, 2, 5)))
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.table("S.T").events == 2 and s.table("S.T").quarantined == 0
    assert rows(table, "ID") == [{"ID": 1, "N": 3}, {"ID": 2, "N": 5}, {"ID": 3, "N": 1}]
    assert lakecdc.apply(landing, target, format="ogg-json", spark=spark).runs == ()   # nothing new: nothing read again
    parts = [i for m in Ledger(target).manifests() for i in m.inputs]
    assert [(p.origin is not None, p.consumed) for p in parts][-1] == (True, f.stat().st_size)


def test_a_line_caught_half_written_is_quarantined_then_read_again_whole(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    f = landing / "trail.json"
    second = line(upd(2, 1, 2))
    f.write_text(line(ins(1, 1, 1)) + second[:30])          # a new file that ends mid-line
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.quarantined_unrouted == 1 and rows(target.resolve() / "S.T") == [{"ID": 1, "N": 1}]
    with f.open("a") as fh:
        fh.write(second[30:])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.table("S.T").events == 1 and s.table("S.T").updated == 1 and s.quarantined_unrouted == 0
    assert rows(target.resolve() / "S.T") == [{"ID": 1, "N": 2}]


def test_files_younger_than_min_file_age_wait_for_a_later_run(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    (landing / "old.json").write_text(line(ins(1, 1, 1)))
    hour_ago = time.time() - 3600
    os.utime(landing / "old.json", (hour_ago, hour_ago))
    (landing / "new.json").write_text(line(ins(2, 2, 1)))
    said: list[str] = []
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark, min_file_age=60, progress=said.append)
    assert s.files == 1 and rows(target.resolve() / "S.T") == [{"ID": 1, "N": 1}]
    assert any("1 file(s) changed less than 60s ago" in m for m in said)
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert s.files == 1 and rows(target.resolve() / "S.T", "ID") == [{"ID": 1, "N": 1}, {"ID": 2, "N": 1}]


def test_files_that_cannot_be_applied_in_parts_are_errors_that_say_what_to_do(tmp_path):
    f = tmp_path / "changes.avro"
    f.write_bytes(b"x" * 100)
    ledger = Ledger(tmp_path / "lake")
    ledger.write(Manifest(run_id=1, status="committed", format="ogg-avro-op", inputs=[InputFile.of(str(f))]))
    assert ledger.plan("ogg-avro-op", [str(f)]).new == []
    f.write_bytes(b"x" * 150)
    with pytest.raises(InputChangedError, match=r"grew from 100 to 150 bytes .*ogg-avro-op files cannot be applied in parts"):
        ledger.plan("ogg-avro-op", [str(f)])
    f.write_bytes(b"x" * 50)
    with pytest.raises(InputChangedError, match="shorter than the 100 bytes already applied"):
        ledger.plan("ogg-json", [str(f)], appendable=True)


def test_kafka_batches_land_in_the_order_they_were_read():
    """A landed Kafka batch's directory sorts by the landing query's batch id, not by offsets: a
    partition that appears in a later batch (its records starting at offset 0) still sorts after
    the batches read before it, so the files apply in arrival order; a batch read again (same id,
    same ranges) gets the same name."""
    from lakecdc.run.kafka import _batch_name

    early = ({"topic": "t", "partition": 0, "first": 500, "last": 900},)
    later = ({"topic": "t", "partition": 0, "first": 901, "last": 950}, {"topic": "t", "partition": 1, "first": 0, "last": 7})
    names = [_batch_name(9, early), _batch_name(10, later), _batch_name(100, early)]
    assert names == sorted(names) and len(set(names)) == 3
    assert _batch_name(10, later) == _batch_name(10, later)
