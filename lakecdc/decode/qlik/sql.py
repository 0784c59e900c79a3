"""``qlik-json`` data messages decoded in Spark SQL, the odd lines in Python.

Decoding every line in Python costs a JSON parse and a few dictionaries per message. Every line is
parsed by Spark's JSON file source instead (exact string parsing: a value keeps the text it was
written with, ``12.50`` stays ``12.50``), staged as ``{"m":[<line>]}`` (a line that is more than
one JSON value is then corrupt or an array of two; read bare, the file source would take its
first value and ignore the rest), the envelope as :data:`ENVELOPE` (``data``/``beforeData`` as
``map<string, string>``, the headers as a struct of texts). Most lines are Replicate's wrapped
data messages (``{"magic": "atMSG", "type": "DT", "messageSchemaId": ..., "message": {"data",
"beforeData", "headers"}}``) of a table version the catalog knows by that id: such a line is
decoded in SQL (:func:`decode`) when it is one this module reads exactly as the Python reader
would:

* the line is one JSON object and nothing else, parsed with no member of the wrong type, and no
  kcat record (``topic``, ``partition`` and ``offset`` all there, even as null);
* no value of the images or headers is a nested object or array, or holds a lone surrogate escape
  (:func:`_odd`); no mask whose text could be a JSON number
  (:func:`~lakecdc.decode.qlik.masks.mask_readable`);
* ``messageSchemaId`` is printable ASCII naming a known version with at most 60 ordinals (:data:`~lakecdc.decode.qlik.masks.MAX_ORDINAL`) and no
  binary column; ``data`` and ``beforeData`` (when not null) hold exactly that version's columns,
  in ordinal order, each once; the headers have an ``operation`` written in capitals, a
  digits-only ``changeSequence`` (empty only for ``REFRESH``), a ``transactionEventCounter`` of
  at most 18 digits, hex masks (any number of digits) setting no bit above the version's last ordinal;
* the image its operation needs is there.

Every other line goes to the Python reader through a pandas UDF that sees only those lines' places
(file, split, row; the others reach it as NULL) and reads their text again from the file
(:class:`~lakecdc.decode.files.reread.Rereader`), so its rows are the same as ever. The masks are
decoded by bit operations against the version's ordinals (:mod:`lakecdc.decode.qlik.masks`): a
column whose ``columnMask`` bit is 0 is left out of the images (missing, not NULL); ``changeMask``
only names ``source['changed_columns']``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import IMAGE_TYPE
from lakecdc.decode.files.lines import CORRUPT, JSON_LIMITS, read_json
from lakecdc.decode.files.reread import Rereader
from lakecdc.decode.qlik.catalog import Catalog, TableVersion
from lakecdc.decode.qlik.masks import MAX_ORDINAL, VersionMasks, mask_bits, mask_readable
from lakecdc.decode.qlik.messages import HEADER_NAMES, OPERATIONS, Row, failed, json_row
from lakecdc.decode.rows import Pairs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
_MASKS = ("changeMask", "columnMask")
#: The headers read, each as text (a struct: a name written twice is its last value, as for Python).
_HEADERS = T.StructType([T.StructField(n, T.StringType()) for n in HEADER_NAMES])
#: The members that make a line a kcat record (all three there, even as null: a variant of a
#: JSON null is no SQL NULL).
_KCAT = ("topic", "partition", "offset")
#: A data message in Replicate's envelope, as the file source reads it.
ENVELOPE = T.StructType([
    *[T.StructField(n, T.StringType()) for n in ("magic", "type", "messageSchemaId")],
    *[T.StructField(n, T.VariantType()) for n in _KCAT],
    T.StructField("message", T.StructType([T.StructField("data", _TEXT_MAP), T.StructField("beforeData", _TEXT_MAP),
                                           T.StructField("headers", _HEADERS)])),
])
#: Each line staged as ``{"m":[<line>]}`` (:func:`~lakecdc.decode.files.staging.wrapping`): one element
#: when the line is one JSON value and nothing else.
WRAP = "m[]"
WRAPPED = T.StructType([T.StructField("m", T.ArrayType(ENVELOPE))])
#: What the file source writes for a lone surrogate escape (``\\ud800``), which the Python reader
#: fails the record for.
_LONE = "?"
_SEP = "\u0001"
#: The rows of both routes (:class:`~lakecdc.decode.qlik.messages.Row` as columns), after the origin.
X_SCHEMA = T.StructType([
    T.StructField("x_table", T.StringType()), T.StructField("x_op", T.StringType()),
    T.StructField("x_ts", T.StringType()), T.StructField("x_pos", T.StringType()),
    T.StructField("x_counter", T.StringType()), T.StructField("x_seq", T.StringType()),
    T.StructField("x_txid", T.StringType()), T.StructField("x_keys", T.ArrayType(T.StringType())),
    T.StructField("x_before", IMAGE_TYPE), T.StructField("x_after", IMAGE_TYPE),
    T.StructField("x_source", _TEXT_MAP), T.StructField("x_error", T.StringType()),
])


def eligible(catalog: Catalog) -> list[tuple[str, TableVersion]]:
    """``(id, version)`` of the versions whose messages may be decoded in SQL."""
    return [(sid, tv) for sid, tv in sorted(catalog.by_id.items())
            if tv.top_ordinal <= MAX_ORDINAL and not tv.binary_columns and sid.isascii() and sid.isprintable()
            and sid.strip() == sid and sid]


class _Version(VersionMasks):
    """The SQL of one table version's messages."""

    def columns(self, m: Column) -> tuple[Column, Column, Column]:
        """``(fits, columnMask, changeMask)`` of a message of this version (``m``: ``data`` and
        ``beforeData``): whether SQL reads it (its images hold this version's columns in order,
        its masks are readable and fit), and the masks as longs (NULL when not given)."""
        data, before = m["data"], m["beforeData"]
        names = F.array(*[F.lit(n) for n in self.names])
        col_text, chg_text = F.col("_h_columnMask"), F.col("_h_changeMask")
        col_given = col_text.isNotNull() & (col_text != "")
        chg_given = chg_text.isNotNull() & (chg_text != "")
        col_value, col_ok = mask_bits(col_text, self.tv.top_ordinal)
        chg_value, chg_ok = mask_bits(chg_text, self.tv.top_ordinal)
        fits = (
            (F.map_keys(data) == names) & (before.isNull() | (F.map_keys(before) == names))
            & (~col_given | col_ok) & (~chg_given | chg_ok)
        )
        return fits, F.when(col_given, col_value), F.when(chg_given, chg_value)


