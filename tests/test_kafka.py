"""Kafka topics as lakecdc's input, against a real broker (KRaft, started by tests/services.py):
records land as files exactly once and apply as files do, run by run equal to the oracle, across
a killed landing and a killed stream."""

from __future__ import annotations

import json
import os
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


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """A broker's ``HOST:PORT``: ``LAKECDC_TEST_KAFKA``, else one tests/services.py starts."""
    given = os.environ.get("LAKECDC_TEST_KAFKA")
    if given:
        return given
    pytest.skip("no broker (set LAKECDC_TEST_KAFKA)")


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
