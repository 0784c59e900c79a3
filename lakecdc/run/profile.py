"""Step 3 of a run (see :mod:`lakecdc.run.apply`): the events profiled per table.

One aggregation over the decoded events gives, per table, counts, the seq range, truncates, the
columns seen and the keys the messages carry; with the target's schema that gives the table's
shape (existing and new columns, keys: :mod:`lakecdc.merge.shape`); here also the types of its
new columns, the records a reserved column name keeps out, and the events ordered by ``sequence_by``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import infer_types, sql_string
from lakecdc.changes.sequence import SeqField, resequence
from lakecdc.changes.transactions import HELD
from lakecdc.decode.files.reread import source_of
from lakecdc.merge.quarantine import BAD_COLUMNS
from lakecdc.merge.shape import RESERVED_PREFIX, TableShape

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from lakecdc.config.settings import Progress, Settings
    from lakecdc.decode.base import Decoder

#: The kind a skipped record is counted under when its decoder names none.
NO_ROW_CHANGE = "no row change"


@dataclass
class Accounts:
    """Where a run's records went, by kind, as the profile sees them (before consolidation).

    ``skipped``: per table (``None``: no table), the skipped records by their exact kind
    (``tombstone``, ``heartbeat``, ``transaction marker``, ``schema change``, ``ddl``,
    ``comment``, ``key``, ...). ``files``: per input file, its records by what became of them:
    ``events`` (row changes, to be applied, or found duplicate or late, or quarantined by a later
    step), ``held`` (waiting for their transaction), ``skipped:<kind>``, and ``quarantined``
    (records that could not be decoded). ``events``: the row changes per input file and table;
    ``late``: per input file and table, the row changes the table's fold found duplicate or late
    (added once the table is prepared).
    """

    skipped: dict[str | None, dict[str, int]] = field(default_factory=dict)
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    events: dict[tuple[str, str], int] = field(default_factory=dict)
    late: dict[tuple[str, str], int] = field(default_factory=dict)

    def add_late(self, table: str, late: Mapping[str, int]) -> None:
        for f, n in late.items():
            self.late[f, table] = self.late.get((f, table), 0) + n

    def skipped_total(self) -> dict[str | None, int]:
        return {t: sum(kinds.values()) for t, kinds in self.skipped.items()}


def profile_events(events: DataFrame) -> tuple[dict[str, dict], int, dict[str | None, int], Accounts]:
    """One aggregation over the run: per table counts, seq range, truncates, columns, keys.

    Also returns how many records could not be decoded at all, how many records were skipped
    per table (``None``: no table): tombstones, heartbeats, transaction markers and other non-row
    records, which a decoder marks with ``op`` NULL and no ``_error`` (``source['skipped']``
    names the kind), and the :class:`Accounts` of every record, per file and kind.
    """
    rows = _profile_rows(events)
    errors = 0
    accounts = Accounts()
    by_table: dict[str | None, dict] = {}
    sources: dict[str, str] = {}
    for r in rows:
        errors += int(r["errors"])
        table = r["table"]
        staged = r["_file"] or ""
        if staged not in sources:  # a file read through a staged copy: the input file it stands for
            sources[staged] = source_of(staged) if staged else staged
        per_file = accounts.files.setdefault(sources[staged], {})
        for name in ("events", "held"):
            if r[name]:
                per_file[name] = per_file.get(name, 0) + int(r[name])
        if r["events"] and table is not None:
            at = (sources[staged], table)
            accounts.events[at] = accounts.events.get(at, 0) + int(r["events"])
        if r["errors"]:
            per_file["quarantined"] = per_file.get("quarantined", 0) + int(r["errors"])
        if r["skipped"]:
            kind = r["_kind"]
            per_file[f"skipped:{kind}"] = per_file.get(f"skipped:{kind}", 0) + int(r["skipped"])
            kinds = accounts.skipped.setdefault(table, {})
            kinds[kind] = kinds.get(kind, 0) + int(r["skipped"])
        t = by_table.setdefault(table, {"events": 0, "ddl": 0, "min_seq": None, "max_truncate": None,
                                        "columns": [], "keys": None, "keys_seq": None})
        t["events"] += int(r["events"])
        t["ddl"] += int(r["ddl"])
        if r["min_seq"] is not None and (t["min_seq"] is None or r["min_seq"] < t["min_seq"]):
            t["min_seq"] = r["min_seq"]
        if r["max_truncate"] is not None and (t["max_truncate"] is None or r["max_truncate"] > t["max_truncate"]):
            t["max_truncate"] = r["max_truncate"]
        for group in (r["after_cols"], r["before_cols"]):
            for arr in group:
                for c in arr:
                    if c not in t["columns"]:
                        t["columns"].append(c)
        # the keys of the newest record that carries keys
        if r["keys_seq"] is not None and (t["keys_seq"] is None or r["keys_seq"] > t["keys_seq"]):
            t["keys"], t["keys_seq"] = r["keys"], r["keys_seq"]
    out: dict[str, dict] = {}
    for table, t in by_table.items():
        if table is None or not (t["events"] or t["ddl"]):  # a keyed DDL alone creates its table
            continue
        out[table] = {
            "events": t["events"], "min_seq": t["min_seq"], "max_truncate": t["max_truncate"],
            "columns": t["columns"], "keys": list(t["keys"]) if t["keys"] else None,
        }
    return out, errors, accounts.skipped_total(), accounts


def _profile_rows(events: DataFrame) -> list[Row]:
    """The profile's one aggregation, per table, input file and kind of skipped record: counts of
    row changes, skipped, held and undecodable records, the seq range and newest truncate, the
    columns the images name, and the keys of the newest record that carries keys."""
    fine = F.col("_error").isNull()
    good = fine & F.col("op").isNotNull()
    held = fine & F.col("op").isNull() & F.col("source")[HELD].isNotNull()
    skip_kind = F.when(
        fine & F.col("op").isNull() & F.col("source")[HELD].isNull(),
        F.coalesce(F.col("source")["skipped"], F.lit(NO_ROW_CHANGE)),
    )
    # a schema change (Debezium's tableChanges) names the table's columns: an after image of NULLs
    ddl = fine & F.col("op").isNull() & (F.col("source")["skipped"] == "schema change") & F.col("after").isNotNull()
    has_keys = fine & F.col("keys").isNotNull()
    file = F.col("_file") if "_file" in events.columns else F.lit(None).cast("string")
    return events.groupBy("table", file.alias("_file"), skip_kind.alias("_kind")).agg(
        F.count(F.when(good, F.lit(1))).alias("events"),
        F.count(F.when(skip_kind.isNotNull(), F.lit(1))).alias("skipped"),
        F.count(F.when(held, F.lit(1))).alias("held"),
        F.count(F.when(~fine, F.lit(1))).alias("errors"),
        F.min(F.when(good, F.col("seq"))).alias("min_seq"),
        F.max(F.when(good & (F.col("op") == "T"), F.col("seq"))).alias("max_truncate"),
        F.collect_set(F.when(good | ddl, F.map_keys("after"))).alias("after_cols"),
        F.collect_set(F.when(good, F.map_keys("before"))).alias("before_cols"),
        # skipped records may name keys too (a Debezium schema change's primaryKeyColumnNames)
        F.max_by("keys", F.when(has_keys, F.col("seq"))).alias("keys"),
        F.max(F.when(has_keys, F.col("seq"))).alias("keys_seq"),
        F.count(F.when(ddl & F.col("keys").isNotNull(), F.lit(1))).alias("ddl"),
    ).collect()


def reserved_records(events: DataFrame, table: str, reserved: Sequence[str]) -> tuple[DataFrame, DataFrame]:
    """(``events`` without ``table``'s records that carry a ``reserved`` column, those records
    for the quarantine with a reason naming the column)."""
    reasons = " ".join(
        f"WHEN map_contains_key(coalesce(after, map()), {sql_string(c)}) "
        f"OR map_contains_key(coalesce(before, map()), {sql_string(c)}) THEN "
        + sql_string(f"column '{c}' has a name lakecdc keeps for its own columns ({RESERVED_PREFIX}*, and "
                     f"__START_AT/__END_AT in history tables): the record cannot be applied with it; leave the "
                     f"column out with except_column_list (--except-column-list {table}={c}) to apply such "
                     f"records without it")
        for c in reserved
    )
    clash = F.expr(f"CASE {reasons} END")
    mine = (F.col("table") == table) & F.col("_error").isNull() & F.col("op").isNotNull()
    bad = events.where(mine).select("_file", "_block", "_row", "table", clash.alias("_error")).where(
        F.col("_error").isNotNull())
    return events.where(~mine | clash.isNull()), bad


def declared_columns(
    spark: SparkSession, decoder: Decoder, shapes: Mapping[str, TableShape], files: list[str], *, staging: str,
) -> dict[str, dict[str, T.DataType]]:
    """The columns the input declares, per table, with their declared types (the decoder's
    ``column_types``: a Debezium or Avro schema, Qlik metadata, Canal's ``mysqlType``, DTS
    ``fields``), read when the run creates a table or brings a table new columns (their types
    come from it anyway); else nothing, and no pass over the input is made for it."""
    if not any(sh.new_columns or not sh.exists for sh in shapes.values()):
        return {}
    return dict(decoder.column_types(spark, files, staging=staging))


def new_column_types(
    spark: SparkSession, decoder: Decoder, settings: Settings, files: list[str],
    wanted: dict[str, dict[str, list[str]]], *, staging: str, say: Progress,
    declared: Mapping[str, Mapping[str, T.DataType]] | None = None,
) -> dict[str, dict[str, T.DataType]]:
    """Types of the new columns: declared by the input (``declared``, else read from the
    decoder), else inferred from the data, else string.

    A column the input declares is never left out: one declared without a type
    (:data:`~lakecdc.changes.columns.DECLARED_UNTYPED`) whose values are all NULL so far is a string.
    """
    if not wanted:
        return {}
    if decoder.all_strings:
        return {t: {c: T.StringType() for c in cols} for t, cols in wanted.items()}
    if declared is None:
        declared = decoder.column_types(spark, files, staging=staging)
    declared = {t: dict(cols) for t, cols in declared.items()}
    for table, contract in settings.loaded_contracts.items():  # a contract's types win over the input's
        declared[table] = {**declared.get(table, {}), **contract.types}
    out: dict[str, dict[str, T.DataType]] = {}
    rest: dict[str, dict[str, list[str]]] = {}
    untyped: dict[str, list[str]] = {}  # declared without a type (columns.DECLARED_UNTYPED)
    for table, cols in wanted.items():
        known = {c.lower(): t for c, t in declared.get(table, {}).items()}
        typed = {c for c, t in known.items() if not isinstance(t, T.NullType)}
        out[table] = {c: known[c.lower()] for c in cols if c.lower() in typed}
        left = {c: alts for c, alts in cols.items() if c.lower() not in typed}
        untyped[table] = [c for c in left if c.lower() in known]
        if left:
            rest[table] = left
    images = decoder.variant_images(spark, files, staging=staging) if rest else None
    if images is not None:
        say(f"inferring the types of new columns of {len(rest)} table(s)")
        for table, found in infer_types(images, rest).items():
            out[table].update(found)
    elif rest:
        for table, cols in rest.items():
            out[table].update({c: T.StringType() for c in cols})
    for table, names in untyped.items():  # declared, all values NULL so far: kept, as text
        out[table].update({c: T.StringType() for c in names if c not in out[table]})
    return out


def resequenced(
    events: DataFrame, table: str, fields: tuple[SeqField, ...], shape: TableShape, inferred: Mapping[str, T.DataType],
    prof: dict,
) -> tuple[DataFrame, dict, DataFrame | None]:
    """``table``'s events ordered by its ``sequence_by``: the events, the profile's seq range and
    counts again in the new basis, and the events that have no value (for the quarantine)."""
    types = {f.name: f.dataType for f in shape.existing.fields}
    types.update(inferred)
    out = resequence(events, table, fields, types, shape.spelled)
    mine = out.where(F.col("table") == table)
    good = F.col("_error").isNull() & F.col("op").isNotNull()
    row = mine.agg(
        F.count(F.when(F.col("_unordered"), F.lit(1))).alias("bad"),
        F.count(F.when(good, F.lit(1))).alias("events"),
        F.min(F.when(good, F.col("seq"))).alias("min_seq"),
        F.max(F.when(good & (F.col("op") == "T"), F.col("seq"))).alias("max_truncate"),
    ).first()
    assert row is not None
    prof = {**prof, "events": int(row["events"]), "min_seq": row["min_seq"], "max_truncate": row["max_truncate"]}
    bad = mine.where(F.col("_unordered")).select(*BAD_COLUMNS) if row["bad"] else None
    return out.drop("_unordered"), prof, bad