def _per_version(versions: dict[int, _Version], fn: Callable[[_Version], Column], kind: str = "string") -> Column:
    """``fn`` of the row's version (``_vid``), NULL for a row of none."""
    vid = F.col("_vid")
    out = F.when(F.lit(False), F.lit(None).cast(kind))
    for k, v in versions.items():
        out = out.when(vid == k, fn(v))
    return out


def _empty() -> Column:
    return F.array().cast("array<string>")


def _pairs(pairs: Sequence[tuple[str, Column]]) -> Column:
    """A map of the pairs whose value is there and not empty, in their order. (Measured against one
    text split by ``str_to_map``: this is faster.)"""
    keys: list[Column] = []
    values: list[Column] = []
    for name, value in pairs:
        there = value.isNotNull() & (value != "")
        keys.append(F.when(there, F.array(F.lit(name))).otherwise(_empty()))
        values.append(F.when(there, F.array(value)).otherwise(_empty()))
    return F.map_from_arrays(F.concat(*keys), F.concat(*values))


def _source(versions: dict[int, _Version]) -> Column:
    """``source``: the headers in HEADER_NAMES order, the decoded masks, the version's names."""
    col, chg = F.col("_col"), F.col("_chg")
    return _pairs([
        *[(name, F.col(f"_h_{name}")) for name in HEADER_NAMES],
        ("changed_columns", F.when(chg.isNotNull(), _per_version(versions, lambda v: v.listed(chg)))),
        ("present_columns", F.when(col.isNotNull(), _per_version(versions, lambda v: v.listed(col)))),
        ("version_mask", F.when(col.isNotNull() | chg.isNotNull(),
                                _per_version(versions, lambda v: F.lit(v.tv.ordinal_mask)))),
        ("table_version", _per_version(versions, lambda v: F.lit(str(v.tv.version)))),
        ("schema_id", _per_version(versions, lambda v: F.lit(v.tv.schema_id).cast("string"))),
        ("messageSchemaId", F.col("_sid")),
    ])


