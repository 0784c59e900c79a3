"""Debezium's Avro decoded with the writer schemas fetched from a schema registry's REST API
(``schema.registry.url``): against a real registry (karapace on loopback, tests/services.py), the
same tables as from a ``schemaDirectory`` export of the registry's subjects, references resolved,
an id the registry lacks quarantined with the registry's answer; a registry that does not answer,
and basic authentication, with the client alone."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import lakecdc
from lakecdc.decode.avro.registry import SchemaRegistryClient
from lakecdc.errors import ConfigError
from tests.decode.debezium.test_debezium_avro import ENVELOPE, KEY, MESSAGES, NS, SOURCE, TX_MARKER
from tests.test_kafka_formats import kcat_dump, quarantined, tables

if TYPE_CHECKING:
    from tests.services import SchemaRegistry

pytest_plugins = ["tests.services"]  # the fixture schema_registry

SOURCE_SUBJECT = "io.debezium.connector.postgresql.Source"
#: the envelope with its Source record registered under a subject of its own, named by reference
ENVELOPE_BY_REFERENCE = {**ENVELOPE, "fields": [
    {**f, "type": SOURCE_SUBJECT} if f["name"] == "source" else f for f in ENVELOPE["fields"]]}


def register(registry: SchemaRegistry, subject: str, schema: Any, references: list[dict[str, Any]] | None = None) -> int:
    """The id the registry gives ``schema`` under ``subject``."""
    body: dict[str, Any] = {"schema": json.dumps(schema)}
    if references:
        body["references"] = references
    return int(registry.request("POST", f"/subjects/{subject}/versions", body)["id"])


def with_id(message: bytes, schema_id: int) -> bytes:
    """A wire-format message naming ``schema_id`` instead (its body unchanged)."""
    return message[:1] + schema_id.to_bytes(4, "big") + message[5:]


@pytest.mark.spark
@pytest.mark.services
def test_schemas_from_the_registry_apply_as_from_an_export_of_it(spark: Any, schema_registry: SchemaRegistry,
                                                                 tmp_path: Path) -> None:
    """Debezium's key, envelope and transaction-marker schemas registered in a real registry, the
    envelope twice (the second version names its Source record by a reference to another subject):
    a kcat dump of wire-format records with the ids the registry gave applies with
    ``schema.registry.url`` exactly as with ``schemaDirectory`` holding the registry's export of
    those subjects (same tables, counts, rows). A record whose id the registry does not have is
    quarantined, its reason naming the id, the registry and its answer."""
    url = schema_registry.url
    register(schema_registry, SOURCE_SUBJECT, SOURCE)
    ids = {
        "value": register(schema_registry, f"{NS}-value", ENVELOPE),
        "by-reference": register(schema_registry, f"{NS}-value", ENVELOPE_BY_REFERENCE,
                                 [{"name": SOURCE_SUBJECT, "subject": SOURCE_SUBJECT, "version": 1}]),
        "key": register(schema_registry, f"{NS}-key", KEY),
        "tx": register(schema_registry, "dbserver1.transaction-value", TX_MARKER),
    }
    assert len(set(ids.values())) == 4, ids
    unknown = max(ids.values()) + 1000
    old_ids = {7: "value", 8: "key", 9: "tx"}  # the ids tests/decode/debezium/test_debezium_avro.py wrote
    records: list[tuple[str, bytes | None, bytes | None]] = []
    for n, (key, value) in enumerate(MESSAGES):
        kind = old_ids[int.from_bytes(value[1:5], "big")] if value else None
        if kind == "value" and n % 2:
            kind = "by-reference"  # every other envelope with the version that has a reference
        records.append(("dbserver1.transaction" if kind == "tx" else NS,
                        with_id(key, ids["key"]) if key else key, with_id(value, ids[kind]) if kind else value))
    records.append((NS, with_id(MESSAGES[1][0] or b"", ids["key"]), with_id(MESSAGES[1][1], unknown)))
    dump = tmp_path / "dump" / "topics.json"
    dump.parent.mkdir()
    dump.write_text(kcat_dump(records))

    export = tmp_path / "export"  # what `curl $REGISTRY/subjects/<s>/versions/<v>` gives, for each
    export.mkdir()
    for subject in schema_registry.request("GET", "/subjects"):
        versions = schema_registry.request("GET", f"/subjects/{subject}/versions")
        (export / f"{len(list(export.iterdir()))}.json").write_text(json.dumps(
            [schema_registry.request("GET", f"/subjects/{subject}/versions/{v}") for v in versions]))

    from_registry = lakecdc.apply(dump.parent, tmp_path / "from-kafka", format="debezium-avro",
                                  options={"schema.registry.url": url}, spark=spark)
    from_export = lakecdc.apply(dump.parent, tmp_path / "from-dump", format="debezium-avro",
                                options={"schemaDirectory": str(export)}, spark=spark)

    assert from_registry.ok and from_export.ok
    counts = {t.source_table: (t.events, t.inserted, t.updated, t.deleted, t.quarantined) for t in from_export.tables}
    assert counts and all(t[1] > 0 and t[4] == 0 for t in counts.values()), counts
    assert {t.source_table: (t.events, t.inserted, t.updated, t.deleted, t.quarantined)
            for t in from_registry.tables} == counts
    assert tables(spark, from_registry) == tables(spark, from_export)
    reasons = quarantined(spark, tmp_path)
    assert from_registry.quarantined_unrouted == from_export.quarantined_unrouted == 1, reasons
    [by_registry] = [r for r in reasons if r.startswith("from-kafka")]
    assert f"schema id {unknown} is not in the schema registry {url}" in by_registry
    assert "40403" in by_registry and "not found" in by_registry.lower()


def test_a_registry_that_does_not_answer_is_a_config_error_naming_it_and_the_id() -> None:
    """No registry listens at the URL: fetching an id is a ConfigError that names the URL (without
    the password written in it) and the id."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = SchemaRegistryClient(f"http://user:secret@127.0.0.1:{port}")
    with pytest.raises(ConfigError) as info:
        client.fetch([42])
    message = str(info.value)
    assert f"schema id 42 (schema.registry.url http://127.0.0.1:{port})" in message
    assert "secret" not in message


