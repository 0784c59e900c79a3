"""Delta Lake's, Kafka's and Avro's JVM packages for the Spark session lakecdc starts itself.

``python -m lakecdc.spark.jars`` (run by ``scripts/setup.sh``) resolves, once, the Maven packages that
match the installed PySpark and caches them under ``~/.cache/lakecdc/ivy`` (``LAKECDC_CACHE``
moves it): Delta Lake's ``delta-spark`` built for that Spark minor, and Spark's own
``spark-sql-kafka-0-10`` and ``spark-avro`` connectors of that Spark version (or the newest
earlier patch release of the same minor the repository serves). It writes the list of resolved
jar files beside them, and :func:`session_conf` hands that list to every embedded session as
``spark.jars``: later sessions start from the cache and never touch the network.

Nothing is downloaded at run time. With no cached list (no network when setup ran, or setup not
run), the embedded session starts without them, :func:`status` says so in one line, and lakecdc
runs with the delta-rs engine. A session you build yourself is never changed: configure it with
``spark.jars.packages`` (or your platform's libraries), :func:`packages` names the coordinates.

Which Delta release goes with which Spark (Delta's own compatibility table; the artifact name
carries the Spark minor since Delta 4.1):

============  ======================================
PySpark       Delta Lake
============  ======================================
4.0.x         ``io.delta:delta-spark_4.0_2.13:4.4.0``
4.1.x         ``io.delta:delta-spark_4.1_2.13:4.4.0``
4.2.x         ``io.delta:delta-spark_4.2_2.13:4.4.0``
4.3.x         none released yet: delta-rs only
============  ======================================
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from lakecdc.spark.conf import conf_value

#: Delta Lake release per Spark minor (``None``: no release for that Spark yet).
DELTA_FOR_SPARK: dict[str, str | None] = {"4.0": "4.4.0", "4.1": "4.4.0", "4.2": "4.4.0", "4.3": None}
#: Maven repository the resolution asks (``LAKECDC_MAVEN_REPO`` overrides; Ivy uses its defaults too).
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
#: Spark settings that turn Delta Lake on in a session whose classpath has its jars.
DELTA_SESSION_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


@dataclass(frozen=True)
class Package:
    """One Maven package: ``group:artifact:version``."""

    group: str
    artifact: str
    version: str

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    def pom_url(self, repo: str) -> str:
        g = self.group.replace(".", "/")
        return f"{repo}/{g}/{self.artifact}/{self.version}/{self.artifact}-{self.version}.pom"


def spark_version() -> str:
    """The installed PySpark's version, without local suffixes (``4.0.5``)."""
    import pyspark

    return pyspark.__version__.split("+")[0].split(".dev")[0]


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def delta_package(version: str | None = None) -> Package | None:
    """Delta Lake's Spark package for PySpark ``version`` (default: the installed one), or None
    when Delta has no release for that Spark."""
    minor = _minor(version or spark_version())
    delta = DELTA_FOR_SPARK.get(minor)
    return None if delta is None else Package("io.delta", f"delta-spark_{minor}_2.13", delta)


def packages(version: str | None = None) -> list[Package]:
    """The packages :func:`resolve` caches for PySpark ``version``: Delta (when released for it),
    Spark's Kafka and Avro connectors of the same version (``spark.jars.packages`` of a session
    you build yourself can name these)."""
    version = version or spark_version()
    out = [Package("org.apache.spark", a, version) for a in ("spark-sql-kafka-0-10_2.13", "spark-avro_2.13")]
    delta = delta_package(version)
    return ([delta] if delta else []) + out


def cache_dir() -> Path:
    """Where resolved jars and their lists live (``LAKECDC_CACHE`` or ``~/.cache/lakecdc``)."""
    root = os.environ.get("LAKECDC_CACHE") or str(Path.home() / ".cache" / "lakecdc")
    return Path(root) / "ivy"


def _list_file(version: str) -> Path:
    return cache_dir() / f"spark-{version}.json"


def cached_jars(version: str | None = None) -> list[str] | None:
    """The jar files resolved for PySpark ``version``, or None when they are not all cached."""
    try:
        recorded = json.loads(_list_file(version or spark_version()).read_text())
    except (OSError, ValueError):
        return None
    jars = recorded.get("jars") if isinstance(recorded, dict) else None
    if not jars or not all(Path(j).is_file() for j in jars):
        return None
    return [str(j) for j in jars]


def cached_packages(version: str | None = None) -> list[str]:
    """The Maven coordinates the cached list for ``version`` was resolved from."""
    try:
        return list(json.loads(_list_file(version or spark_version()).read_text()).get("packages") or [])
    except (OSError, ValueError, AttributeError):
        return []


