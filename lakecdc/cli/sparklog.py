"""Spark's own output kept off the terminal: the JVM's start-up lines (``Using Spark's default
log4j profile``, ``WARN NativeCodeLoader``, ``Setting default log level``, Ivy's resolution of
packages), its log and its Python workers' stderr.

Spark's JVM and the workers it forks write to the file descriptor 2 they inherit from the
``lakecdc`` process. While a command runs, descriptor 2 points at a log file and Python's
``sys.stderr`` at a copy of the real one, so lakecdc's own progress lines and errors still reach
the terminal and Spark's lines go to the log. ``--verbose`` leaves descriptor 2 alone (Spark's
lines then come as they always did). A command that fails keeps the log and says where it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass
class SparkLog:
    """Where Spark's output went (None: to the terminal), and whether to keep the file."""

    path: Path | None = None
    keep: bool = False

    def note(self) -> str | None:
        """A line pointing at the log, when it holds something worth a look."""
        if self.path is None or not self.path.exists() or self.path.stat().st_size == 0:
            return None
        return f"lakecdc: Spark's own output (JVM, log4j, Python workers) is in {self.path}; --verbose shows it as it comes"


@contextlib.contextmanager
def spark_output_hidden(verbose: bool) -> Iterator[SparkLog]:
    """While the block runs, what child processes (Spark's JVM) write on stderr goes to a log
    file; lakecdc's own ``sys.stderr`` still reaches the terminal. Nothing changes when
    ``verbose``, or when ``sys.stderr`` is not the process's own (a test capturing it). The log is
    deleted afterwards unless :attr:`SparkLog.keep` was set."""
    real = sys.__stderr__
    if verbose or real is None or sys.stderr is not real or not _is_fd2(real):
        yield SparkLog()
        return
    fd, name = tempfile.mkstemp(prefix="lakecdc-spark-", suffix=".log")
    path = Path(name)
    log = SparkLog(path)
    real.flush()
    saved = os.dup(2)
    own = os.fdopen(saved, "w", buffering=1, encoding=real.encoding, errors="backslashreplace")
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = own
    try:
        yield log
    finally:
        own.flush()
        os.dup2(own.fileno(), 2)
        sys.stderr = real
        own.close()
        if not log.keep:
            with contextlib.suppress(OSError):
                path.unlink()  # the JVM may still hold it open: its later lines vanish with it


def _is_fd2(stream: object) -> bool:
    try:
        return stream.fileno() == 2  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False
