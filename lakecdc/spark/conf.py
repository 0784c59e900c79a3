"""The Spark settings lakecdc reads and sets: on the sessions it starts, and on any session for a run.

The lowest module of :mod:`lakecdc.spark`: :mod:`~lakecdc.spark.session` starts sessions with
:data:`JVM_OPTIONS` and marks them with :data:`EMBEDDED_CONF`; every run sets :data:`JOB_CONF`
(:func:`job_conf`) on whatever session it is given; :func:`conf_value` reads a setting from any
session, a platform's that refuses to tell included.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: JVM options of the embedded session. Wide CDC tables generate big methods; without the first
#: HotSpot leaves them interpreted. The throughput collector: a batch job wants the least CPU spent
#: on garbage collection, not short pauses (G1's concurrent threads cost ~10% of the CPU of a
#: 1M-event run on 2 cores).
JVM_OPTIONS = "-XX:-DontCompileHugeMethods -XX:+UseParallelGC"

#: set on the sessions lakecdc starts itself (:func:`lakecdc.spark.session.get_spark`)
EMBEDDED_CONF = "spark.lakecdc.embedded"


def conf_value(spark: SparkSession, key: str, default: str | None = None) -> str | None:
    """The value ``spark`` gives for the setting ``key``, or ``default`` when it gives none.

    Never passes a default to Spark: for a setting Spark knows, Spark checks a given default as if
    it were a value (asking for the session time zone with an empty default fails on a session whose
    zone was never set, as in a notebook's own session). A session that refuses to tell (a
    platform's allow-list) gives ``default`` too.
    """
    try:
        value = spark.conf.get(key)
    except Exception:  # noqa: BLE001 - unset without a default, or not readable on this platform
        return default
    return default if value is None else str(value)


MAP_KEY_DEDUP = "spark.sql.mapKeyDedupPolicy"

#: Runtime SQL settings every lakecdc job needs, set for the job's duration on any session.
JOB_CONF: dict[str, str] = {
    # Keep a JSON value read as a string exactly as written (17520.00, 20-digit decimals).
    "spark.sql.json.enableExactStringParsing": "true",
    # The consolidation plans carry many aliased columns; inferring constraints over them grows
    # without bound in Catalyst (minutes, then OutOfMemoryError) and prunes nothing useful here.
    "spark.sql.constraintPropagation.enabled": "false",
    # Dynamic partition pruning and runtime (bloom) filters trace a join's keys down through every
    # projection, rewriting aliases as they go: over a decoder's wide projections (Qlik's masks
    # and versions) one plan with a key-move join took 34 s to optimize. They prune partitioned
    # scans and big joins' probe sides; lakecdc's joins (key moves) meet neither.
    "spark.sql.optimizer.dynamicPartitionPruning.enabled": "false",
    "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
    # A map built with a key twice keeps the last value instead of failing the job: decoders then
    # lay one image over another with map_concat (lakecdc.changes.events.overlay) where they would
    # otherwise filter the first with a lambda, which Spark runs interpreted. Optional: a decoder
    # reads the setting when it plans, so a session that refuses it takes the lambda.
    MAP_KEY_DEDUP: "LAST_WIN",
}


#: Settings for a run of a few hundred events at most: Spark evaluates expressions interpreted
#: instead of generating and compiling Java for each query. A small run's time is mostly that
#: compilation (its ~20 queries are new to the JVM; the rows are few): the bundled sample (15
#: events, two tables) 26.0 -> 23.4 s in a new process, 6.6-6.8 -> 4.4-5.2 s warm. From a few
#: thousand events on, generated code is faster (5,000 events: 2.3-2.8 s against 2.9-3.3 s).
#: Optional: a session that refuses them (a managed platform's allow-list) runs as usual.
INTERPRETED_CONF: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: Input bytes up to which a run counts as small (:data:`INTERPRETED_CONF`); about 500 GoldenGate
#: JSON events. ``LAKECDC_INTERPRETED_RUN_BYTES`` overrides it (-1: never).
INTERPRETED_RUN_BYTES = 256 << 10


def env_bytes(name: str, default: int, accepts: str) -> int:
    """A size in bytes from the environment variable ``name`` (``default`` when unset); a value
    that is not a whole number is a ConfigError naming it and what it ``accepts``."""
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a number of bytes ({accepts})") from None


def run_conf(input_bytes: int) -> dict[str, str]:
    """The settings of a run reading ``input_bytes``: :data:`JOB_CONF`, plus
    :data:`INTERPRETED_CONF` for a small run."""
    limit = env_bytes("LAKECDC_INTERPRETED_RUN_BYTES", INTERPRETED_RUN_BYTES, "-1: never")
    return {**JOB_CONF, **(INTERPRETED_CONF if input_bytes <= limit else {})}


@contextlib.contextmanager
def job_conf(spark: SparkSession, settings: Mapping[str, str] | None = None) -> Iterator[None]:
    """Set :data:`JOB_CONF` (or ``settings``) on ``spark`` while the block runs, then restore.

    A setting of :data:`INTERPRETED_CONF` (or :data:`MAP_KEY_DEDUP`) the session refuses is left
    as it is."""
    wanted = dict(JOB_CONF if settings is None else settings)
    previous: dict[str, str | None] = {}
    try:
        for k, v in wanted.items():
            before = spark.conf.get(k, None)
            try:
                spark.conf.set(k, v)
            except Exception:  # noqa: BLE001 - e.g. a platform that allows only listed settings
                if k not in INTERPRETED_CONF and k != MAP_KEY_DEDUP:
                    raise
                continue
            previous[k] = before
        yield
    finally:
        for k, old in previous.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)
