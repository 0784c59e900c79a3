"""``debezium-json`` without schema, read by Spark: bare envelopes decoded in the JVM.

A Kafka Connect JSON line without schema (``schemas.enable=false``) is the bare envelope
``{"before", "after", "source", "op", "ts_ms", "transaction"}``. Parsing it in Python costs
about 20 s per million events on two cores; Spark's own JSON parser, with the images and the
source block read as ``map<string, string>`` of exact texts, takes about a sixth of that, and the
SQL below about twice as much again (10 s per million events in all, see bench/RESULTS.md). With the
option ``reader=spark`` (the default), a file whose first record is such an envelope
(:func:`spark_file`) is read here:

* every line is parsed by Spark's JSON file source (exact string parsing: ``17520.00`` stays
  ``17520.00``);
* a line is decoded in SQL (:func:`envelope_columns`) when it is a plain envelope this module
  reads exactly as the Python reader would (:func:`plain`): ``op`` one of ``c``/``u``/``d``/
  ``r``/``t``, a ``source`` object naming the table and a timestamp, a connector the first
  records of the files name (:class:`Shape`; any known one but MongoDB, or none, when a first
  record names another), no nested object or array anywhere but the images, source and transaction
  blocks, no unavailable-value placeholder, no lone surrogate escape (:data:`_LONE`), the image
  its op needs;
* every other line (a tombstone, a transaction marker, a schema change, a heartbeat, a bad
  record, a placeholder to drop, ...) goes to the Python reader
  (:class:`~lakecdc.decode.debezium.lines.LineReader`) through a pandas UDF that sees only those
  lines (the others reach it as NULL), so its rows are the same as ever.

One difference from reading the whole file in Python: a *key* record in the middle of such a file
is skipped as a key, but does not lend its columns to the value on the next line (a file of
alternating keys and values starts with a key, and is read in Python as a whole). Another: a lone
surrogate escape (``\\ud800``) in an image's *column name* is read as ``?`` (the Python reader
fails such a record); in a value or anywhere else it sends the line to the Python reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.debezium.lines import LineReader
from lakecdc.decode.debezium.rules import (
    KNOWN_CONNECTORS,
    NAMING,
    connector_of,
    sql_connector,
    sql_op_ts,
    sql_position,
    sql_sortable,
    sql_table,
    sql_text,
)
from lakecdc.decode.debezium.settings import OPS, Settings
from lakecdc.decode.files.lines import CORRUPT, JSON_LIMITS, read_json
from lakecdc.decode.files.reread import Rereader
from lakecdc.decode.rows import ROW_SCHEMA, Pairs, Row, encodable, failed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.decode.avro.registry import Registry

_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
#: What ``from_json`` reads of a line: the envelope, and the members that make it something else.
ENVELOPE = T.StructType(
    [T.StructField(n, _TEXT_MAP) for n in ("before", "after", "source", "transaction")]
    + [T.StructField(n, T.StringType()) for n in ("op", "ts_ms", "ts_us", "ts_ns", "schema", "payload",
                                                    "topic", "partition", "offset")]
)
#: Members of records that are no bare envelope (a Connect pair, a kcat record).
_NOT_ENVELOPE = ("schema", "payload", "topic", "partition", "offset")
_X_SCHEMA = T.StructType([f for f in ROW_SCHEMA.fields if f.name.startswith("x_")])
_X_FIELDS = tuple(_X_SCHEMA.fieldNames())
_SEP = "\u0001"
#: What Spark's JSON parser writes for a lone surrogate escape such as ``\\ud800`` (a JSON text,
#: but no Unicode one), which the Python reader fails the record for: a line with it in a value or
#: in the names of its source or transaction block goes to the Python reader. (Not looked for in
#: the images' column names: joining them costs a tenth of the decode; a name holding it is read
#: with ``?``.)
_LONE = "?"


def _bare_envelope(first_record: str | None) -> dict | None:
    """A file's first record (its first line that is no comment) when it is a bare envelope."""
    if not first_record or not first_record.startswith("{"):
        return None
    try:
        value = json.loads(first_record)
    except ValueError:
        return None
    if not isinstance(value, dict) or "schema" in value or "payload" in value or "topic" in value:
        return None
    return value if isinstance(value.get("op"), str) and isinstance(value.get("source"), dict) else None


