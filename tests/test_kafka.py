"""Kafka topics as lakecdc's input, against a real broker (KRaft, started by tests/services.py):
records land as files exactly once and apply as files do, run by run equal to the oracle, across
a killed landing and a killed stream."""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.run.kafka import CHECKPOINT, Kafka, land_available

try:
    from tests.ogg_render import render_ogg_json
    from tests.scenario_driver import Rendered, drive
    from tests.test_property import SLOW_SETTINGS, scenarios
except ModuleNotFoundError:  # (run from tests/)
    from ogg_render import render_ogg_json  # type: ignore[no-redef]
    from scenario_driver import Rendered, drive  # type: ignore[no-redef]
    from test_property import SLOW_SETTINGS, scenarios  # type: ignore[no-redef]

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.services]
pytest_plugins = ["tests.services"]  # the fixture kafka_bootstrap

EXAMPLES = int(os.environ.get("LAKECDC_KAFKA_EXAMPLES", "3"))
REPO = Path(__file__).resolve().parents[1]


def produce(spark: Any, bootstrap: str, topic: str, values: list[str | None], keys: list[str | None] | None = None) -> None:
    """``values`` (and ``keys``) as records of ``topic``, in this order (one writer task; a topic
    the broker creates on first use has one partition)."""
    rows = list(zip(keys or [None] * len(values), values, strict=True))
    df = spark.createDataFrame(rows, "key STRING, value STRING").coalesce(1)
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()


def topic_name() -> str:
    return f"lakecdc-{uuid.uuid4().hex[:10]}"


GG = "2024-01-01 00:00:0{}.000000"


def gg(op: str, n: int, pos: int, *, before: dict | None = None, after: dict | None = None) -> str:
    """A GoldenGate JSON message of table S.T (pretty-printed: a record's value may span lines)."""
    msg: dict[str, Any] = {"table": "S.T", "op_type": op, "op_ts": GG.format(n), "pos": f"{pos:020d}"}
    if before is not None:
        msg["before"] = before
    if after is not None:
        msg["after"] = after
    return json.dumps(msg, indent=2)


def rows(spark: Any, target: Path) -> list[tuple]:
    """Table S.T's rows as (ID, A, B), by ID."""
    table = lakecdc.read_table(str(target / "S.T"), spark=spark).toArrow().to_pylist()
    return sorted((r["ID"], r.get("A"), r.get("B")) for r in table)


