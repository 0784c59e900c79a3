"""The decode benchmark's encodings (bench/formats.py) carry the workload's events, and lakecdc
decodes each to the same events as the op-modeled JSON it was converted from.

A tiny workload (2,000 events over 500 keys) is generated and converted into every encoding;
each is decoded with its lakecdc decoder and compared, event by event (matched on ``pos``), with
the decode of ``events.json``: op-modeled encodings carry both images exactly (missing columns
stay missing), row-modeled ones the single image the formatter writes (Avro row: missing columns
as NULL, the format's limit). Numbers are compared as decimals (Avro carries the decimals as
doubles, JSON row reads ``17520.00`` as ``17520``).
"""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import decode as bench_decode  # noqa: E402
from bench import formats  # noqa: E402
from bench.generate import KEY, SOURCE_SCHEMA, Workload, generate  # noqa: E402

pytestmark = pytest.mark.spark

EVENTS, KEYS = 2_000, 500
NUMERIC = {f.name for f in SOURCE_SCHEMA if not pa.types.is_string(f.type)}
OP_MODELED = {"ogg-avro-op", "ogg-avro-op-ocf", "ogg-xml"}
ROW_MODELED = {"ogg-json-row", "ogg-delimited", "ogg-avro-row", "ogg-avro-row-ocf"}
Image = dict[str, Any] | None


@pytest.fixture(scope="module")
def encodings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, formats.Encoded]:
    workload = generate(tmp_path_factory.mktemp("bench") / "workload", EVENTS, KEYS, seed=7)
    built = formats.encode(workload, list(formats.ENCODINGS), say=lambda _line: None)
    return {e.name: e for e in built}


def _decode(spark: Any, encoded: formats.Encoded, staging: Path) -> dict[str, tuple[str, Image, Image]]:
    """``pos -> (op, before, after)`` of every event lakecdc decodes; asserts no ``_error``."""
    from lakecdc.decode import get_decoder
    from lakecdc.spark.conf import job_conf

    with job_conf(spark):
        events = get_decoder(encoded.decoder, encoded.options).read(
            spark, [str(f) for f in encoded.files], staging=str(staging)
        )
        rows = events.select("op", "pos", "before", "after", "_error").collect()
    errors = [r["_error"] for r in rows if r["_error"] is not None]
    assert not errors, f"{encoded.name}: {len(errors)} bad events, e.g. {errors[:3]}"
    assert len(rows) == EVENTS
    decoded = {r["pos"]: (r["op"], r["before"], r["after"]) for r in rows}
    assert len(decoded) == EVENTS, f"{encoded.name}: positions repeat"
    return decoded


def _value(column: str, text: str | None) -> Any:
    return None if text is None else Decimal(text) if column in NUMERIC else text


def _normal(image: Image) -> Image:
    return None if image is None else {c: _value(c, v) for c, v in image.items()}


@pytest.fixture(scope="module")
def reference(spark: Any, encodings: dict[str, formats.Encoded], tmp_path_factory: pytest.TempPathFactory) -> dict:
    decoded = _decode(spark, encodings["ogg-json"], tmp_path_factory.mktemp("staging"))
    partial = [p for p, (op, _b, a) in decoded.items() if op == "U" and len(a) < len(SOURCE_SCHEMA)]
    nulls = [p for p, (_op, b, a) in decoded.items() if None in (b or {}).values() or None in (a or {}).values()]
    assert partial and nulls, "the workload should hold partial updates and NULLs"
    return decoded


def test_encodings_are_cached(encodings: dict[str, formats.Encoded]) -> None:
    for name, encoded in encodings.items():
        workload = Workload(encoded.directory.parents[1], EVENTS, KEYS)  # <workload>/formats/<name>
        assert formats.load(workload, name) == encoded
        assert encoded.events == EVENTS and encoded.bytes > 0


