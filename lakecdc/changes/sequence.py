"""``sequence_by``: order a table's changes by fields of the data instead of the format's default.

Every decoder gives each event a ``seq``, a string whose plain order is the format's order (by
default ``(op_ts, pos, index)``, see :func:`lakecdc.changes.events.default_seq`). Some sources order
changes by a column instead (an ``UPDATED_AT`` or ``VERSION`` the application maintains), or
deliver them out of commit order. ``sequence_by`` (DLT's ``sequence_by``) names, per table, an
ordered list of fields; the event's seq becomes their values, encoded so that string order is
value order, followed by the format's seq as the tie-breaker::

    UPDATED_AT                -> "1|00000001700000000000000|<default seq>"  (schematically)
    VERSION, source.scn:int   -> "<VERSION digits>|<scn digits>|<default seq>"

A field is one of:

==================  ==============================================================================
``op_ts``           the source commit time
``pos``             the source position (already ordered as text, left-padded like the default)
``source.<name>``   a member of the event's ``source`` map (tokens, SCN, ...): text by default
``<column>``        a column of the table: the after image's value (the before image's for a
                    delete, which has no after image); typed as the table's column
==================  ==============================================================================

A suffix sets the type a field is compared as, over the column's own: ``:int`` (whole numbers,
any size up to 38 digits), ``:ts`` (timestamps), ``:str`` (text as it is). Source fields are
text unless suffixed: ``source.scn:int`` compares SCNs as numbers.

Encodings (each keeps order when compared as text, byte by byte, which both Delta engines do):

* whole numbers and decimals: a sign digit (``0`` negative, ``1`` otherwise) and the absolute
  value's digits at the type's full width; a negative value's digits are complemented (each digit
  ``d`` becomes ``9 - d``), so -12 < -3 < 0 < 3 < 12;
* timestamps: microseconds since 1970, offset and padded (:func:`lakecdc.changes.events.sortable_micros`);
  dates: days since 1970 as a whole number; timestamps without time zone are read in the session's;
* text, and booleans (``false`` < ``true``): as they are, followed by the character U+0000 so that
  a value sorts before any longer value it starts (``ab`` < ``abc``): text values must not hold
  U+0000 themselves. Floating-point columns are refused: cast them to a decimal in a contract.

An event with no value for a field (a NULL, a partial update whose after image lacks the column, a
truncate, which has no image, or a value that is not of the field's type) cannot be ordered: it
is quarantined with a reason naming the table and the field, and the rest of the batch applies.

The MERGE's seq guard compares stored ``_cdc_seq`` values with new ones, so a table keeps one
basis for good: the first merge records it as the Delta table property ``lakecdc.sequenceBy``
(absent or empty: the format's default), and a run asking for another basis is refused
(:func:`check_basis`); a table that stores no seq yet takes the run's basis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import sortable_micros, sortable_position, zero_pad
from lakecdc.config.values import SEQ_KINDS, SeqField
from lakecdc.errors import ConfigError
from lakecdc.lake.state import stored_reaches, table_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakecdc.lake.store import Store

#: The Delta table property that records a table's sequence basis.
SEQUENCE_BY_PROPERTY = "lakecdc.sequenceBy"
KINDS = SEQ_KINDS
_WHOLE: dict[type[T.DataType], int] = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}
_NINES = "9876543210"


def basis(fields: Sequence[SeqField]) -> str | None:
    """The text recorded in :data:`SEQUENCE_BY_PROPERTY` (None: the format's default)."""
    return ",".join(str(f) for f in fields) or None


def recorded_basis(engine: Store, path: str) -> str | None:
    """The basis ``path`` records (None: the format's default, or no table)."""
    return (engine.properties(path).get(SEQUENCE_BY_PROPERTY) or None) if engine.exists(path) else None


def record_basis(engine: Store, path: str, fields: Sequence[SeqField]) -> None:
    """Record ``fields`` as ``path``'s basis (one commit; an empty value is the default)."""
    engine.set_properties(path, {SEQUENCE_BY_PROPERTY: basis(fields) or ""})


def check_basis(engine: Store, target: str, table: str, fields: Sequence[SeqField]) -> None:
    """Refuse a run whose ``sequence_by`` differs from the one ``table`` was built with.

    A table that stores no seq yet (no rows, no tombstones: created, then the run stopped) takes
    the new basis: the merge records it (see :func:`record_basis`).
    """
    path = table_path(target, table)
    recorded = recorded_basis(engine, path)
    wanted = basis(fields)
    if recorded == wanted or stored_reaches(engine, target, table, "") is False:
        return

    def say(b: str | None) -> str:
        return f"sequence_by {b}" if b else "the format's default order (no sequence_by)"

    raise ConfigError(
        f"table {table!r}: {path} was built with {say(recorded)} (its table property "
        f"{SEQUENCE_BY_PROPERTY}), but this run asks for {say(wanted)}. The seqs stored in the table "
        f"only compare with seqs of the same basis, so a table keeps its basis: run with "
        f"{'sequence_by ' + recorded if recorded else 'no sequence_by'} for this table, or rebuild the table "
        f"with the new basis (apply its change files into a new target)"
    )


def resequence(
    events: DataFrame, table: str, fields: Sequence[SeqField], types: Mapping[str, T.DataType],
    spellings: Mapping[str, Sequence[str]] | None = None,
) -> DataFrame:
    """``events`` with the seq of ``table``'s good events rebuilt from ``fields`` (other tables'
    events untouched); events without a value for a field get an ``_error`` naming it, and
    ``_unordered`` true (false for every other record).

    ``types``: the table's column types (names in any case); ``spellings``: other spellings of a
    column in the images, by lower-case name (Delta column names ignore case).
    """
    lower = {c.lower(): t for c, t in types.items()}
    parts: list[Column] = []
    missing: list[tuple[Column, str]] = []
    for f in fields:
        value, image, dtype = _field_value(f, lower, spellings or {})
        encoded = encode(value, dtype, f)
        parts.append(encoded)
        where = f" from the {image} image" if image else ""
        missing.append((encoded.isNull(), (
            f"table {table!r}: no value for sequence_by field '{f}' (NULL, missing{where}, or not a "
            f"{dtype.simpleString()}); the event cannot be ordered"
        )))
    mine = (F.col("table") == F.lit(table)) & F.col("_error").isNull() & F.col("op").isNotNull()
    reason: Column = F.lit(None).cast("string")
    for is_null, text in reversed(missing):
        reason = F.when(is_null, F.lit(text)).otherwise(reason)
    new_seq = F.concat_ws("|", *parts, F.col("seq"))
    return (
        events.withColumn("_unordered", mine & reason.isNotNull())
        .withColumn("_error", F.when(mine, reason).otherwise(F.col("_error")))
        .withColumn("seq", F.when(mine & F.col("_error").isNull(), new_seq).otherwise(F.col("seq")))
    )


def _field_value(
    f: SeqField, lower: Mapping[str, T.DataType], spellings: Mapping[str, Sequence[str]],
) -> tuple[Column, str | None, T.DataType]:
    """The field's raw value (text, or op_ts's timestamp), the image it comes from, its type."""
    kinds: dict[str | None, T.DataType] = {"int": T.DecimalType(38, 0), "ts": T.TimestampType(), "str": T.StringType()}
    if f.name == "op_ts":
        return F.col("op_ts"), None, kinds[f.kind] if f.kind else T.TimestampType()
    if f.name == "pos":
        return sortable_position(F.col("pos")), None, kinds[f.kind] if f.kind else T.StringType()
    if f.name.startswith("source."):
        # the member under its whole name (Debezium's ``source.scn``), else without the prefix
        source = F.col("source")
        value = F.when(F.map_contains_key(source, f.name), source[f.name]).otherwise(source[f.name[len("source."):]])
        return value, None, kinds[f.kind] if f.kind else T.StringType()
    names = [f.name, *(n for n in spellings.get(f.name.lower(), ()) if n != f.name)]
    image = F.when(F.col("after").isNotNull(), F.col("after")).otherwise(F.col("before"))
    value = F.coalesce(*[image[n] for n in names]) if len(names) > 1 else image[names[0]]
    dtype = kinds[f.kind] if f.kind else lower.get(f.name.lower(), T.StringType())
    return value, "after (before, for a delete)", dtype


def encode(value: Column, dtype: T.DataType, f: SeqField | str = "") -> Column:
    """``value`` (text, or already of ``dtype``) as text whose plain order is ``dtype``'s order;
    NULL when the value is NULL or not of the type."""
    if isinstance(dtype, T.DecimalType) or type(dtype) in _WHOLE:
        precision, scale = (dtype.precision, dtype.scale) if isinstance(dtype, T.DecimalType) else (_WHOLE[type(dtype)], 0)
        return _signed_digits(value.try_cast(T.DecimalType(precision, scale)), precision, scale)
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return sortable_micros(value.try_cast(T.TimestampType()))
    if isinstance(dtype, T.DateType):
        return _signed_digits(F.unix_date(value.try_cast(T.DateType())).cast(T.DecimalType(10, 0)), 10, 0)
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        raise ConfigError(
            f"sequence_by field '{f}' is a {dtype.simpleString()} column: floating-point values do not "
            "order exactly as text; declare it a decimal (a data contract) or add ':int' / ':str'"
        )
    if isinstance(dtype, T.BooleanType):
        return F.concat(value.try_cast(T.BooleanType()).cast("string"), F.lit("\x00"))
    return F.concat(value.cast("string"), F.lit("\x00"))


def _signed_digits(x: Column, precision: int, scale: int) -> Column:
    """A decimal(precision, scale) as a sign digit and fixed-width digits (complemented when negative)."""
    def digits(v: Column) -> Column:
        text = v.cast("string")
        if scale == 0:
            return zero_pad(text, precision)
        whole = zero_pad(F.substring_index(text, ".", 1), precision - scale)
        return F.concat(whole, F.substring_index(text, ".", -1))

    return (
        F.when(x.isNull(), F.lit(None).cast("string"))
        .when(x >= 0, F.concat(F.lit("1"), digits(x)))
        .otherwise(F.concat(F.lit("0"), F.translate(digits(-x), "0123456789", _NINES)))
    )