def spark_file(first_record: str | None) -> bool:
    """True when a file's first record (its first line that is no comment) is a bare envelope."""
    return _bare_envelope(first_record) is not None


@dataclass(frozen=True)
class Shape:
    """What the first records of the files read say of their lines, to build less SQL.

    ``layout``: the members of the source block in the order the connector writes them (a block
    written so is read by position). ``connectors``: the connectors they name; when set, the SQL
    positions and table names are built for these only (a connector writes one file, and the
    generated code of every connector's positions outgrows what the JVM compiles, which costs a
    tenth of the decode), and a line of another connector goes to the Python reader. Empty:
    nothing known, every connector's SQL."""

    layout: tuple[str, ...] = ()
    connectors: tuple[str, ...] = ()


#: Nothing known of the lines.
NO_SHAPE = Shape()


def shape_of(sources: Sequence[Mapping | None]) -> Shape:
    """The :class:`Shape` of files whose first records have these ``source`` blocks (the layout
    is the first one's; no connectors when a block names none :data:`KNOWN_CONNECTORS` has)."""
    blocks = [s if isinstance(s, Mapping) else {} for s in sources]
    named = {connector_of(b) for b in blocks}
    return Shape(tuple(blocks[0]) if blocks else (),
                 tuple(sorted(named)) if named <= set(KNOWN_CONNECTORS) else ())


def source_block(first_record: str | None) -> Mapping | None:
    """The ``source`` block of a :func:`spark_file`'s first record."""
    value = _bare_envelope(first_record)
    return value["source"] if value else None


# -- SQL pieces -----------------------------------------------------------------------------------

#: The source members each connector's position is built from. Each is made sortable once, into a
#: column of its own (``_q_<name>``): written into the position's expression, a sortable text is
#: 370 lines of generated Java per use, and Oracle's position uses its members six times (9,000
#: lines, which with a Connect schema's Decimals outgrow what the JVM compiles).
_POSITION_MEMBERS = {
    "oracle": ("scn", "commit_scn", "redo_thread", "ssn"),
    "db2": ("commit_lsn", "change_lsn", "event_serial_no"),
    "sqlserver": ("commit_lsn", "change_lsn", "event_serial_no"),
    "mysql": ("pos", "row"),
    "mariadb": ("pos", "row"),
    "postgresql": ("lsn",),
}

#: ``source`` members read more than once, each looked up once per line into a column of its own
#: (``_s_<name>``): a map lookup scans the map's keys, and Spark does not share the lookups made
#: in the branches of a ``CASE``.
_LOOKED_UP = tuple(sorted(
    {"connector", "snapshot", "scn", "commit_scn", "redo_thread", "ssn", "commit_lsn", "change_lsn",
     "event_serial_no", "file", "pos", "lsn", "txId", "ts_ns", "ts_us", "ts_ms"}
    | {p for parts in NAMING.values() for p in parts}
))


