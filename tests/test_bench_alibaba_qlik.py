"""The Alibaba DTS / Qlik decode benchmark's encodings (bench/alibaba_qlik.py) carry the
workload's changes: lakecdc decodes each to what the source would have said of the GoldenGate
events they were converted from.

A tiny workload (2,000 events over 500 keys) is generated and converted into DTS Avro, SharePlex
JSON, Canal JSON and Qlik JSON; each is decoded with its lakecdc decoder (no ``_error``, every
event once, table ``BENCH.ORDERS``) and compared, event by event (matched on the GoldenGate
``pos``, which each encoding carries), with ``events.json`` as the format can say it:

* DTS and Canal write whole rows: an update's after image is its before image with the changed
  columns laid over it;
* SharePlex writes an update's changed columns over its key (before image: the key alone);
* Qlik writes every column with ``columnMask``: a partial update's uncaptured columns are missing
  from both images (``source['present_columns']`` names the captured ones).

Numbers are compared as decimals, dates as ``YYYY-MM-DD`` text.
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import alibaba_qlik  # noqa: E402
from bench.converted import whole_row  # noqa: E402
from bench.formats import Encoded  # noqa: E402
from bench.generate import KEY, SOURCE_SCHEMA, TABLE, generate  # noqa: E402

pytestmark = pytest.mark.spark

EVENTS, KEYS = 2_000, 500
NUMERIC = {f.name for f in SOURCE_SCHEMA if not pa.types.is_string(f.type)}
#: the ``source`` member that carries the GoldenGate ``pos`` in each encoding
POSITION = {"dts-avro": "id", "shareplex-json": "scn", "canal-json": "id", "qlik-json": "streamPosition"}
Image = dict[str, Any] | None
View = tuple[str, Image, Image]


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generate(tmp_path_factory.mktemp("bench") / "workload", EVENTS, KEYS, seed=7)


@pytest.fixture(scope="module")
def encodings(workload: Any) -> dict[str, Encoded]:
    built = alibaba_qlik.encode(workload, list(alibaba_qlik.ENCODINGS), say=lambda _line: None)
    return {e.name: e for e in built}


@pytest.fixture(scope="module")
def messages(workload: Any) -> dict[int, dict[str, Any]]:
    with workload.events_json.open(encoding="utf-8") as fh:
        out = {int(m["pos"]): m for m in map(json.loads, fh)}
    partial = [m for m in out.values() if m["op_type"] == "U" and len(m["after"]) < len(SOURCE_SCHEMA)]
    assert partial and len(partial) < sum(m["op_type"] == "U" for m in out.values()), "half the updates partial"
    return out


def _normal(image: Image) -> Image:
    return None if image is None else {c: None if v is None else Decimal(str(v)) if c in NUMERIC else v
                                       for c, v in image.items()}


def expected(name: str, m: dict[str, Any], present: list[str] | None) -> View:
    """What encoding ``name`` says of the GoldenGate message ``m`` (see the module docstring)."""
    op, before, after = m["op_type"], m.get("before"), whole_row(m)
    if op == "D":
        return op, _normal(before), None
    if op == "I":
        return op, None, _normal(after)
    if name == "shareplex-json":
        changed = alibaba_qlik._changed(m)
        return op, _normal({KEY: before[KEY]}), _normal({KEY: before[KEY], **{c: after[c] for c in changed}})
    if name == "qlik-json":
        assert present == [c for c in SOURCE_SCHEMA.names if c in m["after"]], "columnMask = the logged columns"
        return op, _normal({c: before[c] for c in present}), _normal({c: after[c] for c in present})
    return op, _normal(before), _normal(after)


@pytest.mark.parametrize("name", list(alibaba_qlik.ENCODINGS))
def test_encoding_decodes_to_the_workload_events(spark: Any, encodings: dict[str, Encoded],
                                                  messages: dict[int, dict[str, Any]], name: str,
                                                  tmp_path: Path) -> None:
    from lakecdc.decode import get_decoder
    from lakecdc.spark.conf import job_conf

    e = encodings[name]
    with job_conf(spark):
        df = get_decoder(e.decoder, e.options).read(spark, [str(f) for f in e.files], staging=str(tmp_path))
        rows = df.select("table", "op", "source", "before", "after", "_error").collect()
    errors = [r["_error"] for r in rows if r["_error"] is not None]
    assert not errors, f"{name}: {len(errors)} bad events, e.g. {errors[:3]}"
    assert len(rows) == EVENTS and {r["table"] for r in rows} == {TABLE}
    decoded = {int(r["source"][POSITION[name]]): r for r in rows}
    assert set(decoded) == set(messages), f"{name}: every event once"
    for pos, r in decoded.items():
        present = r["source"].get("present_columns")
        view = expected(name, messages[pos], present.split(",") if present else None)
        assert (r["op"], _normal(r["before"]), _normal(r["after"])) == view, (name, pos)


def test_encodings_are_cached_and_the_floors_count_every_event(workload: Any, encodings: dict[str, Encoded]) -> None:
    for name, encoded in encodings.items():
        assert alibaba_qlik.load(workload, name) == encoded and encoded.events == EVENTS
        for floor in alibaba_qlik.FLOORS[name]:
            assert floor.run(encoded) == EVENTS, (name, floor.name)