def _joined() -> Column:
    """Every value of the images and headers (but the masks) after a ``\\u0001``, in one text
    (for :func:`_odd`)."""
    texts = [F.col(f"_h_{n}") for n in HEADER_NAMES if n not in _MASKS]
    return F.concat_ws(_SEP, F.lit(""), F.map_values(F.col("_data")), F.map_values(F.col("_before")), *texts)


def _odd(joined: Column) -> Column:
    """A message whose images or headers hold a value the Python reader reads otherwise: a nested
    object or array (the file source gives its text as written, the Python reader compact JSON)
    or a lone surrogate escape (:data:`_LONE`). Without a lambda
    (Spark interprets one value by value, outside the generated code): the :func:`_joined` text
    searched for ``\\u0001{`` and ``\\u0001[`` (a value holding such a pair, or a ``?``, only
    sends its line to the Python reader)."""
    # (a brace or bracket first: searching for the pair itself stops at every value's \u0001)
    return ((joined.contains("{") & joined.contains(_SEP + "{")) | (joined.contains("[") & joined.contains(_SEP + "["))
            | joined.contains(_LONE))


def _envelopes(parsed: DataFrame) -> DataFrame:
    """The envelope's parts, each in a column of its own (Spark does not share an expression
    between the branches of a condition): ``_one`` (one DT envelope, no kcat record), ``_sid``,
    ``_data``, ``_before``, ``_h_<header>``, ``_joined``."""
    parsed = parsed.select("_file", "_block", "_row", CORRUPT, F.size("m").alias("_n"),
                           F.try_element_at(F.col("m"), F.lit(1)).alias("_env"))
    env = F.col("_env")
    message, headers = env["message"], env["message"]["headers"]
    kcat = F.lit(True)
    for n in _KCAT:
        kcat = kcat & env[n].isNotNull()
    one = (F.col(CORRUPT).isNull() & (F.col("_n") == 1) & (env["magic"] == "atMSG") & (env["type"] == "DT")
           & headers.isNotNull() & ~kcat)
    return parsed.select(
        "_file", "_block", "_row", one.alias("_one"), env["messageSchemaId"].alias("_sid"),
        message["data"].alias("_data"), message["beforeData"].alias("_before"),
        *[headers[n].alias(f"_h_{n}") for n in HEADER_NAMES],
    ).select("*", _joined().alias("_joined"))


