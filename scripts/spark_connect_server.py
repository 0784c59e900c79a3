"""A local Spark Connect server for lakecdc's tests (and for trying lakecdc over Spark Connect).

The server is PySpark's own Spark, started with ``bin/spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer`` (the wheel ships Spark Connect's jar but
not ``sbin/start-connect-server.sh``), listening on 127.0.0.1 only. It gets what a user's server
needs to run lakecdc: Delta Lake's jars, extension and catalog (from the cache ``python -m
lakecdc.spark.jars`` filled, when there is one), and Python workers that import this checkout's lakecdc
(``PYTHONPATH``) with the interpreter running this script (pyarrow, fastavro, msgspec). Its session
time zone is not UTC, as a user's server's would not be.

Usage::

    python scripts/spark_connect_server.py start [--port N] [--dir DIR]   # prints the sc:// URL
    python scripts/spark_connect_server.py stop [--dir DIR]

``start`` returns once the port answers, leaving the server running (its pid in ``DIR/server.pid``,
its log in ``DIR/server.log``); ``stop`` ends its process group. From Python,
:func:`start` / :meth:`ConnectServer.stop` do the same.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: How long ``start`` waits for the port to answer.
START_TIMEOUT = 180.0
#: The server's session time zone: not UTC, as a user's server's would not be.
TIME_ZONE = "America/Los_Angeles"
DEFAULT_DIR = Path(tempfile.gettempdir()) / "lakecdc-spark-connect"


class ServerError(RuntimeError):
    """The server could not start (or stop); the message ends with its log's last lines."""


@dataclass
class ConnectServer:
    """A started server: its ``sc://`` URL, process and log file."""

    url: str
    port: int
    process: subprocess.Popen | None
    pid: int
    log: Path
    pid_file: Path

    def stop(self, timeout: float = 30.0) -> None:
        """End the server's process group (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        _kill_group(self.pid, timeout, self.process)
        with contextlib.suppress(OSError):
            self.pid_file.unlink()


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """The installed PySpark's directory (its ``bin/`` and ``jars/`` are a Spark distribution)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def connect_jar(home: Path) -> Path:
    """Spark Connect's server jar in PySpark's ``jars/``."""
    jars = sorted((home / "jars").glob("spark-connect_*.jar"))
    if not jars:
        raise ServerError(f"no spark-connect_*.jar in {home / 'jars'}: this PySpark cannot serve Spark Connect")
    return jars[0]


def server_conf(port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's Spark settings: bound to 127.0.0.1:``port``, small, Delta configured when its
    jars are cached, workers running this interpreter on this checkout."""
    from lakecdc.spark.jars import session_conf

    conf = {
        "spark.master": "local[2]",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "2g",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": TIME_ZONE,
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": _python_path(),
        **session_conf(),
    }
    conf.update(extra or {})
    return conf


def _python_path() -> str:
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


def start(port: int | None = None, *, workdir: Path | None = None, conf: dict[str, str] | None = None,
          timeout: float = START_TIMEOUT) -> ConnectServer:
    """Start a server and return once its port answers (:class:`ServerError` with the log's tail
    when it exits or does not answer within ``timeout`` seconds)."""
    home = spark_home()
    port = port or free_port()
    workdir = Path(workdir or DEFAULT_DIR)
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "server.log"
    pid_file = workdir / "server.pid"
    settings = server_conf(port, conf)
    cmd = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "lakecdc Spark Connect"]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd.append(str(connect_jar(home)))
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": _python_path(),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env.pop("SPARK_REMOTE", None)
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, cwd=str(workdir), start_new_session=True)
    pid_file.write_text(str(process.pid))
    server = ConnectServer(f"sc://127.0.0.1:{port}", port, process, process.pid, log, pid_file)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            server.stop()
            raise ServerError(f"the Spark Connect server exited with code {process.returncode}; "
                              f"{log}:\n{_tail(log)}")
        if _answers(port) and b"Spark Connect server started" in log.read_bytes():
            return server
        time.sleep(0.5)
    server.stop()
    raise ServerError(f"the Spark Connect server did not answer on port {port} within {timeout:.0f} s; "
                      f"{log}:\n{_tail(log)}")


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _kill_group(pid: int, timeout: float, process: subprocess.Popen | None = None) -> None:
    """SIGTERM to the process group ``pid`` leads (the server and its Python workers), SIGKILL
    after ``timeout`` seconds if it is still there."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                break
        else:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)


def stop(workdir: Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the server whose pid file is in ``workdir``; False when there is none."""
    pid_file = Path(workdir or DEFAULT_DIR) / "server.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return False
    _kill_group(pid, timeout)
    with contextlib.suppress(OSError):
        pid_file.unlink()
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A local Spark Connect server for lakecdc.")
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--dir", type=Path, default=None, help=f"pid file and log (default {DEFAULT_DIR})")
    args = parser.parse_args(argv)
    if args.action == "stop":
        if not stop(args.dir):
            print("no server running (no pid file)", file=sys.stderr)
            return 1
        return 0
    try:
        server = start(args.port, workdir=args.dir)
    except ServerError as exc:
        print(exc, file=sys.stderr)
        return 1
    server.process = None  # keep it running after this script exits
    print(server.url)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
