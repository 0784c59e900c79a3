"""The Python worker daemon of lakecdc's embedded Spark session (``spark.python.daemon.module``).

Spark's Python worker calls :func:`importlib.invalidate_caches` at the start of every task
(``pyspark.worker_util.setup_spark_files``). Under Python 3.10 and 3.11 that makes every zip
importer read its archive's whole directory again, and a worker has many: Spark puts
``pyspark.zip`` and its ``spark-core`` jar (15 MB, thousands of entries) on the workers'
``PYTHONPATH``, and every package imported from a zip adds one more importer of it. Measured on
2 cores: 0.25-1 s of CPU per task before any row is touched. Decoding 300,000 Debezium JSON lines
(a pandas UDF over two tasks) in a warm session: the workers' CPU 2.4 -> 0.35 s a run, the
decode 7.6 -> 6.7 s (bench/RESULTS.md, stop 26).

Here an importer reads its archive again only when the archive changed on disk (size or
modification time), which is when Python's own reload is needed; everything else is Spark's
daemon (:func:`pyspark.daemon.manager`) unchanged. The patch is made once in the daemon, before
it forks its workers, so every worker inherits it (and lakecdc's modules, imported with it).
"""

from __future__ import annotations

import os
import zipimport

_reread = zipimport.zipimporter.invalidate_caches
#: archive path -> (size, mtime in ns) when its directory was last read through this module
_stamps: dict[str, tuple[int, int]] = {}


def _stamp(archive: str) -> tuple[int, int] | None:
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def invalidate_caches(self: zipimport.zipimporter) -> None:
    """:meth:`zipimport.zipimporter.invalidate_caches`, skipped for an archive unchanged since
    it was last read (its directory is taken from the module's cache)."""
    stamp = _stamp(self.archive)
    known = zipimport._zip_directory_cache.get(self.archive)  # type: ignore[attr-defined]
    if stamp is not None and known is not None and _stamps.get(self.archive) == stamp:
        self._files = known  # type: ignore[attr-defined]
        return
    _reread(self)
    if stamp is not None:
        _stamps[self.archive] = stamp


def eager() -> bool:
    """Whether this Python's zip importers read their archive in ``invalidate_caches`` (3.10 and
    3.11; later versions only drop the cached directory, read again once when next needed)."""
    return hasattr(zipimport.zipimporter, "invalidate_caches") and not hasattr(zipimport.zipimporter, "_get_files")


def install() -> None:
    """Patch :class:`zipimport.zipimporter` in this process (and the processes it forks), where
    its ``invalidate_caches`` is :func:`eager`."""
    if eager():
        zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]


if __name__ == "__main__":
    # (patched from the module imported by its name, not from __main__: one copy of the state)
    from lakecdc.spark.pyworker import install as _install

    _install()
    from pyspark.daemon import manager

    manager()
