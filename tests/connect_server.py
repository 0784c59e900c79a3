"""A Spark Connect server for the tests, started once per test session, and a client session on it.

The server is ``scripts/spark_connect_server.py``'s: PySpark's own Spark serving Spark Connect on
127.0.0.1, Delta configured from the jar cache, a session time zone west of UTC, Python workers
that import this checkout. It is stopped (its whole process group) when the test session ends.

A Spark Connect client switches the whole process to Connect mode (PySpark's
``SPARK_CONNECT_MODE_ENABLED``: ``pyspark.sql.functions`` then builds Connect columns); the client
fixture is module-scoped and puts the process back in classic mode when its module is done, so the
test files after it in the same process keep their classic session.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "spark_connect_server.py"
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


def _launcher():
    spec = importlib.util.spec_from_file_location("lakecdc_spark_connect_server", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def connect_server() -> Iterator[str]:
    """The ``sc://`` URL of a local Spark Connect server (skips when Java or PySpark's Connect
    client packages are missing; fails with the server's log when it does not start)."""
    # (not pyspark.sql.connect.utils.check_dependencies: its signature changed in 4.3, where it
    # also ends the process when the packages are missing and the program has no main file)
    missing = [name for name in ("pandas", "pyarrow", "grpc", "grpc_status", "google.rpc")
               if importlib.util.find_spec(name.split(".")[0]) is None
               or (name == "google.rpc" and importlib.util.find_spec(name) is None)]
    if missing:
        pytest.skip(f"Spark Connect's client packages are not installed (pip install 'pyspark[connect]'): "
                    f"no {', '.join(missing)}")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed: no Spark Connect server")
    launcher = _launcher()
    workdir = Path(tempfile.mkdtemp(prefix="lakecdc-connect-"))
    try:
        server = launcher.start(workdir=workdir)
    except launcher.ServerError as exc:
        pytest.fail(f"could not start a local Spark Connect server: {exc}", pytrace=False)
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def connect_spark(connect_server: str):
    """A Spark Connect session on :func:`connect_server`; the process is back in classic mode after
    the module's tests."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    before = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    session = RemoteSparkSession.builder.remote(connect_server).create()
    try:
        yield session
    finally:
        session.stop()
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before
