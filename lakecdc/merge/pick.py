"""The Delta engine a run merges with: ``engine="auto"`` picks one for the session, a name or an
engine object chooses it (see :mod:`lakecdc.merge.engine` for what both engines do)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakecdc.errors import ConfigError
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.merge.delta_spark import DeltaSparkEngine
from lakecdc.spark.compat import delta_spark_available, is_embedded

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The engine ``auto`` picks on a session lakecdc started itself, when both engines can run there
#: (see docs/engines.md, "Two engines, one plan", and bench/RESULTS.md for the figures behind the choice).
EMBEDDED_DEFAULT_ENGINE = "delta-rs"


def auto_engine(spark: SparkSession) -> str:
    """The engine ``engine="auto"`` means on ``spark``: delta-spark where Delta Lake runs in a session
    you (or your platform) built; on lakecdc's own embedded session :data:`EMBEDDED_DEFAULT_ENGINE`
    (``LAKECDC_ENGINE`` overrides both); delta-rs where Delta's classes are absent."""
    chosen = os.environ.get("LAKECDC_ENGINE", "").strip()
    if chosen and chosen != "auto":
        return chosen
    if not delta_spark_available(spark):
        return "delta-rs"
    return EMBEDDED_DEFAULT_ENGINE if is_embedded(spark) else "delta-spark"


def make_engine(engine: str | DeltaRsEngine | None, spark: SparkSession, storage_options: Mapping[str, str] | None) -> DeltaRsEngine:
    """The engine ``engine`` names (``auto`` or None: :func:`auto_engine`), or ``engine`` itself
    when it is an engine already; a :class:`~lakecdc.errors.ConfigError` for delta-spark on a
    session without Delta Lake, or an unknown name."""
    if engine is None or engine == "auto":
        engine = auto_engine(spark)
    if engine == "delta-spark" and not delta_spark_available(spark):
        from lakecdc.spark.jars import status  # (not at the top: `python -m lakecdc.spark.jars` runs it)

        raise ConfigError(
            "engine 'delta-spark' needs Delta Lake in the Spark session (spark.sql.extensions="
            "io.delta.sql.DeltaSparkSessionExtension and Delta's jars, e.g. spark.jars.packages="
            "io.delta:delta-spark_<spark minor>_2.13:<delta version>); " + status().removeprefix("lakecdc: ")
        )
    if engine == "delta-rs":
        return DeltaRsEngine(storage_options)
    if engine == "delta-spark":
        return DeltaSparkEngine(spark)  # type: ignore[return-value]
    if isinstance(engine, str):
        raise ConfigError(f"unknown engine {engine!r}; use 'auto', 'delta-rs' or 'delta-spark'")
    return engine