class Fields:
    """The parsed envelope's columns by name (``m["source"]``), as :data:`ENVELOPE` reads them,
    and the source block's members (``m.src("scn")``), for lines of a :class:`Shape` (with a
    layout, ``_same`` says a line's block is written so)."""

    def __init__(self, shape: Shape = NO_SHAPE) -> None:
        self.layout = shape.layout
        self.connectors = shape.connectors or KNOWN_CONNECTORS
        #: the ``_conn`` values read in SQL (none named or guessed too, when nothing is known)
        self.readable = shape.connectors or (*KNOWN_CONNECTORS, "")

    def __getitem__(self, name: str) -> Column:
        return F.col(name)

    def src(self, name: str) -> Column:
        return F.col(f"_s_{name}") if name in _LOOKED_UP else F.col("source")[name]

    def source_keys(self) -> Column:
        """The source block's keys, each prefixed ``source.`` (a constant for a ``_same`` block)."""
        prefixed = _prefixed_keys(F.col("source"), "source.")
        if not self.layout:
            return prefixed
        return F.when(F.col("_same"), F.array(*[F.lit("source." + k) for k in self.layout])).otherwise(prefixed)

    def keys_fit(self) -> Column:
        """No source key holds ``\\u0001`` (which :func:`_prefixed_keys` splits at) or :data:`_LONE`
        (the keys of a ``_same`` block are the first record's, as Python read them)."""
        keys = F.array_join(F.map_keys(F.col("source")), _SEP)
        fit = (F.size(F.split(keys, _SEP)) == F.size(F.col("source"))) & ~keys.contains(_LONE)
        return F.col("_same") | fit if self.layout else fit

    def position_members(self) -> tuple[str, ...]:
        """The source members the connectors' positions are built from (:data:`_POSITION_MEMBERS`)."""
        return tuple(sorted({n for c in self.connectors for n in _POSITION_MEMBERS.get(c, ())}))

    def sortable(self, name: str) -> Column:
        """:func:`_sortable` of a :meth:`position_members` member: its column (``_q_<name>``)."""
        return F.col(f"_q_{name}")

    def has(self, name: str) -> Column:
        """The source block has the member (even as null)."""
        return F.coalesce(F.map_contains_key(F.col("source"), name), F.lit(False))


def _prefixed_keys(block: Column, prefix: str) -> Column:
    """The map's keys each with ``prefix`` (no lambda: ``transform_keys`` is interpreted per key)."""
    return F.split(F.concat(F.lit(prefix), F.array_join(F.map_keys(block), _SEP + prefix)), _SEP)


def _source_map(m: Fields) -> Column:
    """The source map of :func:`~lakecdc.decode.debezium.envelope.decode_value`: ``source.<member>``, the envelope's ts_*, ``transaction.<member>``
    (read only for a :func:`plain` line: its keys hold no ``\\u0001``). One map built from two
    arrays: building a map hashes every key, so a ``map_concat`` of maps would hash them twice."""
    keys, values = [m.source_keys()], [F.map_values(m["source"])]
    none = F.array().cast("array<string>")
    for name in ("ts_ms", "ts_us", "ts_ns"):
        keys.append(F.when(m[name].isNull(), none).otherwise(F.array(F.lit(name))))
        values.append(F.when(m[name].isNull(), none).otherwise(F.array(m[name])))
    tx = m["transaction"]
    keys.append(F.when(tx.isNull(), none).otherwise(_prefixed_keys(tx, "transaction.")))
    values.append(F.when(tx.isNull(), none).otherwise(F.map_values(tx)))
    return F.map_from_arrays(F.concat(*keys), F.concat(*values))


def odd(settings: Settings) -> Column:
    """A line has a nested object or array as a value of a block (text starting with ``{`` or
    ``[``: the Python reader writes it as compact JSON), a ``?`` in a block's value or the
    envelope's time (:data:`_LONE`), or a placeholder in an image (which it drops). Without a
    lambda, which Spark interprets value by value and which takes its projection out of the
    generated code: every value after a ``\\u0001``, all in one text, searched for ``\\u0001{``
    and ``\\u0001[`` (a value holding such a pair, or a ``?``, only sends its line to the Python
    reader), and each placeholder looked for among the images' values."""
    blocks = ("before", "after", "source", "transaction")
    times = [F.col(n) for n in ("ts_ms", "ts_us", "ts_ns")]
    joined = F.concat_ws(_SEP, F.lit(""), *[F.map_values(F.col(n)) for n in blocks], *times)
    # (a brace or bracket first: searching for the pair itself stops at every value's \\u0001)
    out = (joined.contains("{") & joined.contains(_SEP + "{")) | (joined.contains("[") & joined.contains(_SEP + "["))
    out = out | joined.contains(_LONE)
    for text in sorted(settings.placeholders):
        for n in ("before", "after"):
            out = out | F.coalesce(F.array_contains(F.map_values(F.col(n)), text), F.lit(False))
    return out