def test_topic_records_apply_once_each_run_taking_only_the_new_ones(spark: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    """Records apply as files do: a second run lands and applies only the records produced since
    the first (a missing column never overwrites), a third finds nothing new."""
    topic, target = topic_name(), tmp_path / "target"
    source = Kafka(kafka_bootstrap, subscribe=topic)
    produce(spark, kafka_bootstrap, topic, [
        gg("I", 1, 1, after={"ID": 1, "A": "a", "B": "b"}),
        gg("U", 2, 2, before={"ID": 1}, after={"ID": 1, "A": "a2"}),
    ])
    first = lakecdc.apply(source, target, format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    assert first.ok and first.tables[0].events == 2 and first.tables[0].quarantined == 0
    assert rows(spark, target) == [(1, "a2", "b")]
    produce(spark, kafka_bootstrap, topic, [
        gg("I", 3, 3, after={"ID": 2, "A": "x", "B": "y"}),
        gg("D", 4, 4, before={"ID": 1}),
    ])
    second = lakecdc.apply(source, target, format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    assert second.tables[0].events == 2 and (second.tables[0].inserted, second.tables[0].deleted) == (1, 1)
    assert rows(spark, target) == [(2, "x", "y")]
    third = lakecdc.apply(source, target, format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    assert third.runs == () and third.tables == ()
    landed = sorted(p.name for p in (target / "_lakecdc" / "kafka").iterdir())
    assert landed[0] == CHECKPOINT and len(landed) == 3  # two batches and the checkpoint


def test_records_of_several_partitions_and_topics_apply_in_their_changes_order(
    spark: Any, kafka_bootstrap: str, tmp_path: Path,
) -> None:
    """A topic of three partitions (records spread by key) and a second topic by pattern: every
    record lands once per partition, in offset order, and the table is the one the same messages
    give from one file."""
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = topic_name()
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(f"{prefix}-a", 3, 1), NewTopic(f"{prefix}-b", 1, 1)]).values():
        future.result(30)
    messages = history(n_keys=12, n_events=90, seed=3)
    keys = [str(json.loads(m).get("after", json.loads(m).get("before"))["ID"]) for m in messages]
    produce(spark, kafka_bootstrap, f"{prefix}-a", messages[:60], keys[:60])
    produce(spark, kafka_bootstrap, f"{prefix}-b", messages[60:], keys[60:])
    source = Kafka(kafka_bootstrap, subscribe_pattern=f"{prefix}-.*")
    summary = lakecdc.apply(source, tmp_path / "target", format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    assert summary.ok and summary.tables[0].events == 90
    (landed,) = [p for p in source.landing_dir(tmp_path / "target").iterdir() if p.name.startswith("batch-")]
    ranges = json.loads((landed / "_offsets.json").read_text())["ranges"]
    assert sorted((r["topic"][-1], r["partition"]) for r in ranges) == [("a", 0), ("a", 1), ("a", 2), ("b", 0)]
    assert sum(r["records"] for r in ranges) == 90
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "all.json").write_text("\n".join(messages) + "\n")
    lakecdc.apply(tmp_path / "files", tmp_path / "expected", format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    assert rows(spark, tmp_path / "target") == rows(spark, tmp_path / "expected")


def test_records_landed_by_a_killed_run_apply_once_and_a_half_landed_batch_is_landed_again(
    spark: Any, kafka_bootstrap: str, tmp_path: Path,
) -> None:
    """A process killed after landing (before applying) and one killed while landing (a temporary
    directory left): the next run applies every record once, none lost, none twice."""
    topic, target = topic_name(), tmp_path / "target"
    source = Kafka(kafka_bootstrap, subscribe=topic)
    produce(spark, kafka_bootstrap, topic, [gg("I", 1, 1, after={"ID": 1, "A": "a", "B": "b"})])
    landing = source.landing_dir(target)
    land_available(spark, source, landing, "values")  # landed, then "killed" before the apply
    half = landing / ".landing-killed"
    (half / "topic=x" / "partition=0").mkdir(parents=True)
    (half / "topic=x" / "partition=0" / "part-0.txt").write_text("{not even json\n")
    produce(spark, kafka_bootstrap, topic, [gg("U", 2, 2, before={"ID": 1}, after={"ID": 1, "B": "b2"})])
    summary = lakecdc.apply(source, target, format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    assert summary.ok and summary.tables[0].events == 2 and summary.tables[0].quarantined == 0
    assert not half.exists()
    assert rows(spark, target) == [(1, "a", "b2")]


def test_a_format_kafka_does_not_carry_is_refused_naming_those_it_does(spark: Any, tmp_path: Path) -> None:
    """ogg-xml is not read from Kafka: the error names the formats that are, before any read."""
    with pytest.raises(lakecdc.ConfigError, match=r"not read from Kafka; formats that are: .*ogg-json"):
        lakecdc.apply(Kafka("127.0.0.1:1", subscribe="t"), tmp_path / "t", format="ogg-xml", spark=spark)


def test_the_command_line_applies_topics_and_wants_exactly_one_input(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """``lakecdc apply --kafka-bootstrap-servers ... --subscribe ...`` applies a topic's records;
    ``--input`` together with Kafka flags (or a Kafka option without ``=``) is refused, naming why."""
    from lakecdc.cli import main

    topic, target = topic_name(), tmp_path / "target"
    produce(spark, kafka_bootstrap, topic, [gg("I", 1, 1, after={"ID": 7, "A": "a", "B": "b"})])
    kafka = ["--kafka-bootstrap-servers", kafka_bootstrap, "--subscribe", topic]
    common = ["apply", "--format", "ogg-json", "--target", str(target), "--key", "S.T=ID"]
    assert main([*common, *kafka, "--kafka-option", "maxOffsetsPerTrigger=100"]) == 0
    assert rows(spark, target) == [(7, "a", "b")]
    assert main([*common, *kafka, "--input", str(tmp_path)]) == 2
    assert "--input PATH or as --kafka-bootstrap-servers" in capsys.readouterr().err
    assert main([*common, *kafka, "--kafka-option", "maxOffsetsPerTrigger"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [dict(subscribe=None), dict(subscribe="a", subscribe_pattern="b.*"), dict(subscribe=" , ")])
def test_kafka_input_needs_exactly_one_way_of_naming_topics(bad: dict) -> None:
    """Topics by name or by pattern, exactly one of them, and at least one name."""
    with pytest.raises(lakecdc.ConfigError, match="kafka:"):
        Kafka("127.0.0.1:9092", **bad)


@pytest.mark.slow
@settings(max_examples=EXAMPLES, **SLOW_SETTINGS)  # type: ignore[arg-type]
@given(sc=scenarios(max_events=20, modes=("delete-insert", "update")), data=st.data())
def test_goldengate_json_through_kafka_matches_the_oracle_run_by_run(
    spark: Any, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, sc: Any, data: st.DataObject,
) -> None:
    """Histories written by GoldenGate's Kafka handler (one JSON message a record), each run's
    messages produced to a topic and applied from it, equal the oracle after every run."""
    topic = topic_name()
    pretty = data.draw(st.booleans(), label="pretty-printed values")

    def render(run: list[int], number: int) -> Rendered:
        events = [sc.events[i] for i in run]
        return Rendered(render_ogg_json(events), ".json", events)

    def deliver(path: Path, _files: list[str]) -> Kafka:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        produce(spark, kafka_bootstrap, topic, [json.dumps(json.loads(v), indent=2) if pretty else v for v in lines])
        return Kafka(kafka_bootstrap, subscribe=topic)

    drive(spark, sc, tmp_path_factory.mktemp("kafka"), fmt="ogg-json", render=render, deliver=deliver)


def history(n_keys: int, n_events: int, seed: int) -> list[str]:
    """GoldenGate JSON messages of table S.T: inserts, partial updates and deletes of ``n_keys``
    keys (a deleted key is inserted again later), in op_ts/pos order."""
    rnd = random.Random(seed)
    live: dict[int, dict] = {}
    out = []
    for n in range(n_events):
        key = rnd.randrange(n_keys)
        ts = f"2024-01-01 00:{n // 60:02d}:{n % 60:02d}.000000"
        base: dict[str, Any] = {"table": "S.T", "op_ts": ts, "pos": f"{n + 1:020d}"}
        if key not in live:
            live[key] = {"ID": key, "A": f"a{n}", "B": f"b{n}"}
            out.append(json.dumps({**base, "op_type": "I", "after": live[key]}))
        elif rnd.random() < 0.2:
            del live[key]
            out.append(json.dumps({**base, "op_type": "D", "before": {"ID": key}}))
        else:
            column = rnd.choice("AB")
            live[key][column] = f"{column.lower()}{n}"
            out.append(json.dumps({**base, "op_type": "U", "before": {"ID": key},
                                   "after": {"ID": key, column: live[key][column]}}))
    return out


def printed_lines(child: subprocess.Popen) -> queue.Queue[str]:
    """The lines ``child`` prints, as they come."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True).start()  # type: ignore[union-attr]
    return lines


def wait_for(lines: queue.Queue[str], prefix: str, *, limit: float) -> bool:
    """Whether a line starting with ``prefix`` came within ``limit`` seconds."""
    started = time.monotonic()
    while (left := limit - (time.monotonic() - started)) > 0:
        try:
            if lines.get(timeout=left).startswith(prefix):
                return True
        except queue.Empty:
            break
    return False


def batches_until_quiet(lines: queue.Queue[str], *, quiet: float, limit: float) -> int:
    """How many ``batch`` lines came until none came for ``quiet`` seconds after the first one
    (or ``limit`` seconds passed)."""
    seen, started = 0, time.monotonic()
    while time.monotonic() - started < limit:
        try:
            line = lines.get(timeout=quiet if seen else limit)
        except queue.Empty:
            break
        seen += line.startswith("batch ")
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stream", "hook"])
def test_a_stream_killed_at_any_moment_and_restarted_applies_every_change_exactly_once(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, mode: str,
) -> None:
    """``lakecdc.stream`` over a topic (or a user's own query with ``lakecdc.foreach_batch``),
    killed with SIGKILL at random moments while records keep coming and started again, ends with
    the table that applying every message once from a file gives: nothing lost, nothing twice."""
    topic, target = topic_name(), tmp_path / "target"
    messages = history(n_keys=25, n_events=240, seed=11)
    chunks = [messages[i : i + 60] for i in range(0, len(messages), 60)]  # two kills
    rnd = random.Random(5)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(REPO / "tests" / "kafka_stream_child.py"), kafka_bootstrap, topic, str(target), mode]
    kills, worked = 0, 0
    for first, second in zip(chunks[::2], chunks[1::2], strict=True):
        produce(spark, kafka_bootstrap, topic, first)
        log = tmp_path / f"child-{kills}.log"
        with log.open("w") as err:
            child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        lines = printed_lines(child)
        try:
            applied = wait_for(lines, "batch ", limit=240.0)  # it applied the first chunk
            assert applied, f"child {kills} applied nothing in 240 s: {log.read_text()[-3000:]}"
            worked += 1
            produce(spark, kafka_bootstrap, topic, second)
            time.sleep(rnd.uniform(0.0, 4.0))  # killed while landing or applying the second, or between
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        kills += 1
    # a last run takes whatever the killed ones left (landed or not)
    if mode == "stream":
        lakecdc.apply(Kafka(kafka_bootstrap, subscribe=topic), target, format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    else:  # the user's query started once more, until its batches stop coming
        done = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert batches_until_quiet(printed_lines(done), quiet=10.0, limit=180.0) > 0
        finally:
            done.send_signal(signal.SIGKILL)
            done.wait()
    files = tmp_path / "files"
    files.mkdir()
    (files / "all.json").write_text("\n".join(messages) + "\n")
    lakecdc.apply(files, tmp_path / "expected", format="ogg-json", keys={"S.T": ["ID"]}, spark=spark)
    assert kills == len(chunks) // 2 and worked == kills  # every child applied something before it was killed
    assert rows(spark, target) == rows(spark, tmp_path / "expected")
    assert len(rows(spark, target)) > 5