@pytest.fixture
def guarded_registry() -> Iterator[str]:
    """A loopback HTTP server answering ``/schemas/ids/5`` (an Avro record) to the basic-auth
    credentials ``reader:pw`` only (401 otherwise); its base URL."""
    expected = "Basic " + base64.b64encode(b"reader:pw").decode()
    schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.headers.get("Authorization") != expected:
                status, body = 401, {"error_code": 401, "message": "Unauthorized"}
            elif self.path == "/schemas/ids/5":
                status, body = 200, {"schema": schema}
            else:
                status, body = 404, {"error_code": 40403, "message": "Schema not found"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_basic_auth_user_info_and_url_credentials_are_sent(guarded_registry: str) -> None:
    """``basic.auth.user.info`` (or credentials in the URL) authenticate the requests: the schema
    comes back; without them the registry's 401 is a ConfigError naming it; an id it does not
    have is listed as missing with its answer."""
    with_info = SchemaRegistryClient(guarded_registry, "reader:pw").fetch([5, 6])
    assert with_info.schemas[5]["name"] == "R" and with_info.missing == {6: "404 40403 Schema not found"}
    in_url = guarded_registry.replace("http://", "http://reader:pw@")
    assert SchemaRegistryClient(in_url).fetch([5]).schemas[5]["fields"] == [{"name": "a", "type": "int"}]
    with pytest.raises(ConfigError, match="answered 401 401 Unauthorized"):
        SchemaRegistryClient(guarded_registry, "reader:wrong").fetch([5])