def plain(m: Fields, settings: Settings) -> Column:
    """Whether a parsed line is an envelope :func:`envelope_columns` reads as the Python reader
    would (see the module docstring); every other line goes to the Python reader."""
    op = m["op"]
    tx_keys = F.array_join(F.map_keys(m["transaction"]), "")
    needs = (
        F.when(op.isin("c", "r", "u"), m["after"].isNotNull())
        .when(op == "d", m["before"].isNotNull())
        .otherwise(F.lit(True))
    )
    checks = [
        m[CORRUPT].isNull(),
        *[m[n].isNull() for n in _NOT_ENVELOPE],
        op.isin(*OPS), m["source"].isNotNull(),
        m["_conn"].isin(*m.readable),
        ~F.coalesce(F.instr(m.src("commit_scn"), ":") > 0, F.lit(False)),
        m["_ts"].isNotNull(), m["_tbl"].isNotNull(), needs,
        m.keys_fit(),
        ~F.coalesce(tx_keys.contains(_SEP) | tx_keys.contains(_LONE), F.lit(False)),
        ~odd(settings),
    ]
    out = F.lit(True)
    for c in checks:
        out = out & F.coalesce(c, F.lit(False))
    return out


def position(m: Fields, settings: Settings) -> Column:
    """``pos`` of a :func:`plain` envelope (``sequenceBy`` names read from ``_srcmap``, the
    :func:`_source_map`)."""
    if settings.sequence_by and settings.sequence_by != ("op_ts",):
        return F.concat_ws("|", *[sql_sortable(m["_srcmap"][n]) for n in settings.sequence_by])
    return sql_position(m)


def sequence(m: Fields, settings: Settings) -> Column:
    """``seq`` of a :func:`plain` envelope, from its ``_pos``."""
    if settings.sequence_by == ("op_ts",):
        return F.lit(None).cast("string")
    return m["_pos"]  # (NULL when the connector gives no position: then op_ts orders)


def envelope_columns(m: Fields) -> dict[str, Column]:
    """The ``x_*`` columns (:data:`~lakecdc.decode.rows.ROW_SCHEMA`) of a
    :func:`plain` envelope, from the columns :func:`decode` computes first."""
    op = m["_op"]
    return {
        "x_table": m["_tbl"],
        "x_op": op,
        "x_op_ts": m["_ts"],
        "x_pos": m["_pos"],
        "x_seq": m["_seq"],
        "x_txid": F.coalesce(sql_text(m["transaction"]["id"]), sql_text(m.src("txId"))),
        "x_keys": F.lit(None).cast("array<string>"),
        "x_before": F.when(op.isin("U", "D"), m["before"]),
        "x_after": F.when(op.isin("I", "R", "U"), m["after"]),
        "x_source": m["_srcmap"],
        "x_error": F.lit(None).cast("string"),
    }


# -- the other lines, in Python -------------------------------------------------------------------


def _object(pairs: Pairs | None) -> dict[str, str | None] | None:
    return None if pairs is None else dict(pairs)


def _row_json(row: Row) -> str:
    """The ``x_*`` row as JSON (its maps as objects), for ``from_json`` with :data:`_X_SCHEMA`."""
    row = encodable(row)
    out: dict[str, object] = dict(zip(_X_FIELDS, row, strict=True))
    out.update(x_before=_object(row.before), x_after=_object(row.after), x_source=_object(row.source))
    return json.dumps(out, ensure_ascii=False)