def session_conf(version: str | None = None) -> dict[str, str]:
    """Settings for an embedded session: the cached jars as ``spark.jars``, and Delta's extension
    and catalog when Delta is among them. Empty when nothing is cached (or ``LAKECDC_JARS=off``)."""
    if os.environ.get("LAKECDC_JARS", "").lower() in ("off", "0", "false", "no"):
        return {}
    jars = cached_jars(version)
    if not jars:
        return {}
    conf = {"spark.jars": ",".join(jars)}
    if any(p.startswith("io.delta:") for p in cached_packages(version)):
        conf.update(DELTA_SESSION_CONF)
    return conf


def status(version: str | None = None) -> str:
    """One line saying which JVM packages an embedded session gets, and why not when none."""
    version = version or spark_version()
    if os.environ.get("LAKECDC_JARS", "").lower() in ("off", "0", "false", "no"):
        return "lakecdc: LAKECDC_JARS=off: the embedded session starts without Delta's Spark classes; engine delta-rs"
    if cached_jars(version):
        names = ", ".join(cached_packages(version))
        return f"lakecdc: embedded sessions load {names} from {cache_dir()}"
    if delta_package(version) is None:
        return f"lakecdc: Delta Lake has no release for Spark {_minor(version)} yet; engine delta-rs"
    return (f"lakecdc: Delta Lake's Spark classes for PySpark {version} are not cached (run `python -m "
            f"lakecdc.spark.jars` once with access to Maven Central); engine delta-rs")


def _served(pkg: Package, repo: str) -> bool:
    request = urllib.request.Request(pkg.pom_url(repo), method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - a fixed https URL
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _patch_releases(version: str) -> list[str]:
    """``version`` and the earlier patch releases of its minor, newest first (a mirror may lag
    PyPI by a patch release, or serve a connector without one of its dependencies)."""
    major_minor, _, patch = version.rpartition(".")
    if not patch.isdigit():
        return [version]
    return [f"{major_minor}.{p}" for p in range(int(patch), -1, -1)]


def _ivy_resolve(wanted: list[Package], repo: str) -> list[str]:
    """Resolve ``wanted`` with Spark's own Ivy (a throwaway JVM) into :func:`cache_dir`; the jar
    files it fetched. Raises when a package or one of its dependencies cannot be resolved."""
    from pyspark.sql import SparkSession

    ivy = cache_dir()
    ivy.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[1]").appName("lakecdc-resolve")
               .config("spark.ui.enabled", "false")
               .config("spark.jars.packages", ",".join(str(p) for p in wanted))
               .config("spark.jars.ivy", str(ivy)))
    if repo != MAVEN_CENTRAL:
        builder = builder.config("spark.jars.repositories", repo)
    spark = builder.getOrCreate()
    try:
        jars = ["/" + j.removeprefix("file:").lstrip("/") for j in (conf_value(spark, "spark.jars") or "").split(",") if j]
    finally:
        spark.stop()
    return [j for j in jars if Path(j).is_file()]


def resolve(version: str | None = None, *, repo: str | None = None, say=print) -> list[str]:
    """Resolve :func:`packages` through Spark's own Ivy into :func:`cache_dir` and record the jar
    list; returns it. Needs the network once; an already cached list is kept.

    Spark's connectors are taken at the installed PySpark's version, or the newest earlier patch
    release of the same minor that resolves with all its dependencies; without any, Delta alone."""
    version = version or spark_version()
    have = cached_jars(version)
    if have:
        say(status(version))
        return have
    repo = (repo or os.environ.get("LAKECDC_MAVEN_REPO") or MAVEN_CENTRAL).rstrip("/")
    delta = delta_package(version)
    if delta is not None and not _served(delta, repo):
        say(f"lakecdc: {delta} is not served by {repo}; left out")
        delta = None
    base = [delta] if delta else []
    attempts = [[*base, *(p for p in packages(v) if p.group == "org.apache.spark")] for v in _patch_releases(version)]
    attempts = [a for a in attempts if all(_served(p, repo) for p in a if p.group == "org.apache.spark")]
    for wanted in [*attempts, base]:
        if not wanted:
            continue
        try:
            jars = _ivy_resolve(wanted, repo)
        except Exception as exc:  # noqa: BLE001 - Ivy's "unresolved dependency": try the next
            say(f"lakecdc: {', '.join(map(str, wanted))} did not resolve ({type(exc).__name__}); trying fewer")
            continue
        _list_file(version).write_text(json.dumps({"packages": [str(p) for p in wanted], "jars": jars}, indent=1))
        say(status(version))
        return jars
    say(status(version))
    return []


def main(argv: list[str] | None = None) -> int:
    """``python -m lakecdc.spark.jars [--status]``: resolve and cache the packages (or say what is cached)."""
    args = sys.argv[1:] if argv is None else argv
    if "--status" in args:
        print(status())
        return 0
    try:
        resolve()
    except Exception as exc:  # noqa: BLE001 - setup goes on with delta-rs; say why in one line
        print(f"lakecdc: could not resolve Delta's Spark packages ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0] if str(exc) else ''}); engine delta-rs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
