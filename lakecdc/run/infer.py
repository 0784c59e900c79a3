"""Data contracts drafted from change files: the tables a run would build from them, as contracts.

``lakecdc contract infer --changes`` runs :func:`infer_contracts_from_changes`; a contract drafted
from a table lakecdc already wrote comes from :func:`lakecdc.check.contracts.infer_contract`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakecdc.check.contracts import infer_contract
from lakecdc.errors import ConfigError
from lakecdc.lake.state import known_tables, table_path
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.run.apply import apply

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def infer_contracts_from_changes(
    inputs: str | Sequence[str], *, format: str, options: Mapping[str, str] | None = None,
    keys: Mapping[str, Sequence[str]] | None = None, tables: Sequence[str] | None = None,
    spark: SparkSession | None = None,
) -> dict[str, dict[str, Any]]:
    """Draft contracts from a sample of change messages: the tables ``lakecdc.apply`` would build
    from them (the format's declared types, else types inferred from the values; keys from the
    messages, else ``keys``), built in a scratch directory that is removed afterwards.

    Example:
        >>> drafts = infer_contracts_from_changes("landing/", format="debezium-json")   # doctest: +SKIP
        >>> sorted(drafts)                                                               # doctest: +SKIP
        ['inventory.customers', 'inventory.orders']
    """
    scratch = tempfile.mkdtemp(prefix="lakecdc-contract-")
    try:
        apply(inputs, scratch, format=format, options=dict(options or {}), keys=keys, spark=spark, progress=None)
        known, engine = known_tables(scratch), DeltaRsEngine()
        wanted = list(tables) if tables else sorted(known)
        missing = [t for t in wanted if t not in known]
        if missing:
            raise ConfigError(f"the change files hold no rows of table {missing[0]!r}; they hold {sorted(known) or 'none'}")
        return {t: infer_contract(t, engine.schema(table_path(scratch, t)), known[t]) for t in wanted
                if engine.exists(table_path(scratch, t))}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
