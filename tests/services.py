"""Real services on loopback for the Kafka tests: a broker, Kafka Connect with Debezium, PostgreSQL
and a schema registry, started by ``scripts/services/*.sh``.

Each fixture is session-scoped and lazy: a service starts when the first test asks for it and all
of them stop when the session ends (a finalizer, and an ``atexit`` hook should the session die
before it runs). They live in one temporary directory, removed at the end. A service that cannot
start (no Java, no Maven Central, no PostgreSQL programs...) skips the tests that need it, with
the script's reason, unless ``LAKECDC_REQUIRE_SERVICES`` is set (CI): then it fails them.

A test module loads the fixtures as a plugin::

    pytest_plugins = ["tests.services"]
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "services"
REQUIRE = "LAKECDC_REQUIRE_SERVICES"
START_TIMEOUT = 180  # seconds for one script's start, jar downloads included


class ServiceError(RuntimeError):
    """A service script that failed; the message holds its output (the service's log tail)."""


@dataclass(frozen=True)
class KafkaBroker:
    """A single-node Kafka broker: ``bootstrap`` is its HOST:PORT."""

    bootstrap: str


@dataclass(frozen=True)
class KafkaConnect:
    """A Kafka Connect worker with Debezium's PostgreSQL connector: ``rest`` is its REST API's base
    URL, ``bootstrap`` the broker it writes to."""

    rest: str
    bootstrap: str

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of a REST call; an HTTP error raises :class:`ServiceError` with the
        worker's message."""
        return _http_json(method, self.rest + path, body)

    def create_connector(self, name: str, config: dict[str, str], timeout: float = 60.0) -> None:
        """Creates the connector ``name`` and waits until it and its tasks run (a failed task
        raises :class:`ServiceError` with its trace)."""
        self.request("POST", "/connectors", {"name": name, "config": config})
        deadline = time.monotonic() + timeout
        status: Any = None
        while time.monotonic() < deadline:
            try:
                status = self.request("GET", f"/connectors/{name}/status")
            except ServiceError:
                status = None  # not known yet: the worker is still taking the new configuration
            if status:
                states = [status["connector"]["state"]] + [t["state"] for t in status["tasks"]]
                if "FAILED" in states:
                    traces = [t.get("trace", "") for t in [status["connector"], *status["tasks"]]]
                    raise ServiceError(f"connector {name} failed: " + "\n".join(filter(None, traces)))
                if status["tasks"] and set(states) == {"RUNNING"}:
                    return
            time.sleep(0.5)
        raise ServiceError(f"connector {name} was not running after {timeout:.0f}s: {status}")

    def delete_connector(self, name: str) -> None:
        """Deletes the connector ``name``."""
        self.request("DELETE", f"/connectors/{name}")


@dataclass(frozen=True)
class Postgres:
    """A PostgreSQL server set up for Debezium (``wal_level=logical``): the database ``database``
    belongs to ``user``, who may replicate; ``dsn`` is a libpq URL."""

    host: str
    port: int
    database: str
    user: str
    password: str
    dsn: str

    def sql(self, statements: str) -> str:
        """Runs SQL statements as ``user`` with psql and returns the rows it prints (unaligned,
        ``|`` between values); an error raises :class:`ServiceError` with psql's message."""
        psql = shutil.which("psql") or str(_postgres_bin() / "psql")
        done = subprocess.run(
            [psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.host, "-p", str(self.port),
             "-U", self.user, "-d", self.database, "-c", statements],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "PGPASSWORD": self.password},
        )
        if done.returncode:
            raise ServiceError(f"psql on {self.dsn} failed: {done.stderr.strip()}\nSQL: {statements}")
        return done.stdout


@dataclass(frozen=True)
class SchemaRegistry:
    """A schema registry: ``url`` is the base URL of its Confluent-compatible REST API
    (``{url}/subjects``, ``{url}/schemas/ids/N``)."""

    url: str

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of a REST call under ``url``."""
        return _http_json(method, self.url + path, body, "application/vnd.schemaregistry.v1+json")


def debezium_postgres_config(pg: Postgres, prefix: str, schema: str) -> dict[str, str]:
    """Debezium's PostgreSQL connector for the tables of ``schema``, publishing to ``prefix.*``
    (its choices: tests/test_debezium_postgres.py's docstring)."""
    json_converter = "org.apache.kafka.connect.json.JsonConverter"
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": pg.host, "database.port": str(pg.port), "database.user": pg.user,
        "database.password": pg.password, "database.dbname": pg.database,
        "topic.prefix": prefix,
        "plugin.name": "pgoutput", "slot.name": prefix, "publication.name": prefix,
        "publication.autocreate.mode": "filtered", "schema.include.list": schema,
        "snapshot.mode": "initial",
        "skipped.operations": "none",
        "decimal.handling.mode": "precise",
        "time.precision.mode": "adaptive_time_microseconds",
        "binary.handling.mode": "bytes",
        "tombstones.on.delete": "true",
        "key.converter": json_converter, "key.converter.schemas.enable": "true",
        "value.converter": json_converter, "value.converter.schemas.enable": "true",
    }


def _postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    return found[-1] if found else Path("/usr/bin")


def _http_json(method: str, url: str, body: Any = None, content_type: str = "application/json") -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read().decode()
    except urllib.error.HTTPError as e:
        raise ServiceError(f"{method} {url} answered {e.code}: {e.read().decode(errors='replace')}") from None
    return json.loads(text) if text.strip() else None


