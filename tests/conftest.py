"""Shared fixtures: one small local Spark session for the whole test run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.connect_server import connect_server, connect_spark  # noqa: F401 - fixtures of a Spark Connect server

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / "shared"
# ../shared/samples, vendored (with their licence headers and MANIFEST) so a clone anywhere runs them
SAMPLES = Path(os.environ.get("LAKECDC_SAMPLES", FIXTURES / "samples"))


#: ``LAKECDC_TEST_SESSION=user`` runs the tests on a session built the way a notebook user builds
#: one (the plain builder: Spark's default settings, the zone of ``LAKECDC_TEST_TZ``, ANSI mode as
#: ``LAKECDC_TEST_ANSI`` says) instead of lakecdc's own: lakecdc must give the same tables on both.
USER_SESSION = os.environ.get("LAKECDC_TEST_SESSION", "").strip().lower() == "user"


def user_session(*, time_zone: str = "America/Los_Angeles", ansi: str = "true"):
    """A session as a notebook user builds one: nothing of lakecdc's settings, another time zone;
    when the tests run delta-spark, with Delta Lake configured the way its docs say (its jars,
    extension and catalog), from the cache setup filled (``python -m lakecdc.spark.jars``)."""
    from pyspark.sql import SparkSession

    from lakecdc.spark.jars import session_conf

    builder = (SparkSession.builder.master("local[2]")
               .config("spark.sql.session.timeZone", time_zone)
               .config("spark.sql.ansi.enabled", ansi))
    if "delta-spark" in ENGINES:  # (a user who runs Delta's engine configures it; one who does not, not)
        for key, value in session_conf().items():
            builder = builder.config(key, value)
    return builder.getOrCreate()


#: The Delta engines the behaviour suite runs on (``LAKECDC_TEST_ENGINES=delta-rs`` narrows it).
ENGINES = tuple(e.strip() for e in os.environ.get("LAKECDC_TEST_ENGINES", "delta-rs,delta-spark").split(",") if e.strip())


def pytest_addoption(parser):
    """``--update-goldens``: the golden-file tests write what the decoders give today instead of
    comparing (review the diff before committing it)."""
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite the decoders' golden .events files from today's output")


#: Markers of the long tests: their files run first, so that the two test processes (pytest-xdist,
#: a file at a time) end together instead of one of them starting a long file when the other is done.
LONG_MARKERS = ("slow", "both_engines", "services")


def pytest_collection_modifyitems(config, items):
    """Files holding a long test come first; the order inside a file and among files is kept."""
    long_files = {item.path for item in items if any(item.get_closest_marker(m) for m in LONG_MARKERS)}
    items.sort(key=lambda item: item.path not in long_files)


def pytest_generate_tests(metafunc):
    """Tests marked ``engines`` (or asking for ``delta_engine``) run once per Delta engine."""
    if metafunc.definition.get_closest_marker("engines") and "delta_engine" not in metafunc.fixturenames:
        metafunc.fixturenames.append("delta_engine")
    if "delta_engine" in metafunc.fixturenames:
        metafunc.parametrize("delta_engine", ENGINES, indirect=True)


@pytest.fixture(autouse=True)
def _engine_of_marked_tests(request):
    """A test marked ``engines`` runs with its engine even when it does not ask for ``delta_engine``
    (parametrizing alone does not set the fixture up); a case marked ``one_engine`` runs on
    delta-rs only."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or "delta_engine" not in callspec.params:
        return
    once = request.node.get_closest_marker("one_engine")
    if once is not None and callspec.params["delta_engine"] != "delta-rs":
        pytest.skip(f"run on delta-rs only: {once.args[0]}")
    if "delta_engine" not in request.fixturenames:
        request.getfixturevalue("delta_engine")


@pytest.fixture
def delta_engine(request, monkeypatch, spark):
    """The engine this run of a behaviour test uses: every ``lakecdc`` entry point (API, CLI
    children) picks it through ``LAKECDC_ENGINE``. Skips delta-spark where Delta's classes are not
    in the session (setup could not reach Maven Central)."""
    from lakecdc.spark.compat import delta_spark_available

    name = request.param
    if name == "delta-spark" and not delta_spark_available(spark):
        from lakecdc.spark.jars import status

        if os.environ.get("LAKECDC_REQUIRE_ENGINES"):  # CI: both engines or red
            pytest.fail(status())
        pytest.skip(status())
    monkeypatch.setenv("LAKECDC_ENGINE", name)
    return name


@pytest.fixture(scope="session")
def spark():
    """A local Spark session sized for tests (2 threads, 2 shuffle partitions), or a user's
    (:data:`USER_SESSION`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if USER_SESSION:
        yield user_session(time_zone=os.environ.get("LAKECDC_TEST_TZ", "America/Los_Angeles"),
                           ansi=os.environ.get("LAKECDC_TEST_ANSI", "true"))
        return
    from lakecdc.spark.session import get_spark

    session = get_spark(conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                              "spark.databricks.delta.snapshotPartitions": "2", "spark.driver.memory": "2g"})
    yield session


def strip_license_header(text: str) -> str:
    """The samples from public projects start with a /* ... */ licence block: drop it."""
    stripped = text.lstrip()
    if stripped.startswith("/*"):
        end = stripped.index("*/") + 2
        return stripped[end:].lstrip("\n")
    return text


@pytest.fixture
def sample(tmp_path):
    """Copy a file of ../shared/samples into tmp_path without its licence header."""

    def copy(relative: str, name: str | None = None) -> Path:
        src = SAMPLES / relative
        if not src.exists():
            pytest.skip(f"shared sample {src} not present")
        dest = tmp_path / "landing" / (name or src.name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(strip_license_header(src.read_text()))
        return dest

    return copy
