"""A class-data-sharing archive of Spark's classes, so that a new embedded JVM starts sooner.

A lakecdc process that starts its own Spark (the CLI, a scheduled job, a test) spends seconds
loading and verifying thousands of classes from Spark's jars before it decodes a byte, and again
for each class a first query needs (Catalyst, the SQL parser, Janino, the JSON reader). Java 17
can map such classes from an archive written by an earlier JVM instead
(``-XX:ArchiveClassesAtExit`` to write it, ``-XX:SharedArchiveFile`` to use it; JEP 350). The
bundled sample in a new process: 39-40 s -> 32-38 s, most of it Spark's start-up (bench/RESULTS.md,
"Stop 27").

* :func:`build` writes the archive once, after installation (``scripts/setup.sh`` runs
  ``python -m lakecdc.spark.classarchive``): a JVM started with the writing option runs a small
  representative batch (decode, fold, merge: :mod:`lakecdc.run.warmup`) and exits.
* :func:`java_options` gives the options :func:`lakecdc.spark.session.get_spark` adds to the embedded
  session's JVM when the archive exists. The JVM checks the archive itself (same Java build, same
  jars): one that does not fit is ignored and the JVM starts as it would without it; its
  messages about that are silenced. A session already running (notebooks, Databricks) is never
  touched.

Where: ``$LAKECDC_CLASS_ARCHIVE`` when set (``off`` turns the archive off), else
``$XDG_CACHE_HOME/lakecdc`` (default ``~/.cache/lakecdc``), one file per Java and pyspark
installation (its path, its jars' sizes and times: a reinstalled environment gets a new one; the
newest :data:`KEEP` are kept). About 150 MB each. An archive at a place given by the variable is
the user's to rebuild (``--force``) after Spark or Java change.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from lakecdc.spark.conf import JVM_OPTIONS

ENV = "LAKECDC_CLASS_ARCHIVE"
#: The JVM's messages about archives (one it cannot use: another Java build, other jars; the
#: classes it skips while writing one), which it would print on standard output.
_SILENT = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: The program that runs the representative batch in the JVM writing the archive (a module run with
#: ``python -m``: it runs the whole pipeline, which this module, below the session, cannot import).
RECORDER = "lakecdc.run.warmup"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def archive_path() -> Path | None:
    """Where the archive of this Java and pyspark installation is kept (None: turned off, or no Java)."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "0", "off", "false", "no") else Path(chosen)
    java = _java()
    if java is None:
        return None
    import pyspark

    st = os.stat(java)
    parts = [java, str(st.st_size), str(st.st_mtime_ns), pyspark.__version__]
    # Spark's jars as they are on disk: a reinstalled environment at the same place has new files,
    # which the JVM would refuse the old archive for (it checks each jar's size and time)
    jars = os.path.realpath(os.path.join(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__), "jars"))
    parts.append(jars)
    listing: Any = os.scandir(jars) if os.path.isdir(jars) else contextlib.nullcontext([])
    with listing as found:
        for entry in sorted(found, key=lambda e: e.name):
            jst = entry.stat()
            parts.append(f"{entry.name}:{jst.st_size}:{jst.st_mtime_ns}")
    key = "\0".join(parts)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lakecdc"
    return cache / f"spark-classes-{hashlib.sha1(key.encode()).hexdigest()[:16]}.jsa"


def java_options() -> str:
    """JVM options that use the archive when it exists (else the empty string)."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {_SILENT}"


def recording_options(path: Path) -> str:
    """JVM options of a session whose JVM writes the archive to ``path`` as it exits."""
    return f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={path} {_SILENT}"


#: Archives kept in the cache directory (one per Java and pyspark installation, e.g. per virtual
#: environment): the oldest beyond these are removed when a new one is written.
KEEP = 4


def _prune(newest: Path) -> None:
    if os.environ.get(ENV):  # a place the user chose: theirs to manage
        return
    others = sorted((p for p in newest.parent.glob("spark-classes-*.jsa") if p != newest),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in others[KEEP - 1:]:
        old.unlink(missing_ok=True)


def build(path: Path | None = None, *, quiet: bool = False) -> Path | None:
    """Write the archive (in a child process, as its JVM exits); return its path, or None when
    it could not be written (lakecdc works the same without it, only starts slower)."""
    import subprocess

    path = path or archive_path()
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    part.unlink(missing_ok=True)
    started = time.monotonic()
    env = {**os.environ, ENV: "off"}  # the recording JVM must not map an older archive
    done = subprocess.run([sys.executable, "-m", RECORDER, str(part)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0 or not part.is_file() or part.stat().st_size == 0:
        part.unlink(missing_ok=True)
        if not quiet:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            print("lakecdc: no Spark class archive written (Spark starts as usual, only slower):",
                  *tail, sep="\n  ", file=sys.stderr)
        return None
    os.replace(part, path)
    _prune(path)
    if not quiet:
        mb = path.stat().st_size / 2**20
        print(f"lakecdc: Spark class archive written: {path} ({mb:.0f} MB, {time.monotonic() - started:.0f} s)")
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m lakecdc.spark.classarchive [--force]``: write the archive unless it is there already."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--force"]):
        print("usage: python -m lakecdc.spark.classarchive [--force]   (writes the Spark class archive)",
              file=sys.stderr)
        return 2
    path = archive_path()
    if path is None:
        print(f"lakecdc: no Spark class archive (turned off by {ENV}, or no Java found)")
        return 0
    if path.is_file() and not args:
        print(f"lakecdc: Spark class archive already there: {path}")
        return 0
    return 0 if build(path) is not None else 1


if __name__ == "__main__":
    sys.exit(main())
