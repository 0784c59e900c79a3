"""Schema-registry exports with ``references`` (issue 4 item 6): a value schema whose ``source``
record (and, in turn, a type inside it) is registered under other subjects is resolved by subject
and version from the same export, then decodes wire-format messages; a missing or cyclic
reference is a ConfigError that says what was looked for and where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from lakecdc.decode.avro.registry import inline, load_registry
from lakecdc.decode.debezium.avro_reader import Reader
from lakecdc.decode.debezium.settings import Settings
from lakecdc.decode.files.splits import Split
from lakecdc.errors import ConfigError

try:
    from tests.debezium_avro_render import length_prefixed, wire
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from debezium_avro_render import length_prefixed, wire  # type: ignore[no-redef]

NS = "server1.DEBEZIUM.CUSTOMERS"
SOURCE_NAME = "io.debezium.connector.oracle.Source"
ENUM = {"type": "enum", "name": "Snapshot", "namespace": "io.debezium.data", "symbols": ["true", "last", "false"]}
SOURCE = {
    "type": "record", "name": "Source", "namespace": "io.debezium.connector.oracle", "connect.name": SOURCE_NAME,
    "fields": [{"name": "connector", "type": "string"}, {"name": "name", "type": "string"},
               {"name": "ts_ms", "type": "long"}, {"name": "schema", "type": "string"},
               {"name": "table", "type": "string"}, {"name": "scn", "type": ["null", "string"], "default": None},
               # a type the Source subject itself references (a reference of a reference)
               {"name": "snapshot", "type": ["null", "io.debezium.data.Snapshot"], "default": None}],
}
VALUE = {"type": "record", "name": "Value", "namespace": NS,
         "fields": [{"name": "ID", "type": "int"}, {"name": "EMAIL", "type": ["null", "string"], "default": None}]}
ENVELOPE = {
    "type": "record", "name": "Envelope", "namespace": NS, "connect.name": f"{NS}.Envelope",
    "fields": [{"name": "before", "type": ["null", VALUE], "default": None},
               {"name": "after", "type": ["null", "Value"], "default": None},
               {"name": "source", "type": SOURCE_NAME},  # the referenced type, by name only
               {"name": "op", "type": "string"}, {"name": "ts_ms", "type": ["null", "long"], "default": None}],
}
SOURCE_REF = {"name": SOURCE_NAME, "subject": "debezium-oracle-source", "version": 2}
ENUM_REF = {"name": "io.debezium.data.Snapshot", "subject": "debezium-snapshot", "version": 1}


def export(directory: Path, *, source_version: Any = 2, drop_enum: bool = False, cycle: bool = False) -> Path:
    """A registry export as ``curl $REGISTRY/schemas`` lists it, plus one subject version file."""
    directory.mkdir(parents=True, exist_ok=True)
    source_refs = [ENUM_REF] if not cycle else [ENUM_REF, {**SOURCE_REF, "name": "loop"}]
    entries = [
        {"subject": f"{NS}-value", "version": 1, "id": 31, "schema": json.dumps(ENVELOPE),
         "references": [{**SOURCE_REF, "version": source_version}]},
        {"subject": "debezium-oracle-source", "version": 2, "id": 21, "schema": json.dumps(SOURCE),
         "references": source_refs},
        {"subject": "debezium-oracle-source", "version": 1, "id": 20, "schema": json.dumps(SOURCE),
         "references": source_refs},
    ]
    (directory / "schemas.json").write_text(json.dumps(entries))
    if not drop_enum:  # as `curl .../subjects/debezium-snapshot/versions/1` returns it
        (directory / "snapshot.json").write_text(json.dumps(
            {"subject": "debezium-snapshot", "version": 1, "id": 11, "schema": json.dumps(ENUM)}))
    return directory


def envelope(op: str, scn: int, after: dict[str, Any] | None) -> dict[str, Any]:
    source = {"connector": "oracle", "name": "server1", "ts_ms": 1_700_000_000_000 + scn, "schema": "DEBEZIUM",
              "table": "CUSTOMERS", "scn": str(scn), "snapshot": "false"}
    return {"before": None, "after": after, "source": source, "op": op, "ts_ms": None}


def test_references_are_resolved_recursively_and_messages_decode(tmp_path: Path) -> None:
    registry = load_registry(str(export(tmp_path / "schemas")))
    resolved = registry.schemas[31]
    source = next(f for f in resolved["fields"] if f["name"] == "source")["type"]
    # the Source record is written in where it is used, its own Snapshot reference inside it
    assert source["name"] == "Source" and source["namespace"] == "io.debezium.connector.oracle"
    assert next(f for f in source["fields"] if f["name"] == "snapshot")["type"][1]["symbols"] == ["true", "last", "false"]
    assert registry.subjects[31] == f"{NS}-value"

    parsed = fastavro.parse_schema(resolved)
    path = tmp_path / "topic.bin"
    path.write_bytes(length_prefixed([wire(31, parsed, envelope("c", 5, {"ID": 1, "EMAIL": "a@b"})),
                                      wire(31, parsed, envelope("u", 6, {"ID": 1, "EMAIL": "c@d"}))]))
    reader = Reader(Settings(), registry)
    out = [o.value for o in reader.rows(Split(str(path), "messages", 0, path.stat().st_size, 0))]
    assert [(r.table, r.op, dict(r.after or []), r.error) for r in out] == [
        ("DEBEZIUM.CUSTOMERS", "I", {"ID": "1", "EMAIL": "a@b"}, None),
        ("DEBEZIUM.CUSTOMERS", "U", {"ID": "1", "EMAIL": "c@d"}, None),
    ]
    assert dict(out[0].source or [])["source.snapshot"] == "false"


@pytest.mark.parametrize("version", ["latest", -1])
def test_a_latest_reference_takes_the_highest_version_in_the_export(tmp_path: Path, version: Any) -> None:
    registry = load_registry(str(export(tmp_path / "schemas", source_version=version)))
    source = next(f for f in registry.schemas[31]["fields"] if f["name"] == "source")["type"]
    assert source["name"] == "Source" and isinstance(source["fields"], list)


def test_a_missing_reference_names_the_schema_the_reference_and_the_directory(tmp_path: Path) -> None:
    directory = export(tmp_path / "schemas", drop_enum=True)
    with pytest.raises(ConfigError) as info:
        load_registry(str(directory))
    message = str(info.value)
    assert "schema id 2" in message  # 21 or 20: the Source versions reference the missing subject
    assert "'io.debezium.data.Snapshot'" in message and "subject 'debezium-snapshot', version 1" in message
    assert str(directory) in message and "holds no version of that subject" in message


def test_a_missing_version_lists_the_versions_held(tmp_path: Path) -> None:
    directory = export(tmp_path / "schemas", source_version=7)
    with pytest.raises(ConfigError, match=r"schema id 31 references 'io.debezium.connector.oracle.Source' "
                                          r"\(subject 'debezium-oracle-source', version 7\).*holds versions 1, 2"):
        load_registry(str(directory))


def test_a_reference_cycle_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="form a cycle through subject 'debezium-oracle-source' version 2"):
        load_registry(str(export(tmp_path / "schemas", cycle=True)))


def test_inline_defines_a_type_once_and_names_it_after() -> None:
    named = {"a.B": {"type": "record", "name": "B", "namespace": "a", "fields": [{"name": "x", "type": "int"}]}}
    schema = {"type": "record", "name": "R", "namespace": "n",
              "fields": [{"name": "one", "type": "a.B"}, {"name": "two", "type": ["null", "a.B"]},
                         {"name": "many", "type": {"type": "array", "items": "a.B"}}]}
    out = inline(schema, named)
    assert out["fields"][0]["type"]["fields"] == [{"name": "x", "type": "int"}]
    assert out["fields"][1]["type"] == ["null", "a.B"] and out["fields"][2]["type"]["items"] == "a.B"
    fastavro.parse_schema(out)  # valid Avro: defined once, then named