def _plain(parsed: DataFrame, known: list[tuple[str, TableVersion]], versions: dict[int, _Version]) -> DataFrame:
    """``parsed`` (:func:`_envelopes`) with ``_vid`` (the version of a candidate line), ``_plain``
    (SQL reads the line), ``_op``, and the masks ``_col``/``_chg`` as longs of the plain lines."""
    candidate = F.col("_one") & ~_odd(F.col("_joined"))
    for n in _MASKS:
        candidate = candidate & mask_readable(F.col(f"_h_{n}"))
    if known:
        vid = F.create_map(*[F.lit(x) for i, (sid, _tv) in enumerate(known) for x in (sid, F.lit(i))])[F.col("_sid")]
    else:
        vid = F.lit(None).cast("int")
    parsed = parsed.select("_file", "_block", "_row", F.when(candidate, vid).alias("_vid"), "_sid", "_data", "_before",
                           *[f"_h_{n}" for n in HEADER_NAMES])
    msg = F.struct(F.col("_data").alias("data"), F.col("_before").alias("beforeData"))
    fits = _per_version(versions, lambda v: v.columns(msg)[0], "boolean")
    col = _per_version(versions, lambda v: v.columns(msg)[1], "long")
    chg = _per_version(versions, lambda v: v.columns(msg)[2], "long")
    op = F.create_map(*[F.lit(x) for kv in OPERATIONS.items() for x in kv])[F.col("_h_operation")]
    sequence = F.col("_h_changeSequence")
    counter = F.col("_h_transactionEventCounter")
    seq_ok = F.when(sequence.isNull() | (sequence == ""), op == "R").otherwise(sequence.rlike("^[0-9]+$"))
    images_ok = F.when(op == "D", F.col("_data").isNotNull() | F.col("_before").isNotNull()).otherwise(
        F.col("_data").isNotNull())
    plain = (
        F.col("_vid").isNotNull() & F.coalesce(fits, F.lit(False)) & op.isNotNull() & seq_ok
        & (counter.isNull() | counter.rlike("^[0-9]{1,18}$")) & images_ok
    )
    parsed = parsed.select("*", F.coalesce(plain, F.lit(False)).alias("_plain"), op.alias("_op"))
    return parsed.select("*", F.when(F.col("_plain"), col).alias("_col"), F.when(F.col("_plain"), chg).alias("_chg"))


def _nonempty(c: Column) -> Column:
    return F.when(c != "", c)


def decode(parsed: DataFrame, catalog: Catalog, python_rows: Callable[..., Column], *, sql: bool = True) -> DataFrame:
    """``parsed`` (:data:`WRAPPED` lines read by :func:`~lakecdc.decode.files.lines.read_json`
    with ``wrap=WRAP``) as ``x_*`` rows (see the module docstring). ``python_rows`` is a pandas
    UDF over ``(split, _row, _file, _block)`` of the lines SQL does not read (NULL file and block
    for the others) giving the JSON of each such line's :class:`~lakecdc.decode.qlik.messages.Row`
    (:func:`python_rows`). ``sql=False``: every line to the Python reader (the reference the
    tests compare with)."""
    known = eligible(catalog) if sql else []
    versions = {i: _Version(tv) for i, (_sid, tv) in enumerate(known)}
    parsed = _plain(_envelopes(parsed), known, versions)
    opc, plain = F.col("_op"), F.col("_plain")
    small = {
        "x_table": _per_version(versions, lambda v: F.lit(v.tv.table)),
        "x_op": opc,
        "x_ts": _nonempty(F.col("_h_timestamp")),
        "x_pos": _nonempty(F.col("_h_changeSequence")),
        "x_counter": F.col("_h_transactionEventCounter"),
        "x_seq": F.lit(None).cast("string"),
        "x_txid": _nonempty(F.col("_h_transactionId")),
        "x_keys": _per_version(versions, lambda v: F.array(*[F.lit(k) for k in v.tv.keys]) if v.tv.keys else
                               F.lit(None).cast("array<string>"), "array<string>"),
        "x_error": F.lit(None).cast("string"),
    }
    # the images and the source are built above the Python UDF: in the generated code of the
    # parsing and checking below it, they would make one method too big to be compiled well
    carried = ["_vid", "_sid", "_op", "_col", "_chg", "_data", "_before", *[f"_h_{n}" for n in HEADER_NAMES]]
    done = parsed.select(
        "_file", "_block", "_row", "_plain",
        *[F.when(plain, small[n]).cast(X_SCHEMA[n].dataType).alias(n) for n in small],
        *[F.when(plain, F.col(c)).alias(c) for c in carried],
    )
    done = done.select("*", python_rows(F.xxhash64("_file", "_block"), F.col("_row"), F.when(~plain, F.col("_file")),
                                        F.when(~plain, F.col("_block"))).alias("_py"))
    data = _per_version(versions, lambda v: v.image(F.col("_data"), F.col("_col")), IMAGE_TYPE.simpleString())
    before = _per_version(versions, lambda v: v.image(F.col("_before"), F.col("_col")), IMAGE_TYPE.simpleString())
    done = done.select("*", F.from_json("_py", X_SCHEMA, JSON_LIMITS).alias("_pyrow"), data.alias("_di"), before.alias("_bi"))
    big = {
        "x_before": F.when(opc == "D", F.coalesce("_di", "_bi")).when(opc == "U", F.col("_bi")),
        "x_after": F.when(opc != "D", F.col("_di")),
        "x_source": _source(versions),
    }
    return done.select(
        "_file", "_block", "_row",
        *[F.when(plain, F.col(f.name) if f.name in small else big[f.name])
          .otherwise(F.col("_pyrow")[f.name]).cast(f.dataType).alias(f.name) for f in X_SCHEMA.fields],
    )


