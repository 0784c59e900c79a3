"""The Debezium decode benchmark's encodings (bench/debezium.py) carry the workload's changes:
lakecdc decodes each to the events of the GoldenGate JSON they were converted from.

A tiny workload (2,000 events over 500 keys) is generated and converted into Debezium JSON with
and without schema and Avro wire format; each is decoded with its lakecdc decoder and compared,
event by event (matched on the Oracle SCN, which is the GoldenGate ``pos``), with the decode of
``events.json``: same op, same before image, and as after image the whole new row (Debezium writes
whole rows: an update's partial after image overlays its complete before image). Numbers are
compared as decimals.
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

from bench import debezium  # noqa: E402
from bench.formats import Encoded  # noqa: E402
from bench.generate import SOURCE_SCHEMA, generate  # noqa: E402

pytestmark = pytest.mark.spark

EVENTS, KEYS = 2_000, 500
NUMERIC = {f.name for f in SOURCE_SCHEMA if not pa.types.is_string(f.type)}
Image = dict[str, Any] | None


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generate(tmp_path_factory.mktemp("bench") / "workload", EVENTS, KEYS, seed=7)


@pytest.fixture(scope="module")
def encodings(workload: Any) -> dict[str, Encoded]:
    built = debezium.encode(workload, list(debezium.ENCODINGS), say=lambda _line: None)
    return {e.name: e for e in built}


def _normal(image: Image) -> Image:
    return None if image is None else {c: None if v is None else Decimal(v) if c in NUMERIC else v
                                       for c, v in image.items()}


def _decode(spark: Any, decoder: str, files: list[str], options: dict[str, str], staging: Path, by: str) -> dict:
    """``position -> (op, before, after)`` of every event lakecdc decodes; asserts no ``_error``."""
    from lakecdc.decode import get_decoder
    from lakecdc.spark.conf import job_conf

    with job_conf(spark):
        df = get_decoder(decoder, options).read(spark, files, staging=str(staging))
        found = df.where("op IS NOT NULL OR _error IS NOT NULL").select(
            "op", "pos", "source", "before", "after", "_error").collect()
    errors = [r["_error"] for r in found if r["_error"] is not None]
    assert not errors, f"{decoder}: {len(errors)} bad events, e.g. {errors[:3]}"
    key = (lambda r: int(r["pos"])) if by == "pos" else (lambda r: int(r["source"]["source.scn"]))
    out = {key(r): (r["op"], _normal(r["before"]), _normal(r["after"])) for r in found}
    assert len(out) == len(found) == EVENTS
    return out


@pytest.fixture(scope="module")
def reference(spark: Any, workload: Any, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The GoldenGate events as Debezium sees them: an update's after image is the whole row."""
    decoded = _decode(spark, "ogg-json", [str(workload.events_json)], {}, tmp_path_factory.mktemp("s"), "pos")
    assert any(op == "U" and len(a) < len(SOURCE_SCHEMA) for op, _b, a in decoded.values()), "no partial update"
    return {p: (op, b, {**b, **a} if op == "U" else a) for p, (op, b, a) in decoded.items()}


@pytest.mark.parametrize("name", list(debezium.ENCODINGS))
def test_encoding_decodes_to_the_workload_events(spark: Any, encodings: dict[str, Encoded], reference: dict,
                                                  name: str, tmp_path: Path) -> None:
    e = encodings[name]
    decoded = _decode(spark, e.decoder, [str(f) for f in e.files], e.options, tmp_path, "scn")
    assert decoded == reference


def test_encodings_are_cached_and_the_floors_count_every_event(workload: Any, encodings: dict[str, Encoded]) -> None:
    for name, encoded in encodings.items():
        assert debezium.load(workload, name) == encoded and encoded.events == EVENTS
        for floor in debezium.FLOORS[name]:
            assert floor.run(encoded) == EVENTS, (name, floor.name)