class Services:
    """The services of one test session, in one temporary directory."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        self.started: list[str] = []
        self.failed: dict[str, str] = {}

    def start(self, name: str) -> dict[str, str]:
        """Starts a service with ``scripts/services/<name>.sh start`` (once) and returns its state
        (key=value pairs: the addresses it serves); raises :class:`ServiceError` when it fails."""
        if name in self.failed:
            raise ServiceError(self.failed[name])
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="lakecdc-services-"))
        if name not in self.started:
            try:
                self._run(name, "start", timeout=START_TIMEOUT)
            except ServiceError as e:
                self.failed[name] = str(e)
                raise
            self.started.append(name)
        state = (self.dir / name / "state").read_text()
        return dict(line.split("=", 1) for line in state.splitlines() if "=" in line)

    def stop_all(self) -> None:
        """Stops every started service, last started first, and removes the directory."""
        while self.started:
            name = self.started.pop()
            try:
                self._run(name, "stop", timeout=60)
            except ServiceError as e:
                print(f"lakecdc tests: {e}", file=sys.stderr)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _run(self, name: str, command: str, timeout: float) -> None:
        assert self.dir is not None
        script = SCRIPTS / f"{name}.sh"
        env = {**os.environ, "LAKECDC_SERVICES_DIR": str(self.dir), "PYTHON": sys.executable}
        try:
            done = subprocess.run(["bash", str(script), command], capture_output=True, text=True,
                                  timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise ServiceError(f"{script.name} {command} did not finish in {timeout:.0f}s: "
                               f"{(e.stderr or b'')[-3000:]!r}") from None
        if done.returncode:
            raise ServiceError(f"{script.name} {command} failed ({done.returncode}):\n{done.stderr[-4000:]}")


SERVICES = Services()
atexit.register(SERVICES.stop_all)


def _start(name: str) -> dict[str, str]:
    """A service's state, or the test skipped (failed when LAKECDC_REQUIRE_SERVICES is set)."""
    try:
        return SERVICES.start(name)
    except ServiceError as e:
        if os.environ.get(REQUIRE):
            pytest.fail(f"{name} did not start ({REQUIRE} is set): {e}", pytrace=False)
        pytest.skip(f"{name} could not start here (set {REQUIRE}=1 to make this a failure): {e}")


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """The session's services; all those started are stopped when the session ends."""
    try:
        yield SERVICES
    finally:
        SERVICES.stop_all()


@pytest.fixture(scope="session")
def kafka_broker(services: Services) -> KafkaBroker:
    """A single-node Kafka broker (KRaft) on 127.0.0.1."""
    return KafkaBroker(bootstrap=_start("kafka")["bootstrap"])


@pytest.fixture(scope="session")
def kafka_bootstrap(request: pytest.FixtureRequest) -> str:
    """A broker's ``HOST:PORT``: ``LAKECDC_TEST_KAFKA`` (one already running), else the broker
    tests/services.py starts."""
    from lakecdc.spark.jars import cached_jars, spark_version

    if not any("spark-sql-kafka" in jar for jar in cached_jars() or []):
        pytest.skip(f"Spark's Kafka connector for PySpark {spark_version()} is not cached (Maven Central has "
                    "no release of it for this Spark, or setup.sh did not run)")
    return os.environ.get("LAKECDC_TEST_KAFKA") or request.getfixturevalue("kafka_broker").bootstrap


@pytest.fixture(scope="session")
def kafka_connect(kafka_broker: KafkaBroker, services: Services) -> KafkaConnect:
    """A Kafka Connect worker on :func:`kafka_broker`, with Debezium's PostgreSQL connector."""
    return KafkaConnect(rest=_start("connect")["rest"], bootstrap=kafka_broker.bootstrap)


@pytest.fixture(scope="session")
def postgres(services: Services) -> Postgres:
    """A PostgreSQL server on 127.0.0.1 ready for Debezium (logical WAL, a replication user)."""
    state = _start("postgres")
    return Postgres(host=state["host"], port=int(state["port"]), database=state["database"],
                    user=state["user"], password=state["password"], dsn=state["dsn"])


REGISTRY_INSTALL_TIMEOUT = 900  # seconds for karapace's first install (its requirements from PyPI)


def _install_registry() -> None:
    """Installs the registry once (``registry.sh install``), with a longer time-out than a start;
    skips or fails the test as :func:`_start` does when it cannot."""
    try:
        done = subprocess.run(["bash", str(SCRIPTS / "registry.sh"), "install"], capture_output=True, text=True,
                              timeout=REGISTRY_INSTALL_TIMEOUT, stdin=subprocess.DEVNULL)
        failure = f"registry.sh install failed ({done.returncode}):\n{done.stderr[-4000:]}" if done.returncode else ""
    except subprocess.TimeoutExpired:
        failure = f"registry.sh install did not finish in {REGISTRY_INSTALL_TIMEOUT}s"
    if failure:
        SERVICES.failed["registry"] = failure
        _start("registry")  # skips, or fails under LAKECDC_REQUIRE_SERVICES, with that reason


@pytest.fixture(scope="session")
def schema_registry(kafka_broker: KafkaBroker, services: Services) -> SchemaRegistry:
    """A schema registry serving the Confluent-compatible REST API on 127.0.0.1 (karapace, keeping
    its schemas in :func:`kafka_broker`), started by ``scripts/services/registry.sh``."""
    if "registry" not in SERVICES.started:
        _install_registry()
    return SchemaRegistry(url=_start("registry")["url"])
