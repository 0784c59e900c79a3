"""The class-data-sharing archive of Spark's classes (lakecdc/spark/classarchive.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakecdc.spark import classarchive as ca
from lakecdc.spark.conf import JVM_OPTIONS

_QUERY = (
    "from lakecdc.spark.session import get_spark; s = get_spark(); "
    "print('driver options:', s.sparkContext.getConf().get('spark.driver.extraJavaOptions')); "
    "print('count:', s.range(7).count())"
)


def test_turned_off_or_absent_archive_adds_no_option(tmp_path, monkeypatch):
    for off in ("off", "0", "", "no"):
        monkeypatch.setenv(ca.ENV, off)
        assert ca.archive_path() is None
        assert ca.java_options() == ""
    monkeypatch.setenv(ca.ENV, str(tmp_path / "missing.jsa"))
    assert ca.java_options() == ""
    (tmp_path / "missing.jsa").write_bytes(b"x")
    options = ca.java_options()
    assert f"-XX:SharedArchiveFile={tmp_path / 'missing.jsa'}" in options
    # an archive the JVM cannot use must not make it fail nor speak
    assert "-Xshare:auto" in options and "-Xlog:cds=off" in options and "-Xlog:cds+dynamic=off" in options


def test_default_place_is_the_user_cache_one_file_per_installation(tmp_path, monkeypatch):
    monkeypatch.delenv(ca.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = ca.archive_path()
    assert path is not None and path.parent == tmp_path / "lakecdc" and path.suffix == ".jsa"
    assert ca.archive_path() == path  # stable for the same Java and pyspark


def test_main_refuses_unknown_arguments_and_skips_a_built_archive(tmp_path, monkeypatch, capsys):
    assert ca.main(["--bogus"]) == 2
    monkeypatch.setenv(ca.ENV, str(tmp_path / "a.jsa"))
    (tmp_path / "a.jsa").write_bytes(b"x")
    assert ca.main([]) == 0
    assert "already there" in capsys.readouterr().out
    monkeypatch.setenv(ca.ENV, "off")
    assert ca.main([]) == 0


def _run(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _QUERY], env={**os.environ, **env}, cwd=cwd,
                          capture_output=True, text=True, check=False)


def test_a_new_session_maps_spark_classes_from_the_archive(tmp_path):
    """The archive setup wrote (or one written now) is used: Spark's classes come from it."""
    path = ca.archive_path()
    if path is None:
        pytest.skip(f"the class archive is turned off ({ca.ENV})")
    if not path.is_file():
        assert ca.build(path, quiet=True) == path
    log = tmp_path / "classes.log"
    done = _run({ca.ENV: str(path), "JDK_JAVA_OPTIONS": f"-Xlog:class+load=info:file={log}"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "count: 7" in done.stdout
    assert f"-XX:SharedArchiveFile={path}" in done.stdout and JVM_OPTIONS in done.stdout
    loaded = log.read_text()
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in loaded


def test_an_archive_the_jvm_cannot_use_is_ignored_quietly(tmp_path, monkeypatch):
    """The JVM options get_spark adds, given an archive that does not fit (a damaged file; a real
    archive written for Spark's class path, given to a JVM without it): the JVM starts, silently."""
    java = ca._java()
    real = ca.archive_path()
    if java is None or real is None:
        pytest.skip("no java, or the class archive is turned off")
    if not real.is_file():
        assert ca.build(real, quiet=True) == real
    bad = tmp_path / "bad.jsa"
    bad.write_bytes(os.urandom(4096))
    # a class path that is not Spark's (and none inherited from the environment)
    env = {k: v for k, v in os.environ.items() if k not in ("CLASSPATH", "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")}
    other = ["-cp", str(tmp_path)]
    for archive in (bad, real):
        monkeypatch.setenv(ca.ENV, str(archive))
        options = f"{JVM_OPTIONS} {ca.java_options()}".split()
        assert f"-XX:SharedArchiveFile={archive}" in options
        done = subprocess.run([java, *options, *other, "-version"], env=env, capture_output=True, text=True,
                              check=False)
        said = (done.stdout + done.stderr).lower()  # (the JVM's log goes to standard output)
        assert done.returncode == 0, said
        assert "openjdk version" in said or "java version" in said
        assert "archive" not in said and "cds" not in said, said
    # without the quieting options the JVM does complain of the real one: the check above can fail
    loud = subprocess.run([java, f"-XX:SharedArchiveFile={real}", "-Xshare:auto", *other, "-version"],
                          env=env, capture_output=True, text=True, check=False)
    assert loud.returncode == 0 and "archive" in (loud.stdout + loud.stderr).lower(), loud.stdout + loud.stderr


def test_writing_an_archive_keeps_only_the_newest_few_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(ca.ENV, raising=False)
    olds = []
    for i in range(ca.KEEP + 2):
        old = tmp_path / f"spark-classes-{i:016x}.jsa"
        old.write_bytes(b"x")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
        olds.append(old)
    (tmp_path / "other.txt").write_text("not ours")
    newest = tmp_path / "spark-classes-ffffffffffffffff.jsa"
    newest.write_bytes(b"x")
    ca._prune(newest)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [newest.name, "other.txt", *(p.name for p in olds[-(ca.KEEP - 1):])])
