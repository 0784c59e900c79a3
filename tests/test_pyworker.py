"""lakecdc.spark.pyworker: the Python worker daemon of the embedded session, whose zip importers read
their archive again only when it changed."""

from __future__ import annotations

import os
import sys
import time
import zipfile
import zipimport

import pytest
from pyspark.sql import functions as F

from lakecdc.spark import pyworker


def _archive(path, **modules: str) -> str:
    with zipfile.ZipFile(path, "w") as z:
        for name, body in modules.items():
            z.writestr(f"{name}.py", body)
    return str(path)


@pytest.fixture
def reads(monkeypatch):
    """Count the archive directory reads made through the patched ``invalidate_caches``."""
    seen: list[str] = []
    original = pyworker._reread

    def counting(self):
        seen.append(self.archive)
        original(self)

    monkeypatch.setattr(pyworker, "_reread", counting)
    monkeypatch.setattr(pyworker, "_stamps", {})
    return seen


def test_an_unchanged_archive_is_not_read_again(tmp_path, reads):
    path = _archive(tmp_path / "a.zip", one="X = 1\n")
    importer = zipimport.zipimporter(path)
    pyworker.invalidate_caches(importer)  # the first time: read (nothing stamped yet)
    assert reads == [path]
    for _ in range(3):
        pyworker.invalidate_caches(importer)
    assert reads == [path]
    assert importer.find_spec("one") is not None


def test_a_changed_archive_is_read_again_and_its_new_modules_found(tmp_path, reads):
    path = _archive(tmp_path / "b.zip", one="X = 1\n")
    importer = zipimport.zipimporter(path)
    pyworker.invalidate_caches(importer)
    assert importer.find_spec("two") is None
    time.sleep(0.01)
    _archive(tmp_path / "b.zip", one="X = 1\n", two="Y = 2\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new modification time, whatever the clock
    pyworker.invalidate_caches(importer)
    assert reads == [path, path]
    assert importer.find_spec("two") is not None


def test_a_vanished_archive_is_handled_as_python_does(tmp_path, reads):
    path = _archive(tmp_path / "c.zip", one="X = 1\n")
    importer = zipimport.zipimporter(path)
    pyworker.invalidate_caches(importer)
    os.remove(path)
    pyworker.invalidate_caches(importer)  # Python's own: the directory becomes empty
    assert reads == [path, path]
    assert importer.find_spec("one") is None


def test_install_patches_the_zip_importer_where_python_reads_archives_eagerly(monkeypatch):
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches)
    pyworker.install()
    if sys.version_info[:2] in ((3, 10), (3, 11)):  # (this project's CI: 3.11)
        assert pyworker.eager()
    assert (zipimport.zipimporter.invalidate_caches is pyworker.invalidate_caches) == pyworker.eager()


def test_the_embedded_session_forks_its_python_workers_from_this_daemon(spark):
    """Before PySpark 4.2 the embedded session's workers come from this daemon, patched; from 4.2
    (whose tasks no longer re-read the archives) from Spark's own."""
    from lakecdc.spark.session import tasks_reread_archives

    if not tasks_reread_archives():
        assert spark.conf.get("spark.python.daemon.module", None) in (None, "pyspark.daemon")
        return
    assert spark.conf.get("spark.python.daemon.module") == "lakecdc.spark.pyworker"

    @F.pandas_udf("string")
    def where(ids):
        import zipimport as z

        from lakecdc.spark import pyworker as w

        patched = z.zipimporter.invalidate_caches is w.invalidate_caches or not w.eager()
        return ids.map(lambda _: f"{patched} {sys.version_info[:2]}")

    rows = spark.range(0, 4, 1, 2).select(where("id").alias("w")).distinct().collect()
    assert [r.w for r in rows] == [f"True {sys.version_info[:2]}"]