def read(spark: SparkSession, files: Sequence[str], catalog: Catalog, *, staging: str, sql: bool = True) -> DataFrame:
    """The lines of ``files`` as ``x_*`` rows (:func:`decode`). Run inside
    :func:`~lakecdc.decode.files.lines.exact_json_strings`."""
    parsed = read_json(spark, files, WRAPPED, staging=staging, wrap=WRAP)
    return decode(parsed, catalog, python_rows(catalog), sql=sql)


def _pairs_json(pairs: Pairs | None) -> str:
    if pairs is None:
        return "null"
    return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{json.dumps(v, ensure_ascii=False)}"
                          for k, v in pairs) + "}"


def row_json(row: Row) -> str:
    """A :class:`~lakecdc.decode.qlik.messages.Row` as the JSON ``from_json`` reads with :data:`X_SCHEMA`
    (images and source as objects, their pairs in order)."""
    try:
        json.dumps(list(row), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape such as \ud800: Arrow cannot hold it
        row = failed("a string holds a lone surrogate (a JSON escape such as \\ud800 without its pair), "
                     "which is no Unicode text", row.table)
    d = row._asdict()
    scalars = {f"x_{k}": d[k] for k in ("table", "op", "ts", "pos", "counter", "seq", "txid", "error")}
    body = ",".join(f"{json.dumps(k)}:{json.dumps(v, ensure_ascii=False)}" for k, v in scalars.items())
    return (f'{{{body},"x_keys":{json.dumps(row.keys, ensure_ascii=False)},"x_before":{_pairs_json(row.before)},'
            f'"x_after":{_pairs_json(row.after)},"x_source":{_pairs_json(row.source)}}}')


def python_rows(catalog: Catalog) -> Callable[..., Column]:
    """A pandas UDF ``(split id, row id, file, block) -> JSON of the Row``: the Python reader's
    row of each line given with its file (read again from the file by its rank within its split,
    :class:`~lakecdc.decode.files.reread.Rereader`), NULL for the others."""

    def rows(batches: Iterator[tuple[pd.Series, pd.Series, pd.Series, pd.Series]]) -> Iterator[pd.Series]:
        reader = Rereader()
        try:
            for splits, ids, files, blocks in batches:
                texts = reader.texts(splits.to_numpy(), ids.to_numpy(), files.tolist(), blocks.tolist(),
                                     files.notna().to_numpy())
                out = pd.Series([None] * len(files), dtype=object)
                for i, text in texts.items():
                    out[i] = row_json(json_row(text, catalog) if text is not None else
                                      failed("could not read the record's text again"))
                yield out
        finally:
            reader.close()

    # nondeterministic: no filter is pushed below it, so it sees every row of its partitions in
    # order (the rank of a line within its split depends on it)
    return F.pandas_udf(rows, T.StringType()).asNondeterministic()  # type: ignore[call-overload]


__all__ = ["ENVELOPE", "WRAP", "WRAPPED", "X_SCHEMA", "decode", "eligible", "python_rows", "read", "row_json"]