def python_rows(settings: Settings, registry: Registry | None):  # noqa: ANN201 (a pandas UDF)
    """A pandas UDF ``(split id, row, file, block, corrupt text) -> JSON of the x_* row``: for the
    rows with a file (the lines :func:`plain` refuses), the Python reader's row; NULL for the
    others. A line's text is the corrupt-record text Spark kept, else read again from the file by
    its rank within its split (:class:`~lakecdc.decode.files.reread.Rereader`): the UDF sees every
    row of its partition, in order, so it knows where each split starts."""

    def decode(batches: Iterator[tuple[pd.Series, ...]]) -> Iterator[pd.Series]:
        reader, again = LineReader(settings, registry), Rereader()
        try:
            for splits, rows, files, blocks, texts in batches:  # (NULL file, block and text for the plain rows)
                there = files.notna().to_numpy()
                found = again.texts(splits.to_numpy(), rows.to_numpy(), files.to_numpy(), blocks.to_numpy(),
                                    there & texts.isna().to_numpy())
                out = pd.Series([None] * len(files), dtype=object)
                for i in np.flatnonzero(there).tolist():
                    text = found[i] if i in found else texts[i]
                    row = reader.read(text, files[i], int(rows[i])) if isinstance(text, str) else \
                        failed("could not read the record's text again")
                    out[i] = _row_json(row)
                yield out
        finally:
            again.close()

    # nondeterministic: no filter is pushed below it, so it sees every row of its partitions in
    # order (the rank of a line within its split depends on it)
    return F.pandas_udf(decode, T.StringType()).asNondeterministic()  # type: ignore[call-overload]


def python_texts(settings: Settings, registry: Registry | None):  # noqa: ANN201 (a pandas UDF)
    """A pandas UDF ``(row, file, text) -> JSON of the x_* row``: the Python reader's row of each
    line given with its text, NULL for the others (a route that has every line's text at hand
    needs no rank: see :func:`python_rows`)."""

    def decode(batches: Iterator[tuple[pd.Series, pd.Series, pd.Series]]) -> Iterator[pd.Series]:
        reader = LineReader(settings, registry)
        for rows, files, texts in batches:
            out = pd.Series([None] * len(texts), dtype=object)
            for i in np.flatnonzero(texts.notna().to_numpy()).tolist():
                out[i] = _row_json(reader.read(texts[i], files[i], int(rows[i])))
            yield out

    return F.pandas_udf(decode, T.StringType())  # type: ignore[call-overload]


def decode(spark: SparkSession, paths: Sequence[str], settings: Settings, registry: Registry | None, *,
           staging: str, shape: Shape = NO_SHAPE) -> DataFrame:
    """The lines of ``paths`` (files :func:`spark_file` accepts) as ROW_SCHEMA's rows.

    ``shape``: what the files' first records say of their lines (:func:`shape_of`).

    Run inside :func:`~lakecdc.decode.files.lines.exact_json_strings`.
    """
    return decode_parsed(read_json(spark, paths, ENVELOPE, staging=staging), settings, registry, shape=shape)


@dataclass(frozen=True)
class Images:
    """How a route turns a parsed line's raw images into canonical ones, in two steps with the
    Python reader between them (so that neither half of the generated code grows too large for
    the JIT: one method of 10,000 lines ran at a third of the speed of two smaller ones).

    ``beyond``: true when the line's images are beyond SQL (the line goes to the Python reader),
    evaluated on the parsed line. ``keep``: the parsed line's columns ``convert`` needs (they
    travel with the decoded row). ``convert``: the decoded rows with the ``x_before``/``x_after``
    of the lines SQL read (``_plain``) made canonical, the ``keep`` columns still there."""

    beyond: Column
    keep: tuple[str, ...]
    convert: Callable[[DataFrame], DataFrame]