@pytest.mark.parametrize("name", [n for n in formats.ENCODINGS if n != "ogg-json"])
def test_encoding_decodes_to_the_json_events(
    spark: Any, encodings: dict[str, formats.Encoded], reference: dict, name: str, tmp_path: Path
) -> None:
    decoded = _decode(spark, encodings[name], tmp_path / "staging")
    assert set(decoded) == set(reference)
    for pos, (op, before, after) in reference.items():
        got_op, got_before, got_after = decoded[pos]
        assert got_op == op, pos
        image = before if op == "D" else after
        key = image[KEY]
        got_image = got_before if op == "D" else got_after
        assert got_image is not None and _value(KEY, got_image[KEY]) == _value(KEY, key), pos
        if name in OP_MODELED:
            # both images, missing columns still missing, NULL still NULL
            assert _normal(got_before) == _normal(before), (pos, "before")
            assert _normal(got_after) == _normal(after), (pos, "after")
            continue
        assert name in ROW_MODELED
        # one image: the after image of an insert or update, the before image of a delete
        assert (got_before is None) == (op != "D") and (got_after is None) == (op == "D"), pos
        expected = _normal(image)
        if name.startswith("ogg-avro-row"):  # avro_row cannot say missing: every column, NULL if missing
            expected = {c: expected.get(c) for c in SOURCE_SCHEMA.names}
        assert _normal(got_image) == expected, pos


def test_floors_count_every_event(encodings: dict[str, formats.Encoded]) -> None:
    for name, encoded in encodings.items():
        for floor in bench_decode.FLOORS[name]:
            assert floor.run(encoded) == EVENTS, (name, floor.name)


def test_contenders_take_turns() -> None:
    """lakecdc and the floors run in rounds (one run each per round), so that a drift of the
    machine's speed slows them alike; warm-up runs stay out of the medians."""
    order: list[str] = []

    def contender(name: str):  # noqa: ANN202
        def run() -> int:
            order.append(name)
            return 7
        return run

    runs = bench_decode.timed({"lakecdc": contender("lakecdc"), "floor": contender("floor")}, 7, 1, 2)
    assert order == ["lakecdc", "floor"] * 3
    assert {name: len(r.seconds) for name, r in runs.items()} == {"lakecdc": 3, "floor": 3}
    assert all(r.warmup == 1 for r in runs.values())
    with pytest.raises(AssertionError, match="6 events, expected 7"):
        bench_decode.timed({"short": lambda: 6}, 7, 0, 1)


def test_each_format_is_measured_in_a_process_of_its_own(tmp_path: Path) -> None:
    """With several formats, the command runs itself again per format (a fresh JVM each) and
    reports their outcomes together, as one run."""
    import subprocess

    argv = [sys.executable, "-m", "bench.decode", "--events", "2000", "--keys", "500", "--workdir", str(tmp_path),
            "--formats", "ogg-json,ogg-delimited", "--repeat", "1", "--warmup", "0"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True)
    table = done.stdout[done.stdout.rindex("| format |"):]
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ogg-")]
    assert rows == ["ogg-json", "ogg-delimited"]
    assert "Each format is measured in a process and JVM of its own." in done.stdout
    assert done.stdout.count("Spark start-up (fresh JVM)") == 2  # the children's: the parent starts none
    assert "(the most any format's process saw)" in done.stdout
    assert sorted(p.name for p in tmp_path.glob("outcome-*.json")) == ["outcome-ogg-delimited.json",
                                                                       "outcome-ogg-json.json"]


_PARENT = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its children leave no trace when they exit
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
time.sleep(60)
"""
_WORKER = """
import os, sys, time
t = time.process_time()
while time.process_time() - t < 0.4:
    pass
open(sys.argv[1], "w").write(f"{os.getpid()} {time.process_time()}")  # burnt: the test takes its snapshot now
while os.path.exists(sys.argv[1]):  # ... and removes the file when the worker is to go
    time.sleep(0.01)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs; it may go at any moment, between any two questions asked."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_tree_cpu_counts_no_less_than_nothing_when_a_worker_exits_unreaped(tmp_path: Path) -> None:
    """A descendant that used CPU before the snapshot and exits without being waited for (as a
    Spark Python worker can) once made the CPU figures negative."""
    import subprocess
    import time

    from bench.run import TreeCpu

    flag = tmp_path / "burnt"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _WORKER, str(flag)])
    try:
        while not flag.exists() or len(flag.read_text().split()) < 2:
            time.sleep(0.01)
        pid, burnt = flag.read_text().split()
        worker = int(pid)
        cpu = TreeCpu()
        flag.unlink()
        while _running(worker):
            time.sleep(0.01)
        # the worker's CPU time was spent before the snapshot: none of it is counted (what the
        # tree spent since, polling and sleeping, is less), and nothing goes below 0
        assert 0 <= cpu.since() < float(burnt)
    finally:
        parent.kill()
        parent.wait()