def decode_parsed(parsed: DataFrame, settings: Settings, registry: Registry | None, *, shape: Shape = NO_SHAPE,
                  text: Column | str = CORRUPT, images: Images | None = None) -> DataFrame:
    """:func:`decode` of lines already parsed as :data:`ENVELOPE` (with ``_file``, ``_block``,
    ``_row`` and ``_corrupt_record``: NULL when the line parsed).

    ``text`` is the text of a line :func:`plain` refuses, for the Python reader: a column name
    (the corrupt-record text by default; NULL: read again from the file by its rank,
    :func:`python_rows`) or a column giving every line's text (:func:`python_texts`).
    ``images`` converts the raw images of a plain line (see :data:`Images`).
    """
    m = Fields(shape)
    layout = shape.layout
    ops = F.create_map(*[F.lit(x) for kv in OPS.items() for x in kv])
    # the parts used more than once, as columns of their own (each evaluated once per row)
    if layout:
        # a source block with the expected members in the expected order (all of them, as a
        # connector writes them) is read by position: one comparison per line instead of a
        # scan of the keys per member
        parsed = parsed.select("*", (F.map_keys("source") == F.array(*[F.lit(k) for k in layout])).alias("_same"))
        values = F.map_values("source")
        at = {k: i for i, k in reversed(list(enumerate(layout)))}
        looked_up = [F.when(F.col("_same"), values[at[n]] if n in at else F.lit(None).cast("string"))
                     .otherwise(F.col("source")[n]).alias(f"_s_{n}") for n in _LOOKED_UP]
    else:
        looked_up = [F.col("source")[n].alias(f"_s_{n}") for n in _LOOKED_UP]
    parsed = (
        parsed.select("*", *looked_up, ops[m["op"]].alias("_op"))
        .select("*", sql_connector(m).alias("_conn"), sql_op_ts(m).alias("_ts"))
        .select("*", sql_table(m, settings).alias("_tbl"))
        .select("*", plain(m, settings).alias("_plain"))
    )
    if images is not None:
        parsed = parsed.withColumn("_plain", F.col("_plain") & ~F.coalesce(images.beyond, F.lit(False)))
    parsed = (
        parsed
        # (each its own column: Spark does not share an expression between CASE branches)
        .select("*", F.when(F.col("_plain"), _source_map(m)).alias("_srcmap"))
        .select("*", *[F.when(F.col("_plain"), sql_sortable(m.src(n))).alias(f"_q_{n}") for n in m.position_members()])
        .select("*", F.when(F.col("_plain"), position(m, settings)).alias("_pos"))
        .select("*", sequence(m, settings).alias("_seq"))
    )
    other = lambda c: F.when(~F.col("_plain"), F.col(c) if isinstance(c, str) else c)  # noqa: E731
    fast = envelope_columns(m)
    keep = images.keep if images is not None else ()
    # the SQL columns first, so that only they (not the parsed blocks) wait beside the UDF's input
    done = parsed.select("_file", "_block", "_row", "_plain", *keep, other(text).alias("_text"),
                         *[F.when(F.col("_plain"), fast[f.name]).alias(f.name) for f in _X_SCHEMA.fields])
    if isinstance(text, str):
        udf = python_rows(settings, registry)(F.xxhash64("_file", "_block"), "_row", other("_file"), other("_block"),
                                              "_text")
    else:
        udf = python_texts(settings, registry)("_row", "_file", "_text")
    out = done.select("*", F.from_json(udf, _X_SCHEMA, JSON_LIMITS).alias("_py")).select(
        "_file", "_block", "_row", *(("_plain", *keep) if images is not None else ()),
        *[F.when(F.col("_plain"), F.col(f.name)).otherwise(F.col("_py")[f.name]).cast(f.dataType).alias(f.name)
          for f in _X_SCHEMA.fields],
    )
    if images is None:
        return out
    return images.convert(out).select("_file", "_block", "_row", *[f.name for f in _X_SCHEMA.fields])


__all__ = [
    "ENVELOPE", "NO_SHAPE", "Fields", "Images", "Shape", "decode", "decode_parsed", "envelope_columns", "odd",
    "plain", "position", "python_rows", "python_texts", "sequence", "shape_of", "source_block", "spark_file",
]
